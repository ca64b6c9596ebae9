"""The worst-case peak against a brute force over every timing, and its bounds mode."""

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.dags import dag, random_dags
from helpers.memory_oracles import brute_force_worst_case, schedules_for
from helpers.schedules import asap
from streamplan.memory import live_bytes_at, liveness, worst_case_peak
from streamplan.schedule import make_schedule
from streamplan.zoo.seed import example2


@st.composite
def graph_and_schedule(draw, max_nodes=6):
    g = draw(random_dags(min_nodes=1, max_nodes=max_nodes, vary_sizes=True))
    return g, draw(schedules_for(g))


@settings(max_examples=40, deadline=None)
@given(graph_and_schedule())
def test_exact_worst_case_equals_brute_force(gs):
    g, s = gs
    wc = worst_case_peak(g, s)
    assert wc.exact
    assert wc.lower_bytes == wc.upper_bytes == brute_force_worst_case(g, s)


@settings(max_examples=25, deadline=None)
@given(graph_and_schedule())
def test_witness_is_realisable_and_gives_its_value(gs):
    g, s = gs
    wc = worst_case_peak(g, s)
    live = liveness(g, s)
    fin, run = set(wc.finished), set(wc.running)
    for op in run | fin:  # every started op has its HB predecessors finished
        assert all(u in fin for u in live.hb.direct_preds[op])
    assert live_bytes_at(live, fin, fin | run)[0] == wc.lower_bytes


def test_bounds_mode_is_a_proven_interval():
    # a graph whose launch-order position bound (6 MiB) is above its worst case (5 MiB)
    g = dag({1: [0], 2: [0, 1], 3: [1], 4: [1], 5: [2, 4], 6: [3, 2]}, 7)
    wc = worst_case_peak(g, make_schedule(g, "asap"), max_exact_ops=0)
    assert not wc.exact
    assert wc.lower_bytes <= 5 << 20 <= wc.upper_bytes <= 6 << 20
    assert wc.to_dict()["exact"] is False


def test_position_bound_closes_the_interval_when_the_witness_meets_it():
    g = example2()
    wc = worst_case_peak(g, asap(g), max_exact_ops=0)
    assert wc.exact and wc.lower_bytes == 4 << 20


def test_caller_upper_bound_can_close_the_interval():
    g = example2()
    wc = worst_case_peak(g, asap(g), max_exact_ops=0, upper_bound_bytes=4 << 20)
    assert wc.exact and wc.lower_bytes == 4 << 20


def test_cut_ops_split_the_problem():
    from streamplan.memory.worst_case import cut_positions

    g = example2()
    s = asap(g)
    assert [s.launch_order[p] for p in cut_positions(liveness(g, s), list(s.launch_order))] == ["a", "f"]


@settings(max_examples=30, deadline=None)
@given(graph_and_schedule(max_nodes=8))
def test_cut_ops_are_comparable_with_every_op(gs):
    from streamplan.memory.worst_case import cut_positions

    g, s = gs
    live = liveness(g, s)
    order = list(s.launch_order)
    cuts = {order[p] for p in cut_positions(live, order)}
    expect = {c for c in order if all(c == o or not live.hb.concurrent(c, o) for o in order)}
    assert cuts == expect
