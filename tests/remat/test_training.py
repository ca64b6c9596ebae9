"""Rematerialization of captured training steps: the plan recomputes forward ops of the real
ATen backward (batch norm in training mode included) before the optimizer's in-place updates,
passes the verifier and the worst-case analysis, and runs for real: the loss and the
gradients, or the updated parameters, equal eager ``loss.backward()`` + ``torch.optim`` under
every policy, with chaos; on one stream the tracked allocations are the prediction."""

from __future__ import annotations

import functools

import pytest

from helpers.training import two_branch_graph, two_branch_problem
from streamplan.app import plan_remat
from streamplan.app.run import _op_memory
from streamplan.errors import BudgetError
from streamplan.ir.training import training_step
from streamplan.ir.verify import verify
from streamplan.memory.allocators import replay
from streamplan.memory.host_order import host_order_peak_bytes
from streamplan.memory.worst_case import worst_case_peak
from streamplan.models import load_model
from streamplan.remat.orders import updates_early
from streamplan.remat.rewrite import recomputations
from streamplan.runtime import run_and_compare
from streamplan.schedule import POLICIES, ScheduleContext, make_schedule
from streamplan.schedule.verify import schedule_problems

CTX = ScheduleContext(max_streams=4, time_limit_s=5)


@functools.cache
def _plan(optimizer: str, budget: str):
    return plan_remat(two_branch_graph(optimizer), budget, policy="sequential", ctx=CTX, levels=8)


def test_the_plan_recomputes_batch_norm_relu_and_a_view_and_is_checked():
    plan = _plan("sgd", "0.8x")
    ops = {n.op.split(".")[1] for n in recomputations(plan.graph)}
    assert {"_native_batch_norm_legit_functional", "relu", "convolution", "detach"} <= ops
    verify(plan.graph)
    assert schedule_problems(plan.graph, plan.schedule) == []
    wc = worst_case_peak(plan.graph, plan.schedule)
    assert wc.upper_bytes == plan.worst_case_peak_bytes <= plan.budget_bytes
    assert plan.worst_case_peak_bytes < plan.baseline_worst_case_peak_bytes
    assert training_step(plan.graph) == training_step(two_branch_graph("sgd"))  # still a training step


def test_every_recomputation_reads_what_the_original_read_before_any_update():
    g = _plan("sgd", "0.8x").graph
    pos = {nid: i for i, nid in enumerate(g.node_ids)}
    writes = {}
    for n in g.nodes:
        for v in n.mutates:
            writes.setdefault(g.storage_of(v), []).append(pos[n.id])
    for n in recomputations(g):
        assert not n.mutates
        original = g.node(n.recompute_of)
        assert original.op == n.op
        bn_stats = original.inputs[3:5] if "batch_norm" in n.op else ()
        for v in n.inputs:
            if v in bn_stats:
                continue  # the output does not depend on the running statistics
            assert all(w > pos[n.id] for w in writes.get(g.storage_of(v), ())), (n.id, v)


def test_updates_early_moves_each_update_right_after_its_gradient():
    g = two_branch_graph("adam")
    order = updates_early(g)
    assert order is not None and sorted(order) == sorted(g.node_ids)
    pos = {nid: i for i, nid in enumerate(order)}
    for n in g.nodes:
        assert all(pos[p] < pos[n.id] for p in g.predecessors(n.id))
    step = training_step(g)
    first_update = min(pos[n] for n in g.node_ids[g.position(step.first_optimizer_op) :])
    last_backward = max(pos[n] for n in g.node_ids[: g.position(step.first_optimizer_op)])
    assert first_update < last_backward
    assert updates_early(two_branch_graph("none")) is None  # no update: nothing to move


@pytest.mark.parametrize("policy", [p for p in POLICIES if p != "budget"])
def test_gradients_and_updates_equal_eager_under_every_policy_with_chaos(policy):
    cases = (("sgd", "0.8x"), ("adam", "0.9x"), ("none", "0.9x"))
    for optimizer, budget in cases[:1] if policy == "ios" else cases:  # ios: slow search, one case
        plan = _plan(optimizer, budget)
        assert plan.recomputed_ops > 0
        sched = make_schedule(plan.graph, policy, CTX)
        c = run_and_compare(
            two_branch_problem(),
            policy,
            graph=plan.graph,
            schedule=sched,
            train=True,
            optimizer=optimizer,
            chaos=True,
            seed=5,
            ctx=CTX,
        )
        assert c.matches_eager, (policy, optimizer, c.max_abs_error)


