"""The budget policy: verified schedules whose worst case (checked by the analysis) fits, the floor,
and, without a budget, never slower than the fixed policies."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.dags import random_dags
from helpers.models import graph_of
from streamplan.budget.figures import memory_floor, sequential_figure_bytes
from streamplan.cost import FakeCostModel, simulate
from streamplan.errors import BudgetError, ScheduleError
from streamplan.memory import worst_case_peak
from streamplan.schedule import MemoryBudget, ScheduleContext, make_schedule
from streamplan.schedule.verify import verify_schedule
from streamplan.zoo.seed import example2

FIXED = ("sequential", "memory", "wavefront", "asap", "nimble", "ios")


def _ctx(graph, **kw):
    times = {n: 1.0 + (i * 7919 % 5) for i, n in enumerate(graph.node_ids)}
    return ScheduleContext(cost=FakeCostModel(times, occupancy=0.25, launch_ms=0.05), time_limit_s=5.0, **kw)


@settings(max_examples=25, deadline=None)
@given(random_dags(min_nodes=2, max_nodes=12, vary_sizes=True), st.sampled_from([1.0, 1.1, 1.3, 1.7, 3.0]))
def test_budget_schedules_verify_and_fit_for_every_timing(g, factor):
    floor = memory_floor(g, MemoryBudget(limit_bytes=0)).figure_bytes
    limit = int(floor * factor)
    ctx = _ctx(g, budget=MemoryBudget(limit_bytes=limit))
    for solver in ("search", "exact"):
        s = make_schedule(g, "budget", ctx.replace(options={"solver": solver}))
        verify_schedule(g, s)
        wc = worst_case_peak(g, s)  # the analysis, not the policy's bookkeeping
        assert wc.upper_bytes <= limit, (solver, wc, limit)
        assert s.meta["budget_bytes"] == limit and s.meta["figure_bytes"] <= limit


@settings(max_examples=15, deadline=None)
@given(random_dags(min_nodes=2, max_nodes=10, vary_sizes=True))
def test_without_a_budget_never_slower_than_a_fixed_policy(g):
    ctx = _ctx(g)
    best = min(simulate(g, make_schedule(g, p, ctx), ctx.cost).makespan_ms for p in FIXED)
    s = make_schedule(g, "budget", ctx)
    assert simulate(g, s, ctx.cost).makespan_ms <= best + 1e-9
    assert s.meta["budget_bytes"] is None


def test_below_the_floor_names_the_smallest_figure_and_rematerialization():
    g = example2()
    with pytest.raises(BudgetError) as e:
        make_schedule(g, "budget", ScheduleContext(budget=MemoryBudget.parse("2MiB")))
    msg = e.value.short()
    assert "3.000 MiB" in msg and "3145728 bytes" in msg and "rematerialization" in msg


def test_factor_budgets_resolve_against_the_sequential_peak():
    g = graph_of("random:50:3")
    seq = sequential_figure_bytes(g, MemoryBudget(limit_bytes=0))
    s = make_schedule(
        g, "budget", ScheduleContext(cost="h100", budget=MemoryBudget.parse("1.0x"), time_limit_s=2.0)
    )
    assert s.meta["budget_bytes"] == seq
    assert worst_case_peak(g, s).upper_bytes <= seq


def test_at_the_sequential_peak_it_keeps_most_of_the_speedup():
    g = graph_of("random:200:1")
    ctx = ScheduleContext(cost="v100", time_limit_s=3.0)
    seq = simulate(g, make_schedule(g, "sequential", ctx), ctx.cost).makespan_ms
    fastest = min(simulate(g, make_schedule(g, p, ctx), ctx.cost).makespan_ms for p in ("asap", "nimble"))
    s = make_schedule(g, "budget", ctx.replace(budget=MemoryBudget.parse("1x")))
    got = simulate(g, s, ctx.cost).makespan_ms
    assert seq / fastest > 1.1
    assert seq / got - 1 >= (seq / fastest - 1) / 2


def test_arena_figure_is_checked_with_the_arena():
    from streamplan.memory.arena import plan_arena

    g = graph_of("random:60:2")
    floor = memory_floor(g, MemoryBudget(limit_bytes=0, figure="arena")).figure_bytes
    budget = MemoryBudget(limit_bytes=int(1.3 * floor), figure="arena")
    s = make_schedule(g, "budget", ScheduleContext(cost="v100", budget=budget, time_limit_s=2.0))
    assert plan_arena(g, s).arena_bytes <= budget.limit_bytes
    with pytest.raises(BudgetError, match="worst-case peak only"):
        make_schedule(g, "budget", ScheduleContext(budget=budget, options={"solver": "exact"}))


def test_bad_options_are_schedule_errors():
    g = example2()
    with pytest.raises(ScheduleError, match="solver"):
        make_schedule(g, "budget", ScheduleContext(options={"solver": "magic"}))
    with pytest.raises(ScheduleError, match="fixed"):
        make_schedule(g, "budget", ScheduleContext(options={"fixed": "asap,fastest"}))
    s = make_schedule(g, "budget", ScheduleContext(options={"fixed": "sequential,asap"}))
    assert s.meta["source"] in ("sequential", "asap") or s.meta["source"].startswith(("asap", "sequential"))
