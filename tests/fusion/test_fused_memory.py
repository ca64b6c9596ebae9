"""Fused graphs under the memory oracles: the brute-force figures hold on graphs of kernels,
fused first (any schedule of the kernels) or stream-aware (a schedule's streams, carried over)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.fusion import dags_with_boundaries
from helpers.memory_oracles import brute_force_arena_bound, brute_force_worst_case, schedules_for
from streamplan.fusion import fuse, schedule_onto
from streamplan.memory import analyze_memory, liveness, worst_case_peak
from streamplan.memory.arena import plan_arena
from streamplan.schedule.verify import verify_schedule


@st.composite
def fused_first(draw):
    g = draw(dags_with_boundaries(max_nodes=8))
    r = fuse(g)
    return r, draw(schedules_for(r.graph))


@st.composite
def fused_stream_aware(draw):
    g = draw(dags_with_boundaries(max_nodes=8))
    s = draw(schedules_for(g))
    r = fuse(g, schedule=s)
    return r, s, schedule_onto(r, s)


def _oracles_hold(graph, schedule):
    verify_schedule(graph, schedule)
    wc = worst_case_peak(graph, schedule)
    assert wc.exact and wc.upper_bytes == brute_force_worst_case(graph, schedule)
    assert plan_arena(graph, schedule).lower_bound_bytes == brute_force_arena_bound(graph, schedule)


@settings(max_examples=40, deadline=None)
@given(fused_first())
def test_oracles_hold_on_kernels_fused_first(case):
    r, s = case
    _oracles_hold(r.graph, s)


@settings(max_examples=40, deadline=None)
@given(fused_stream_aware())
def test_oracles_hold_on_kernels_fused_along_streams(case):
    r, _, mapped = case
    _oracles_hold(r.graph, mapped)


@settings(max_examples=40, deadline=None)
@given(fused_stream_aware())
def test_stream_aware_kernels_never_join_ops_the_schedule_may_run_in_parallel(case):
    r, s, mapped = case
    hb = liveness(r.source, s).hb
    for parts in r.groups.values():
        assert len({s.streams[p] for p in parts}) == 1
        for i, p in enumerate(parts):
            assert all(not hb.concurrent(p, q) for q in parts[i + 1 :])
    # what ran on different streams still does, and every kernel runs on its ops' stream
    assert mapped.num_streams == s.num_streams or len(r.graph.nodes) < len(r.source.nodes)
    for kernel in r.graph.node_ids:
        ops = r.groups.get(kernel, (kernel,))
        assert mapped.streams[kernel] == s.streams[ops[0]]


@settings(max_examples=25, deadline=None)
@given(fused_stream_aware())
def test_one_stream_of_kernels_all_figures_agree(case):
    """Fused along one stream, the kernels keep the one-stream identity of every figure. (Fusion
    may raise a peak: a kernel allocates all its outputs when it starts, see docs/fusion.md.)"""
    from streamplan.schedule.events import with_derived_waits

    r, _, _ = case
    one = with_derived_waits(r.source, r.source.node_ids, dict.fromkeys(r.source.node_ids, 0), "sequential")
    fr = fuse(r.source, schedule=one)
    rep = analyze_memory(fr.graph, schedule_onto(fr, one))
    assert rep.host_order_peak_bytes == rep.worst_case.upper_bytes == rep.arena.lower_bound_bytes
