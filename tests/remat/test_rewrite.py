"""The rewrite: recomputations are ordinary, marked nodes; the result passes every check;
on one stream its peak is exactly the plan's host-order peak."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.dags import diamond, random_dags
from helpers.remat import random_plan, train_dags
from streamplan.cost.opcost import FakeCostModel
from streamplan.errors import GraphError
from streamplan.ir.graph import Node
from streamplan.ir.serialize import dumps, loads
from streamplan.ir.verify import verify
from streamplan.memory import analyze_memory, worst_case_peak
from streamplan.remat.problem import RematProblem, evaluate, normalize
from streamplan.remat.rewrite import recomputations, rewrite
from streamplan.schedule import POLICIES, ScheduleContext, make_schedule
from streamplan.schedule.verify import schedule_problems

FAST_POLICIES = [p for p in POLICIES if p != "ios"]  # ios: checked once below (slow search)


def _problem(g):
    return RematProblem.build(g, None, FakeCostModel(1.0))


def test_a_recomputation_is_a_marked_node_read_instead_of_the_original():
    g = diamond()  # n0 -> {n1, n2} -> n3
    p = _problem(g)
    g2 = rewrite(p, (0, 1, 0, 2, 3))  # n0 again before n2
    r = g2.node("n0_remat1")
    assert r.recompute_of == "n0" and r.attrs["recompute_of"] == "n0" and r.op == g.node("n0").op
    assert r.outputs == ("v0_remat1",) and g2.node("n2").inputs == ("v0_remat1",)
    assert g2.node("n2").attrs["args"] == [{"$v": "v0_remat1"}]
    assert g2.consumers("v0") == ("n1",)  # the original dies early
    assert "n1" in r.after  # never live together with the copy it replaces
    assert "(recompute of n0)" in str(g2)
    assert recomputations(g2) == (r,)


def test_json_round_trip_keeps_marks_and_ordering():
    g2 = rewrite(_problem(diamond()), (0, 1, 0, 2, 3))
    back = loads(dumps(g2))
    assert back == g2
    data = json.loads(dumps(g2))
    node = next(n for n in data["nodes"] if n["id"] == "n0_remat1")
    assert node["attrs"]["recompute_of"] == "n0" and node["after"] == ["n1"]


def test_ordering_edges_are_dependencies_everywhere():
    g2 = rewrite(_problem(diamond()), (0, 1, 0, 2, 3))
    assert "n1" in g2.predecessors("n0_remat1")
    bad = g2.replace(
        nodes=tuple(n if n.id != "n1" else Node(**{**_fields(n), "after": ("n3",)}) for n in g2.nodes)
    )
    with pytest.raises(GraphError, match="not an earlier node"):
        verify(bad)


def _fields(n):
    return {
        f: getattr(n, f)
        for f in (
            "id",
            "op",
            "inputs",
            "outputs",
            "attrs",
            "flops",
            "bytes_read",
            "bytes_written",
            "mutates",
            "after",
        )
    }


def test_a_mark_must_name_an_original_with_the_same_op():
    g2 = rewrite(_problem(diamond()), (0, 1, 0, 2, 3))
    nodes = tuple(
        Node(**{**_fields(n), "attrs": {**n.attrs, "recompute_of": "n3"}}) if n.id == "n0_remat1" else n
        for n in g2.nodes
    )
    with pytest.raises(GraphError, match="recomputation of 'n3'"):
        verify(g2.replace(nodes=nodes))


def _viewed_graph():
    """a = relu(x); av = view(a); b = relu(a); c = relu(av); d = b + c (c reads a through a view)."""
    from streamplan.frontends.argcodec import tensor_ref
    from streamplan.ir.graph import Graph, Value

    shape, nb = (64, 64), 64 * 64 * 4
    values = {v: Value(v, shape, "float32", nb, "activation") for v in ("a", "b", "c", "d")}
    values["x"] = Value("x", shape, "float32", nb, "input")
    values["av"] = Value("av", (4096,), "float32", nb, "activation", storage="a")

    def node(nid, op, ins, args):
        return Node(nid, op, tuple(ins), (nid if nid != "view" else "av",), {"args": args, "kwargs": {}})

    nodes = (
        node("a", "aten.relu.default", ["x"], [tensor_ref("x")]),
        node("view", "aten.view.default", ["a"], [tensor_ref("a"), [4096]]),
        node("b", "aten.relu.default", ["a"], [tensor_ref("a")]),
        node("c", "aten.relu.default", ["av"], [tensor_ref("av")]),
        node("d", "aten.add.Tensor", ["b", "c"], [tensor_ref("b"), tensor_ref("c")]),
    )
    return verify(Graph("viewed", nodes, values, ("x",), (), ("d",)))


def test_views_of_a_recomputed_storage_are_derived_again():
    g = _viewed_graph()
    p = _problem(g)
    a, view, b, c, d = (p.order.index(n) for n in ("a", "view", "b", "c", "d"))
    g2 = rewrite(p, (a, view, b, a, c, d))  # a again after b: c must read a view of the new copy
    again = [n for n in recomputations(g2) if n.recompute_of == "view"]
    assert len(again) == 1
    av2 = again[0].outputs[0]
    assert g2.values[av2].storage == "a_remat1" and g2.node("c").inputs == (av2,)
    assert g2.consumers("a") == ("view", "b") and not g2.consumers("av")


@settings(max_examples=40)
@given(random_dags(min_nodes=2, max_nodes=9, vary_sizes=True), st.integers(0, 1000), st.integers(0, 5))
def test_any_plan_rewrites_into_a_graph_every_check_accepts(g, seed, n_rec):
    p = _problem(g)
    seq = normalize(p, random_plan(g, seed, n_rec))
    g2 = rewrite(p, seq)
    assert verify(g2) is g2
    s1 = make_schedule(g2, "sequential")
    assert worst_case_peak(g2, s1).upper_bytes == evaluate(p, seq).peak_bytes  # exact on one stream
    for policy in FAST_POLICIES:
        s = make_schedule(g2, policy, ScheduleContext(max_streams=3))
        assert schedule_problems(g2, s) == []
        report = analyze_memory(g2, s)
        assert report.worst_case.upper_bytes >= report.host_order.peak_bytes


@settings(max_examples=15)
@given(train_dags(max_ops=8), st.integers(0, 1000))
def test_training_like_plans_run_through_ios_and_the_memory_analyses(g, seed):
    p = _problem(g)
    g2 = rewrite(p, random_plan(g, seed, 3))
    s = make_schedule(g2, "ios", ScheduleContext(max_streams=3))
    assert schedule_problems(g2, s) == []
    analyze_memory(g2, s)
