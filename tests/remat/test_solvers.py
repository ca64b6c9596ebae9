"""The solvers: every plan fits its target (by its exact host-order peak), the exact solver is
never beaten on the plans its model holds, and each handles what it cannot do."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.remat import train_dags
from streamplan.cost.opcost import AnalyticCostModel
from streamplan.errors import BudgetError
from streamplan.models import load_model
from streamplan.remat.problem import RematProblem, check_plan, evaluate
from streamplan.remat.solvers import SOLVERS, solve, solver_info

COST = AnalyticCostModel("v100")


def _problem(g):
    return RematProblem.build(g, None, COST)


def test_solvers_are_registered_by_name():
    assert SOLVERS == ("greedy", "scalable", "exact")
    with pytest.raises(BudgetError, match="unknown rematerialization solver"):
        solver_info("magic")


@settings(max_examples=25)
@given(train_dags(max_ops=9), st.floats(0.3, 1.0), st.sampled_from(SOLVERS))
def test_every_plan_fits_its_target_and_is_valid(g, frac, solver):
    p = _problem(g)
    target = int(p.baseline_peak_bytes() * frac)
    r = solve(solver, p, target, time_limit_s=5)
    if r.found:
        check_plan(p, r.sequence)
        stats = evaluate(p, r.sequence)
        assert stats.peak_bytes == r.peak_bytes <= target
        assert r.added_cost_ms == pytest.approx(stats.added_cost_ms)
    else:
        assert r.status in ("stuck", "infeasible", "unknown")


def test_no_target_under_the_largest_op_is_met():
    g = load_model("random-train:12")
    p = _problem(g)
    for solver in SOLVERS:
        assert not solve(solver, p, 1000).found


def test_baseline_targets_need_no_recomputation():
    p = _problem(load_model("random-train:12"))
    for solver in SOLVERS:
        r = solve(solver, p, p.baseline_peak_bytes())
        assert r.found and r.recomputations == 0


@pytest.mark.parametrize("n", [12, 20])
def test_exact_is_optimal_and_never_worse_than_the_plan_it_starts_from(n):
    p = _problem(load_model(f"random-train:{n}"))
    target = p.baseline_peak_bytes() * 6 // 10
    heuristic = solve("scalable", p, target)
    exact = solve("exact", p, target, time_limit_s=20)
    assert exact.status == "optimal" and exact.optimality_gap == 0.0
    assert exact.added_cost_ms <= heuristic.added_cost_ms + 1e-9
    assert exact.peak_bytes <= target


def test_exact_reports_its_gap_when_stopped_early():
    p = _problem(load_model("random-train:60"))
    r = solve("exact", p, p.baseline_peak_bytes() // 3, time_limit_s=0.5)
    assert r.status in ("feasible", "unknown", "optimal")
    if r.status == "feasible":
        assert 0.0 <= r.optimality_gap <= 1.0


def test_scalable_handles_thousands_of_ops():
    p = _problem(load_model("random-train:600"))
    r = solve("scalable", p, p.baseline_peak_bytes() // 2, time_limit_s=30)
    assert r.found and r.peak_bytes <= p.baseline_peak_bytes() // 2


def test_greedy_gives_up_rather_than_thrash():
    p = _problem(load_model("random:100"))  # inference-like: every recompute needs a long chain
    r = solve("greedy", p, p.baseline_peak_bytes() * 6 // 10)
    assert not r.found and r.status == "stuck"
