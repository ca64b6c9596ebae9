"""Prescribing a parallel plan's knobs under a budget: the fastest setting that fits, a true front."""

from __future__ import annotations

import pytest

from helpers.parallel_models import stack_problem
from streamplan.budget.knobs import knob_settings, prescribe
from streamplan.errors import BudgetError
from streamplan.frontends.training import capture_training
from streamplan.parallel import ParallelPlan


@pytest.fixture(scope="module")
def step():
    return capture_training(stack_problem(8), optimizer="adam", name="stack")


@pytest.fixture(scope="module")
def free(step):
    return prescribe(step, "fsdp=4")


def test_the_grid_covers_the_knobs():
    fsdp = knob_settings(ParallelPlan.parse("fsdp=8"))
    assert len(fsdp) == 30 and len(set(fsdp)) == 30
    assert {p.in_flight for p in fsdp if not p.record_stream} == {None}
    assert len(knob_settings(ParallelPlan.parse("ddp=8"))) == 8


def test_without_a_budget_the_fastest_is_chosen_and_the_front_is_non_dominated(free):
    assert free.chosen.step_ms == min(p.step_ms for p in free.points)
    for a in free.front:
        assert not any(b.step_ms < a.step_ms and b.peak_bytes < a.peak_bytes for b in free.points)
    peaks = [p.peak_bytes for p in free.front]
    assert peaks == sorted(peaks, reverse=True)


def test_a_budget_picks_the_fastest_setting_that_fits(step, free):
    budgets = sorted({p.peak_bytes for p in free.points})
    for budget in (budgets[0], budgets[len(budgets) // 2], budgets[-1]):
        plan = prescribe(step, "fsdp=4", budget_bytes=budget)
        fitting = [p for p in plan.points if p.peak_bytes <= budget]
        assert plan.chosen is not None and plan.chosen.peak_bytes <= budget
        assert plan.chosen.step_ms == min(p.step_ms for p in fitting)
    too_small = prescribe(step, "ddp=4", budget_bytes=1024)
    assert too_small.chosen is None and "no setting fits" in "\n".join(too_small.lines())
    with pytest.raises(BudgetError):
        prescribe(step, "fsdp=4", budget_bytes=0)
