"""The solvers' view of a graph: what may be dropped and recomputed, a plan's peak, and its
clean-up (unread recomputations go; an op whose readers all moved to a later copy moves)."""

from __future__ import annotations

import pytest

from helpers.dags import UNIT, chain, dag
from streamplan.cost.opcost import FakeCostModel
from streamplan.frontends.argcodec import tensor_ref
from streamplan.ir.graph import Graph, Node, Value
from streamplan.remat.problem import RematProblem, check_plan, evaluate, normalize
from streamplan.remat.solvers import SOLVERS, solve


def _problem(g):
    return RematProblem.build(g, None, FakeCostModel(1.0))


def test_a_skip_connection_plan_lowers_the_peak_by_one_tensor():
    g = dag(
        {1: [0], 2: [1], 3: [2], 4: [3, 0]}, 5, sizes=[UNIT, UNIT, 3 * UNIT, UNIT, UNIT]
    )  # v0 read at the end
    p = _problem(g)
    assert evaluate(p, tuple(range(5))).peak_bytes == 5 * UNIT  # n2 and n3 run with v0 kept
    stats = evaluate(p, (0, 1, 2, 3, 0, 4))  # drop v0 after n1, recompute it for n4
    assert (stats.peak_bytes, stats.recomputations, stats.added_cost_ms) == (4 * UNIT, 1, 1.0)
    for solver in SOLVERS:
        r = solve(solver, p, 4 * UNIT)
        assert r.found and r.sequence == (0, 1, 2, 3, 0, 4) and r.peak_bytes == 4 * UNIT


def test_normalize_drops_unread_recomputations_and_moves_unread_originals():
    g = chain(4)
    p = _problem(g)
    assert normalize(p, (0, 1, 1, 2, 3)) == (0, 1, 2, 3)  # the second n1 is what n2 reads...
    # ...so the first n1 is unread: it moves to where the copy was, at no cost
    assert evaluate(p, normalize(p, (0, 1, 1, 2, 3))).recomputations == 0
    assert normalize(p, (0, 1, 2, 1, 3)) == (0, 1, 2, 3)  # nobody reads the late n1


def test_outputs_are_never_dropped_and_random_ops_never_recomputed():
    g = chain(3)
    p = _problem(g)
    assert p.persistent[p.storage_ids.index("v2")] and not p.droppable[p.storage_ids.index("v2")]
    values = {"x": Value("x", (8,), "float32", 32, "input"), "d": Value("d", (8,), "float32", 32)}
    values["e"] = Value("e", (8,), "float32", 32)
    nodes = (
        Node("d", "aten.dropout.default", ("x",), ("d",), {"args": [tensor_ref("x"), 0.5, True]}),
        Node("e", "aten.relu.default", ("d",), ("e",), {"args": [tensor_ref("d")]}),
    )
    p = _problem(Graph("drop", nodes, values, ("x",), (), ("e",)))
    assert not p.recomputable[0] and not p.droppable[0]


def _updated_weight_graph():
    """a = x * w; b = atan(a); c = atan(b); w += b (in place); d = c + a: a's op reads w."""
    u = 32
    values = {"x": Value("x", (8,), "float32", u, "input"), "w": Value("w", (8,), "float32", u, "param")}
    for v in "abcd":
        values[v] = Value(v, (8,), "float32", u)
    values["w2"] = Value("w2", (8,), "float32", u, "activation", storage="w")

    def node(nid, op, ins, outs, mutates=()):
        return Node(nid, op, ins, outs, {"args": [tensor_ref(i) for i in ins]}, mutates=mutates)

    nodes = (
        node("a", "aten.mul.Tensor", ("x", "w"), ("a",)),
        node("b", "aten.atan.default", ("a",), ("b",)),
        node("c", "aten.atan.default", ("b",), ("c",)),
        node("upd", "aten.add_.Tensor", ("w", "b"), ("w2",), mutates=("w",)),
        node("d", "aten.add.Tensor", ("c", "a"), ("d",)),
    )
    return Graph("updated", nodes, values, ("x",), ("w",), ("d",))


def test_no_recomputation_after_an_in_place_write_to_its_input():
    p = _problem(_updated_weight_graph())
    a, upd = p.order.index("a"), p.order.index("upd")
    assert p.deadline[a] == upd
    check_plan(p, (0, 1, 2, 0, 3, 4))  # a again before the update: fine
    with pytest.raises(ValueError, match="in-place write"):
        check_plan(p, (0, 1, 2, 3, 0, 4))
    for solver in SOLVERS:
        r = solve(solver, p, 3 * 32)
        if r.found:
            check_plan(p, r.sequence)