def test_one_stream_is_bit_identical_and_tracked_allocations_are_the_prediction():
    plan = _plan("sgd", "0.8x")
    c = run_and_compare(
        two_branch_problem(),
        "sequential",
        graph=plan.graph,
        schedule=plan.schedule,
        train=True,
        optimizer="sgd",
        track_allocations=True,
    )
    assert c.matches_eager and c.max_abs_error == 0.0
    g, s = c.graph, c.schedule
    assert c.result.measured_peak_bytes == host_order_peak_bytes(g, s) == plan.worst_case_peak_bytes
    predicted = replay(g, s, "exact", op_memory=_op_memory(g, c)).allocated_peak_bytes
    assert c.result.tracked_peak_bytes == predicted


def test_a_random_training_step_with_an_optimizer_runs_joint_multi_stream_plans():
    g = load_model("random:30", train=True, optimizer="momentum")
    plan = plan_remat(g, "0.6x", policy="asap", ctx=CTX, levels=6)
    assert plan.recomputed_ops > 0 and plan.worst_case_peak_bytes <= plan.budget_bytes
    c = run_and_compare(
        "random:30", "asap", graph=plan.graph, schedule=plan.schedule, train=True,
        optimizer="momentum", chaos=True, ctx=CTX,
    )  # fmt: skip
    assert c.matches_eager, c.max_abs_error


def test_below_the_floor_names_the_smallest_peak_found_and_why():
    with pytest.raises(BudgetError) as e:
        plan_remat(two_branch_graph("sgd"), "0.5x", policy="sequential", ctx=CTX, levels=8)
    msg = str(e.value)
    assert "the smallest worst-case peak found is" in msg and "needs its inputs and outputs" in msg
    assert e.value.hint and "at least" in e.value.hint


@pytest.mark.slow
def test_a_zoo_training_step_fits_half_its_peak_and_matches_eager():
    """SqueezeNet's training step (shrunk inputs, SGD): recomputation through its real ATen
    backward; the updated parameters equal eager under a multi-stream policy with chaos."""
    from helpers.training import small_zoo_problem
    from streamplan.frontends.training import capture_training

    problem = small_zoo_problem("squeezenet")
    g = capture_training(problem, optimizer="sgd", name="squeezenet")
    plan = plan_remat(g, "0.5x", policy="asap", ctx=CTX, levels=8)
    assert plan.recomputed_ops > 0 and plan.worst_case_peak_bytes <= plan.budget_bytes
    c = run_and_compare(
        problem, "asap", graph=plan.graph, schedule=plan.schedule, train=True, optimizer="sgd",
        chaos=True, ctx=CTX,
    )  # fmt: skip
    assert c.matches_eager, c.max_abs_error


@pytest.mark.slow
def test_joint_with_the_budget_policy_fits_and_runs_to_eager():
    ctx = CTX.replace(max_streams=2, options={"fixed": "sequential,memory,asap"})
    plan = plan_remat(
        two_branch_graph("sgd"), "0.8x", policy="budget", ctx=ctx, levels=4, rounds=1, policy_time_limit_s=0.5
    )
    assert plan.policy == "budget" and plan.worst_case_peak_bytes <= plan.budget_bytes
    c = run_and_compare(
        two_branch_problem(), "budget", graph=plan.graph, schedule=plan.schedule, train=True,
        optimizer="sgd", chaos=True, ctx=ctx,
    )  # fmt: skip
    assert c.matches_eager, c.max_abs_error


def test_a_rematerialized_step_keeps_the_roles_and_each_copy_has_its_originals():
    g0, plan = two_branch_graph("sgd"), _plan("sgd", "0.8x")
    g = plan.graph
    assert all(g.roles[s] == r for s, r in g0.roles.items() if s in g.storages())
    for n in recomputations(g):
        for o, orig in zip(n.outputs, g.node(n.recompute_of).outputs, strict=True):
            assert g.roles.get(g.storage_of(o)) == g0.roles.get(g0.storage_of(orig))
