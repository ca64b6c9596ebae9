"""Rematerialized graphs run for real: the CPU runtime gives the original's outputs bit for bit
under every policy and chaos delays, and on one stream the kernels' tracked allocations are the
predicted peak."""

from __future__ import annotations

import functools

import pytest

from streamplan.app import plan_remat
from streamplan.cost.measured import MeasuredTable
from streamplan.memory.allocators import OpMemory, replay
from streamplan.models import load_model
from streamplan.runtime import run
from streamplan.runtime.interpret import initial_env
from streamplan.runtime.op_timing import op_scratch_bytes
from streamplan.schedule import POLICIES, ScheduleContext, make_schedule

CTX = ScheduleContext(max_streams=4, time_limit_s=5)


@functools.cache
def _case():
    g = load_model("random-train:16")
    plan = plan_remat(g, "0.6x", policy="sequential", ctx=CTX, levels=8)
    reference = run(g, make_schedule(g, "sequential")).outputs
    return g, plan, reference


def _same(a, b) -> bool:
    return len(a) == len(b) and all(x.equal(y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_runs_the_rewritten_graph_to_the_same_bits(policy):
    g, plan, reference = _case()
    assert plan.recomputed_ops > 0
    s = make_schedule(plan.graph, policy, CTX)
    for seed in (0, 1):
        assert _same(run(plan.graph, s, chaos=True, chaos_seed=seed).outputs, reference)


def test_a_joint_multi_stream_plan_runs_to_the_same_bits():
    g, _, reference = _case()
    plan = plan_remat(g, "0.7x", policy="asap", ctx=CTX, levels=8)
    assert plan.recomputed_ops > 0 and plan.schedule.num_streams > 1
    assert _same(run(plan.graph, plan.schedule, chaos=True, chaos_seed=3).outputs, reference)


def test_one_stream_tracked_allocations_are_the_predicted_peak():
    _, plan, _ = _case()
    g2, s = plan.graph, plan.schedule
    result = run(g2, s, track_allocations=True)
    scratch = op_scratch_bytes(g2, initial_env(g2, None, None))
    predicted = replay(g2, s, "exact", op_memory=OpMemory.from_table(g2, MeasuredTable("cpu", {}, scratch)))
    assert result.tracked_peak_bytes == predicted.allocated_peak_bytes
    assert result.measured_peak_bytes == plan.worst_case_peak_bytes  # the graph's own tensors
