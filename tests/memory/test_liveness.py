"""Liveness with aliasing (views extend their base, in-place writes too), outputs, inputs."""

import pytest

from helpers.dags import UNIT
from streamplan.errors import ScheduleError
from streamplan.ir.graph import Graph, Node, Value
from streamplan.ir.includes import EVERYTHING
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory import host_order_trace, liveness, worst_case_peak
from streamplan.schedule.events import with_derived_waits


def aliased() -> Graph:
    """x -> a; v = view(a); relu_(v) in place; b = atan(x); c = add(v, b) -> out."""
    sh = (256, 1024)
    values = {
        "x": Value("x", sh, "float32", UNIT, "input"),
        "w": Value("w", sh, "float32", UNIT, "param"),
        "a": Value("a", sh, "float32", UNIT),
        "v": Value("v", sh, "float32", UNIT, storage="a"),
        "v2": Value("v2", sh, "float32", UNIT, storage="a"),
        "b": Value("b", sh, "float32", UNIT),
        "c": Value("c", sh, "float32", UNIT),
    }
    nodes = (
        Node("na", "aten.atan.default", ("x",), ("a",)),
        Node("nv", "aten.view.default", ("a",), ("v",)),
        Node("nb", "aten.atan.default", ("x",), ("b",)),
        Node("nr", "aten.relu_.default", ("v",), ("v2",), mutates=("v",)),
        Node("nc", "aten.add.Tensor", ("v2", "b"), ("c",)),
    )
    return Graph("aliased", nodes, values, ("x",), ("w",), ("c",))


def seq(g):
    return with_derived_waits(g, g.node_ids, {op: 0 for op in g.node_ids}, "sequential")


def test_views_and_inplace_extend_the_base_storage():
    g = aliased()
    lives = liveness(g, seq(g)).by_storage()
    assert set(lives) == {"a", "b", "c"}  # activations only by default
    assert lives["a"].users == ("na", "nv", "nr", "nc")
    assert lives["a"].last_users == ("nc",) and not lives["a"].persistent
    assert lives["c"].persistent


def test_inputs_and_params_are_separate_and_resident():
    g = aliased()
    s = seq(g)
    assert host_order_trace(g, s).trace_bytes() == [UNIT, UNIT, 2 * UNIT, 2 * UNIT, 3 * UNIT, UNIT]
    lv = liveness(g, s, includes=EVERYTHING).by_storage()
    assert lv["x"].creator is None and lv["x"].persistent and lv["w"].kind == "param"
    with_all = host_order_trace(g, s, includes=EVERYTHING)
    assert with_all.peak_bytes == 5 * UNIT
    assert "inputs" in with_all.includes.describe()


def test_concurrent_readers_are_all_last_users():
    g = aliased()
    order = ["na", "nb", "nv", "nr", "nc"]
    s = with_derived_waits(g, order, {"na": 0, "nv": 0, "nr": 0, "nc": 0, "nb": 1}, "two")
    live = liveness(g, s)
    assert live.hb.concurrent("na", "nb")
    assert worst_case_peak(g, s).lower_bytes == 3 * UNIT


def test_rejects_unordered_dependency():
    g = aliased()
    bad = StreamSchedule(g.node_ids, {"na": 0, "nv": 1, "nb": 0, "nr": 1, "nc": 1}, (), "bad")
    with pytest.raises(ScheduleError, match="not ordered"):
        liveness(g, bad)


def test_rejects_incomplete_schedule():
    g = aliased()
    with pytest.raises(ScheduleError, match="never launched"):
        liveness(g, StreamSchedule(g.node_ids[:2], {"na": 0, "nv": 0}, (), "short"))


def test_lifetimes_table_on_the_launch_line():
    g = aliased()
    order = ["na", "nb", "nv", "nr", "nc"]
    s = with_derived_waits(g, order, {"na": 0, "nv": 0, "nr": 0, "nc": 0, "nb": 1}, "two")
    live = liveness(g, s, includes=EVERYTHING)
    lt = live.lifetimes
    assert lt is live.lifetimes  # computed once
    got = {life.storage: (b, d) for life, b, d in zip(live.lives, lt.birth, lt.death, strict=True)}
    assert lt.n == 5
    assert got == {"x": (-1, 5), "w": (-1, 5), "a": (0, 4), "b": (1, 4), "c": (4, 5)}
    index = live.hb.launch_index
    for life, d in zip(live.lives, lt.death, strict=True):
        if not life.persistent:  # the last user in launch order is HB-maximal
            assert d == max(index[u] for u in life.last_users)
