"""host-order <= worst-case; simulated <= worst-case <= arena bound <= arena; one stream: all equal."""

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.dags import random_dags
from helpers.memory_oracles import schedules_for, timelines_for
from streamplan.ir.includes import Includes
from streamplan.memory import analyze_memory
from streamplan.schedule.events import with_derived_waits


@st.composite
def case(draw, max_streams=3, max_nodes=9):
    g = draw(random_dags(min_nodes=1, max_nodes=max_nodes, vary_sizes=True))
    s = draw(schedules_for(g, max_streams=max_streams))
    return g, s, draw(timelines_for(s))


def _check(g, s, tl, **inc):
    r = analyze_memory(g, s, timeline=tl, **inc)
    wc = r.worst_case
    assert wc.exact
    assert r.host_order_peak_bytes <= wc.lower_bytes
    assert r.simulated_peak_bytes <= wc.lower_bytes
    assert wc.upper_bytes <= r.arena.lower_bound_bytes <= r.arena.arena_bytes
    return r


@settings(max_examples=40, deadline=None)
@given(case(), st.booleans())
def test_figures_are_ordered(c, inputs):
    _check(*c, includes=Includes(inputs=inputs))


@settings(max_examples=30, deadline=None)
@given(case(max_streams=1, max_nodes=12))
def test_one_stream_all_figures_agree(c):
    g, s, tl = c
    r = _check(g, s, tl)
    assert r.host_order_peak_bytes == r.worst_case.lower_bytes == r.simulated_peak_bytes
    assert r.simulated_peak_bytes == r.arena.lower_bound_bytes


@settings(max_examples=15, deadline=None)
@given(random_dags(min_nodes=2, max_nodes=9, vary_sizes=True))
def test_one_stream_equal_via_cp_sat_too(g):
    """The single-stream shortcut agrees with the general solver on one stream."""
    from streamplan.memory import liveness
    from streamplan.memory.worst_case import _host_order_witness, _solve_segment

    s = with_derived_waits(g, g.node_ids, {op: 0 for op in g.node_ids}, "sequential")
    live = liveness(g, s)
    w = _host_order_witness(live, list(s.launch_order))
    order = list(s.launch_order)
    sol = _solve_segment(live, order, 0, len(order), 5.0, w)
    assert sol.value == sol.upper_bytes == w.live_bytes
