"""The scalable search against the exact optimum on graphs small enough for CP-SAT.

Ops take fixed times, at most 4 run at once and never fill the device, launches and events
cost nothing: there the simulator and the exact model agree, so the exact optimum is a lower
bound on any schedule's simulated makespan and the gap is measured, not estimated. The
distribution over more graphs is in BENCHMARKS.md (bench/budget_gap.py).
"""

from __future__ import annotations

import random
import statistics

import pytest

from helpers.dags import UNIT, dag
from streamplan.budget.exact import exact_budget_schedule
from streamplan.budget.figures import memory_floor
from streamplan.cost import FakeCostModel, simulate
from streamplan.memory import worst_case_peak
from streamplan.schedule import MemoryBudget, ScheduleContext, make_schedule

STREAMS = 4


def cases(count: int, seed: int = 0):
    rng = random.Random(seed)
    for _ in range(count):
        n = rng.randint(7, 11)
        edges = {i: rng.sample(range(i), rng.randint(1, min(i, 2))) for i in range(1, n)}
        g = dag(edges, n, sizes=[rng.randint(1, 4) * UNIT for _ in range(n)])
        cost = FakeCostModel({f"n{i}": float(rng.randint(1, 10)) for i in range(n)}, occupancy=1 / STREAMS)
        floor = memory_floor(g, MemoryBudget(limit_bytes=0)).figure_bytes
        yield g, cost, int(floor * rng.choice([1.0, 1.2, 1.5, 2.0]))


@pytest.mark.slow
def test_search_is_close_to_the_exact_optimum():
    gaps = []
    for g, cost, limit in cases(10):
        ctx = ScheduleContext(max_streams=STREAMS, cost=cost, time_limit_s=3.0, budget=MemoryBudget(limit))
        exact = exact_budget_schedule(g, ctx, limit, time_limit_s=10.0)
        found = make_schedule(g, "budget", ctx.replace(options={"solver": "search"}))
        assert worst_case_peak(g, found).upper_bytes <= limit
        assert worst_case_peak(g, exact.schedule).upper_bytes <= limit
        found_ms = simulate(g, found, cost).makespan_ms
        if exact.optimal:  # nothing beats a proven optimum (up to the time grid's rounding)
            assert found_ms >= exact.plan_makespan_ms * (1 - 1e-3)
        gaps.append(found_ms / simulate(g, exact.schedule, cost).makespan_ms - 1)
    assert statistics.mean(gaps) <= 0.05, gaps
    assert max(gaps) <= 0.25, gaps
