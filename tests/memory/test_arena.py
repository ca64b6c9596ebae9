"""Static arena: checker, lower bound against brute force, placement quality."""

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.dags import random_dags
from helpers.memory_oracles import brute_force_arena_bound, schedules_for
from helpers.schedules import asap
from streamplan.ir.includes import Includes
from streamplan.memory import arena_overlaps, liveness, plan_arena
from streamplan.zoo.random_dag import random_dag
from streamplan.zoo.seed import example2


def test_checker_accepts_plan_and_catches_overlap():
    g = example2()
    s = asap(g)
    plan = plan_arena(g, s)
    live = liveness(g, s)
    assert arena_overlaps(live, plan.offsets) == []
    bad = dict(plan.offsets, d=plan.offsets["a"])  # a may still be live (b slow) while d runs
    assert ("a", "d") in arena_overlaps(live, bad) or ("d", "a") in arena_overlaps(live, bad)


def test_checker_allows_sharing_between_never_coexisting():
    g = example2()
    s = asap(g)
    live = liveness(g, s)
    offs = dict(plan_arena(g, s).offsets, f=plan_arena(g, s).offsets["a"])  # a is dead before f
    assert arena_overlaps(live, offs) == []


@st.composite
def graph_and_schedule(draw, max_nodes=7):
    g = draw(random_dags(min_nodes=1, max_nodes=max_nodes, vary_sizes=True))
    return g, draw(schedules_for(g))


@settings(max_examples=40, deadline=None)
@given(graph_and_schedule())
def test_bound_is_max_weight_clique_and_plan_is_valid(gs):
    g, s = gs
    plan = plan_arena(g, s)
    assert plan.lower_bound_exact
    assert plan.lower_bound_bytes == brute_force_arena_bound(g, s)
    assert arena_overlaps(liveness(g, s), plan.offsets) == []
    assert plan.arena_bytes >= plan.lower_bound_bytes


def test_random_graph_multi_stream_arena_near_bound():
    g = random_dag(300, seed=3)
    order = list(g.node_ids)
    from streamplan.schedule.events import with_derived_waits

    s = with_derived_waits(g, order, {op: i % 3 for i, op in enumerate(order)}, "rr3")
    plan = plan_arena(g, s)
    assert arena_overlaps(liveness(g, s), plan.offsets) == []
    assert plan.lower_bound_exact and plan.arena_bytes <= 1.05 * plan.lower_bound_bytes


@settings(max_examples=30, deadline=None)
@given(graph_and_schedule(max_nodes=9), st.booleans())
def test_conflict_pairs_match_pairwise_definition(gs, inputs):
    from streamplan.memory import conflict_pairs, may_coexist

    g, s = gs
    live = liveness(g, s, includes=Includes(inputs=inputs))
    lives = live.lives
    got = set(zip(*(a.tolist() for a in conflict_pairs(live)), strict=True))
    expect = {
        (i, j)
        for i in range(len(lives))
        for j in range(i + 1, len(lives))
        if may_coexist(live, lives[i], lives[j])
    }
    assert got == expect


@settings(max_examples=30, deadline=None)
@given(graph_and_schedule(max_nodes=9))
def test_launch_interval_fallback_is_valid(gs):
    from streamplan.memory.arena import _plan_by_launch_intervals, _Ranges

    g, s = gs
    live = liveness(g, s)
    plan = _plan_by_launch_intervals(live, _Ranges(live))
    assert arena_overlaps(live, plan.offsets) == []
    assert plan.arena_bytes >= plan.lower_bound_bytes == plan_arena(g, s).lower_bound_bytes


def test_best_fit_takes_the_smallest_fitting_gap_else_the_top():
    import numpy as np

    from streamplan.memory.arena import _best_fit

    def fit(spans, nbytes):
        lo = np.array([a for a, _ in spans], dtype=np.int64)
        hi = np.array([b for _, b in spans], dtype=np.int64)
        return _best_fit(lo, hi, nbytes)

    assert fit([], 8) == 0
    spans = [(10, 20), (0, 4), (30, 40), (24, 26)]  # gaps [4, 10), [20, 24), [26, 30)
    assert fit(spans, 4) == 20  # the smallest gap that fits, the lowest of equal ones
    assert fit(spans, 5) == 4
    assert fit(spans, 7) == 40  # nothing fits: the top
    assert fit([(0, 50), (10, 20)], 5) == 50  # a span nested in another leaves no gap
