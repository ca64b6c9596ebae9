"""The exact CP-SAT formulation on tiny graphs: optimal under its stated model, within the budget
for every timing, and its plan is what the simulator predicts when the model and simulator agree."""

from __future__ import annotations

import pytest

from helpers.dags import UNIT, chain, dag, diamond
from streamplan.budget.exact import exact_budget_schedule, plan_to_schedule
from streamplan.cost import FakeCostModel, simulate
from streamplan.errors import BudgetError
from streamplan.ir.includes import Includes
from streamplan.memory import worst_case_peak
from streamplan.schedule import MemoryBudget, ScheduleContext
from streamplan.schedule.verify import verify_schedule


def ctx(times, streams=4, occupancy=0.25):
    return ScheduleContext(max_streams=streams, cost=FakeCostModel(times, occupancy=occupancy))


def test_chain_takes_the_sum_of_its_ops():
    g = chain(4)
    r = exact_budget_schedule(g, ctx(1.0), 10 * UNIT)
    assert r.optimal and r.gap == 0.0
    assert r.plan_makespan_ms == pytest.approx(4.0, rel=1e-3)


def test_diamond_runs_its_branches_together_when_memory_allows():
    g = diamond()
    times = {"n0": 1.0, "n1": 3.0, "n2": 3.0, "n3": 1.0}
    roomy = exact_budget_schedule(g, ctx(times), 10 * UNIT)
    assert roomy.plan_makespan_ms == pytest.approx(5.0, rel=1e-3)
    assert roomy.schedule.num_streams == 2


def test_a_tight_budget_serialises_the_branches():
    # n0 -> {n1 -> n2, n3 -> n4} -> n5 with 4 MiB temporaries n1, n3: both branches at once need 10 MiB;
    # at 6 MiB the second branch may only start once the first one's temporary is freed
    g = dag(
        {1: [0], 2: [1], 3: [0], 4: [3], 5: [2, 4]}, 6, sizes=[UNIT, 4 * UNIT, UNIT, 4 * UNIT, UNIT, UNIT]
    )
    times = {"n0": 1.0, "n1": 3.0, "n2": 1.0, "n3": 3.0, "n4": 1.0, "n5": 1.0}
    roomy = exact_budget_schedule(g, ctx(times), 20 * UNIT)
    tight = exact_budget_schedule(g, ctx(times), 6 * UNIT)
    assert roomy.plan_makespan_ms == pytest.approx(6.0, rel=1e-3)
    assert tight.plan_makespan_ms == pytest.approx(10.0, rel=1e-3)
    assert worst_case_peak(g, roomy.schedule).upper_bytes == 10 * UNIT
    for r, limit in ((roomy, 20 * UNIT), (tight, 6 * UNIT)):
        verify_schedule(g, r.schedule)
        assert worst_case_peak(g, r.schedule).upper_bytes <= limit


def test_simulated_makespan_is_the_plan_when_the_model_holds():
    g = dag({1: [0], 2: [0], 3: [1], 4: [2], 5: [3, 4], 6: [0]}, 7)
    times = {f"n{i}": float(1 + i % 3) for i in range(7)}
    c = ctx(times, streams=3, occupancy=1 / 3)  # no launch costs, never over the device
    r = exact_budget_schedule(g, c, 5 * UNIT)
    assert simulate(g, r.schedule, c.cost).makespan_ms <= r.plan_makespan_ms + 1e-9
    assert r.schedule.num_streams <= 3


def test_plan_to_schedule_orders_every_pair_the_plan_orders():
    g = dag({}, 3)  # three independent ops
    s = plan_to_schedule(g, [0, 0, 5], [5, 3, 7])  # n2 starts after n0 and n1 end
    from streamplan.memory.liveness import HappensBefore

    hb = HappensBefore(g, s)
    assert hb.hb("n0", "n2") and hb.hb("n1", "n2") and hb.concurrent("n0", "n1")


def test_resident_bytes_over_the_budget_is_an_error():
    g = chain(2)
    c = ScheduleContext(
        cost=FakeCostModel(1.0), budget=MemoryBudget(limit_bytes=UNIT, includes=Includes(inputs=True))
    )
    with pytest.raises(BudgetError, match="resident"):
        exact_budget_schedule(g, c, UNIT // 2)


def test_time_limit_reports_a_gap():
    g = dag({i: [i - 2, i - 1] if i > 1 else [0] for i in range(1, 16)}, 16)
    times = {f"n{i}": float(1 + (i * 7) % 5) for i in range(16)}
    r = exact_budget_schedule(g, ctx(times), 6 * UNIT, time_limit_s=0.05, workers=1)
    assert 0.0 <= r.gap < 1.0 and r.lower_bound_ms <= r.plan_makespan_ms + 1e-9
    assert r.meta()["exact_optimal"] is r.optimal
