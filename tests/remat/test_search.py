"""The search: the budget bounds the worst case of the final schedule; larger budgets never give
slower plans; a budget no plan meets is a user error that says how low plans go and why."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.remat import train_dags
from streamplan.app import plan_remat
from streamplan.errors import BudgetError
from streamplan.memory.worst_case import worst_case_peak
from streamplan.models import load_model
from streamplan.remat.candidates import ONE_STREAM_ORDER, POLICY_ORDER
from streamplan.remat.evaluation import project
from streamplan.remat.search import search
from streamplan.schedule import ScheduleContext
from streamplan.schedule.verify import schedule_problems

CTX = ScheduleContext(max_streams=3, time_limit_s=5)


def _run(g, budget, policy="asap", solver="scalable", **kw):
    return search(g, budget, policy=policy, solver=solver, ctx=CTX, levels=8, **kw)


@settings(max_examples=12)
@given(
    train_dags(max_ops=7),
    st.floats(0.2, 1.1),
    st.floats(0.2, 1.1),
    st.sampled_from(["asap", "sequential", "nimble"]),
)
def test_a_larger_budget_is_never_slower_and_the_peak_always_fits(g, f1, f2, policy):
    lo, hi = sorted((f1, f2))
    results = []
    for f in (lo, hi):
        try:
            results.append(_run(g, f"{f}x", policy=policy))
        except BudgetError:
            results.append(None)
    small, large = results
    for r in results:
        if r is not None:
            c = r.chosen
            assert c.peak_bytes <= r.budget_bytes
            assert worst_case_peak(c.graph, c.schedule).upper_bytes == c.peak_bytes  # truthful
            assert schedule_problems(c.graph, c.schedule) == []
    if small is not None:
        assert large is not None  # what fits a smaller budget fits a larger one
        assert large.chosen.makespan_ms <= small.chosen.makespan_ms
        if large.chosen.makespan_ms == small.chosen.makespan_ms:
            assert large.chosen.peak_bytes <= small.chosen.peak_bytes


def test_a_budget_the_baseline_meets_recomputes_nothing():
    g = load_model("random-train:10")
    r = _run(g, "1x")
    assert r.chosen.recomputed_ops == 0 and r.chosen.peak_bytes == r.baseline.peak_bytes


def test_joint_is_never_slower_than_remat_for_one_stream_then_schedule():
    g = load_model("random-train:30")
    for budget in ("0.8x", "0.6x"):
        joint = _run(g, budget, joint=True)
        separate = _run(g, budget, joint=False)
        assert joint.chosen.makespan_ms <= separate.chosen.makespan_ms
        assert separate.chosen.reference == ONE_STREAM_ORDER
        assert joint.chosen.reference in (POLICY_ORDER, ONE_STREAM_ORDER)


def test_below_the_floor_is_a_user_error_saying_how_low_plans_go():
    g = load_model("random-train:10")
    with pytest.raises(BudgetError) as e:
        _run(g, "1KiB")
    text = e.value.short()
    assert "no plan fits a budget of" in text and "smallest worst-case peak found is" in text
    assert "needs its inputs and outputs" in text
    assert e.value.hint.startswith("choose a budget of at least")


def test_projection_keeps_the_originals_in_schedule_order():
    g = load_model("random-train:10")
    r = _run(g, "0.8x")
    order = project(r.chosen.schedule.launch_order, g)
    assert sorted(order) == sorted(g.node_ids)


def test_the_api_result_carries_the_figures_the_json_needs():
    g = load_model("random-train:12")
    plan = plan_remat(g, "0.8x", policy="asap", ctx=CTX, levels=8)
    d = plan.to_dict()
    for key in (
        "budget_bytes",
        "worst_case_peak_bytes",
        "baseline_worst_case_peak_bytes",
        "makespan_ms",
        "baseline_makespan_ms",
        "added_compute_ms",
        "recomputed_ops",
        "solver",
        "optimality_gap",
    ):
        assert key in d
    assert d["worst_case_peak_bytes"] <= d["budget_bytes"] < d["baseline_worst_case_peak_bytes"]
    assert d["recomputed_ops"] == sum(1 for n in plan.graph.nodes if n.recompute_of) > 0
    assert d["optimality_gap"] is None  # the scalable solver proves nothing
    exact = plan_remat(g, "0.8x", policy="asap", solver="exact", ctx=CTX, levels=6)
    assert exact.optimality_gap is not None and 0.0 <= exact.optimality_gap <= 1.0


@settings(max_examples=8, deadline=None)
@given(
    st.integers(4, 9),
    st.integers(0, 50),
    st.sampled_from(["none", "sgd", "adam"]),
    st.floats(0.3, 1.0),
    st.floats(0.3, 1.0),
    st.sampled_from(["asap", "sequential"]),
)
def test_training_steps_a_larger_budget_is_never_slower_nor_higher_at_equal_speed(
    n, seed, opt, f1, f2, policy
):
    """The same property on training steps (``random:N`` with a loss, backward and an optimizer
    update written in place): a larger budget never answers slower, nor higher at equal speed."""
    g = load_model(f"random:{n}:{seed}", train=True, optimizer=opt)
    lo, hi = sorted((f1, f2))
    results = []
    for f in (lo, hi):
        try:
            results.append(search(g, f"{f}x", policy=policy, ctx=CTX, levels=5, rounds=1))
        except BudgetError:
            results.append(None)
    small, large = results
    for r in results:
        if r is not None:
            assert r.chosen.peak_bytes <= r.budget_bytes
            assert worst_case_peak(r.chosen.graph, r.chosen.schedule).upper_bytes == r.chosen.peak_bytes
    if small is not None:
        assert large is not None
        assert large.chosen.makespan_ms <= small.chosen.makespan_ms
        if large.chosen.makespan_ms == small.chosen.makespan_ms:
            assert large.chosen.peak_bytes <= small.chosen.peak_bytes
