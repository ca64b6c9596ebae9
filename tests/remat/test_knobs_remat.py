"""Rematerialization as a knob of a parallel plan: when no setting of the knobs fits a budget,
recomputation makes the fastest ones fit, checked on the allocator replayed with the budget as
its device memory; and the choice prefers settings that need not return cached memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.cli import cli
from helpers.parallel_models import wide_problem
from streamplan.budget.knobs import KnobPoint, front_and_choice, knob_context, prescribe
from streamplan.frontends.training import capture_training
from streamplan.ir.includes import EVERYTHING
from streamplan.memory.allocators import replay
from streamplan.parallel import ParallelPlan, rank_program
from streamplan.remat.budget import peak_floor
from streamplan.remat.knobs import prescribe_with_remat
from streamplan.schedule.context import DEFAULT_CONTEXT
from streamplan.schedule.registry import make_schedule

PLAN = "fsdp=2"
SPEC = f"{Path(__file__).parents[1] / 'helpers' / 'parallel_models.py'}:wide"


@pytest.fixture(scope="module")
def step():
    return capture_training(wide_problem(), optimizer="adam", name="wide")


@pytest.fixture(scope="module")
def grid(step):
    return prescribe(step, PLAN)


def test_fitting_is_checked_with_the_budget_as_the_device_memory(step, grid):
    p = min(grid.front, key=lambda p: p.needed_bytes)
    assert p.held_bytes <= p.needed_bytes < p.peak_bytes  # the cache grows past what it needs
    budget = p.needed_bytes
    again = next(q for q in prescribe(step, PLAN, budget_bytes=budget).points if q.plan == p.plan)
    assert again.fits and again.cache_releases > 0 and again.fit_class == 1
    setting = ParallelPlan.parse(p.plan)
    program = rank_program(step, setting)
    s = make_schedule(program, "overlap", knob_context(setting, DEFAULT_CONTEXT))
    capped = replay(program, s, "torch-cuda", includes=EVERYTHING, run_ahead=True, device_memory_bytes=budget)
    assert capped.oom is None and capped.reserved_peak_bytes <= budget


def test_below_what_every_setting_needs_recomputation_makes_one_fit(step, grid):
    budget = int(min(p.needed_bytes for p in grid.front) * 0.85)
    knobs_only = prescribe(step, PLAN, budget_bytes=budget)
    assert knobs_only.chosen is None
    plan = prescribe_with_remat(step, PLAN, budget_bytes=budget, tries=1)  # one search per round: quicker
    c = plan.chosen
    assert c is not None and c.recomputed_ops > 0 and c.added_compute_ms > 0
    assert c.fits and c.held_bytes <= budget and c.needed_bytes <= budget
    same = next(p for p in grid.points if p.plan == c.plan)
    assert c.step_ms > same.step_ms  # recomputation is paid for in the step
    assert plan.remat_tried >= 1 and c in plan.points and "remat of" in "\n".join(plan.lines())


def test_below_every_programs_floor_nothing_is_searched(step, grid, monkeypatch):
    floor = min(
        peak_floor(rank_program(step, ParallelPlan.parse(p.plan)), EVERYTHING).bytes for p in grid.points
    )
    import streamplan.remat.knobs as knobs

    def never(*args, **kwargs):
        raise AssertionError("searched below the floor")

    monkeypatch.setattr(knobs, "search", never)
    plan = prescribe_with_remat(step, PLAN, budget_bytes=floor - 1)
    assert plan.chosen is None and plan.remat_tried >= 1
    text = "\n".join(plan.lines())
    assert "no setting fits even with rematerialization" in text
    least = min(p.needed_bytes for p in plan.front)  # what a budget must be, not the uncapped peak
    assert f"the least device memory a setting on the front runs in is {least / 2**20:.2f} MiB" in text


def test_a_smaller_budget_recomputes_more(step, grid):
    low = min(p.needed_bytes for p in grid.front)
    steps = []
    for frac in (0.9, 0.6):
        c = prescribe_with_remat(step, PLAN, budget_bytes=int(low * frac), tries=1).chosen
        assert c is not None
        steps.append((c.recomputed_ops, c.step_ms))
    assert steps[1][0] > steps[0][0] and steps[1][1] > steps[0][1]


def test_without_tries_or_with_room_to_spare_it_is_the_knobs_alone(step, grid):
    budget = int(min(p.needed_bytes for p in grid.front) * 0.85)
    assert (
        prescribe_with_remat(step, PLAN, budget_bytes=budget, tries=0).points
        == prescribe(step, PLAN, budget_bytes=budget).points
    )
    roomy = max(p.peak_bytes for p in grid.points)
    plan = prescribe_with_remat(step, PLAN, budget_bytes=roomy)
    assert plan.remat_tried == 0 and plan.chosen.recomputed_ops == 0
    assert plan.chosen.step_ms == min(p.step_ms for p in grid.points)


def _point(step_ms: float, fits: bool, releases: int) -> KnobPoint:
    return KnobPoint("p", "k", step_ms, 0.0, 100, 50, fits, cache_releases=releases)


def test_the_choice_prefers_settings_that_need_not_return_cached_memory():
    fast_release = _point(1.0, True, 3)
    slow_clean = _point(1.2, True, 0)
    too_big = _point(0.5, False, 0)
    _, chosen = front_and_choice((fast_release, slow_clean, too_big), budget_bytes=100)
    assert chosen is slow_clean
    _, chosen = front_and_choice((fast_release, too_big), budget_bytes=100)
    assert chosen is fast_release
    _, chosen = front_and_choice((too_big,), budget_bytes=100)
    assert chosen is None


def test_the_plan_command_adds_rematerialization(grid):
    budget = int(min(p.needed_bytes for p in grid.front) * 0.85)
    args = ("plan", SPEC, "--parallel", PLAN, "--budget", str(budget), "--json")
    with_remat = json.loads(cli(*args[:-1], "--remat-tries", "1", "--json").stdout)
    assert with_remat["chosen"]["recomputed_ops"] > 0 and with_remat["remat_tried"] >= 1
    knobs_only = cli(*args[:-1], "--remat-tries", "0")
    assert knobs_only.returncode == 0 and "no setting fits" in knobs_only.stdout
