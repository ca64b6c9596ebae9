"""Seed golden cases and RAF's three-ReLU trace (every tensor 1 MiB, activations only)."""

import pytest

from helpers.schedules import asap, sequential
from streamplan.cost.timeline import OpSpan, Timeline
from streamplan.frontends.builder import GraphBuilder
from streamplan.ir.includes import Includes
from streamplan.memory import analyze_memory, host_order_events, host_order_trace
from streamplan.zoo.seed import example1, example2

MIB = 1 << 20


def timeline(g, s, durations):
    spans, end, last = [], {}, {}
    for i, op in enumerate(s.launch_order):
        st = max([end[p] for p in g.predecessors(op)] + [last.get(s.streams[op], 0.0)])
        end[op] = st + durations.get(op, 1.0)
        last[s.streams[op]] = end[op]
        spans.append(OpSpan(op, s.streams[op], float(i), st, end[op]))
    return Timeline(tuple(spans), max(end.values()), {})


def three_relus():
    b = GraphBuilder("relu3")
    x = b.input("x", (256, 1024))
    r = b.relu(b.relu(b.relu(x)))
    return b.build([r])


def test_raf_three_relu_trace():
    g = three_relus()
    s = sequential(g)
    assert [b / MIB for b in host_order_trace(g, s).trace_bytes()] == [1, 2, 2, 1]
    assert [b / MIB for b in host_order_trace(g, s, includes=Includes(inputs=True)).trace_bytes()] == [
        2,
        3,
        3,
        2,
    ]


def test_host_order_events_convention():
    g = three_relus()
    ev = host_order_events(g, sequential(g), includes=Includes(inputs=True))
    assert (ev[0].kind, ev[0].storage, ev[0].launch_index, ev[0].stream) == ("alloc", "x", -1, -1)
    kinds = [(e.kind, e.launch_index) for e in ev[1:]]
    assert kinds == [("alloc", 0), ("alloc", 1), ("free", 1), ("alloc", 2), ("free", 2)]


@pytest.mark.parametrize("make", [sequential, asap])
def test_example1_three_units_everywhere(make):
    g = example1()
    s = make(g)
    r = analyze_memory(g, s, timeline=timeline(g, s, {}))
    d = r.to_dict()
    assert d["host_order_peak_bytes"] == 3 * MIB
    assert d["worst_case_peak_bytes"] == {"lower": 3 * MIB, "upper": 3 * MIB, "exact": True}
    assert d["simulated_peak_bytes"] == 3 * MIB
    assert d["arena_bytes"] == d["arena_lower_bound_bytes"] == 3 * MIB


def test_example2_sequential_three_units():
    g = example2()
    s = sequential(g)
    d = analyze_memory(g, s, timeline=timeline(g, s, {})).to_dict()
    assert d["host_order_peak_bytes"] == 3 * MIB
    assert d["worst_case_peak_bytes"] == {"lower": 3 * MIB, "upper": 3 * MIB, "exact": True}
    assert d["simulated_peak_bytes"] == 3 * MIB
    assert d["arena_bytes"] == d["arena_lower_bound_bytes"] == 3 * MIB
    assert d["includes"] == {"activations": True, "inputs": False, "params": False}


def test_example2_asap():
    g = example2()
    s = asap(g)
    r = analyze_memory(g, s)
    assert r.host_order_peak_bytes == 3 * MIB
    assert r.to_dict()["worst_case_peak_bytes"] == {"lower": 4 * MIB, "upper": 4 * MIB, "exact": True}
    assert set(r.worst_case.live) == {"a", "b", "c", "d"}
    assert r.arena.arena_bytes == 5 * MIB
    assert r.arena.lower_bound_bytes == 5 * MIB and r.arena.lower_bound_exact
    assert set(r.arena.bound_storages) == {"a", "b", "c", "d", "e"}


def test_example2_asap_simulated_between_three_and_four():
    g = example2()
    s = asap(g)
    # kernels dominate, branches in lockstep: c and d overlap while a, b are still live
    even = analyze_memory(g, s, timeline=timeline(g, s, {})).simulated_peak_bytes
    assert even == 4 * MIB
    # a slow b: c and e finish on stream 1 first; a dies (c done) before d starts
    skewed = analyze_memory(g, s, timeline=timeline(g, s, {"b": 10.0})).simulated_peak_bytes
    assert 3 * MIB <= skewed <= 4 * MIB


def test_includes_inputs_adds_resident_input():
    g = example2()
    s = asap(g)
    r = analyze_memory(g, s, includes=Includes(inputs=True))
    assert r.host_order_peak_bytes == 4 * MIB
    assert r.worst_case.lower_bytes == r.worst_case.upper_bytes == 5 * MIB
    assert r.arena.lower_bound_bytes == 6 * MIB
    assert r.to_dict()["includes"]["inputs"] is True
