"""Activation-checkpointing policies as plans: blocks are the model's numbered submodules, full
checkpointing keeps only what leaves a block and makes the rest again before the block's
backward, selective also keeps every other matmul; both are valid plans, run to eager's bits, and
the search at their peak recomputes no more FLOPs than they do."""

from __future__ import annotations

import functools

import pytest

from helpers.training import block_graph, block_problem, mlp_graph
from streamplan.app.remat import plan_checkpointing, plan_remat
from streamplan.errors import BudgetError
from streamplan.ir.training import training_step
from streamplan.remat.checkpoint import blocks, checkpoint_plan
from streamplan.remat.problem import RematProblem, check_plan, evaluate
from streamplan.remat.rewrite import recomputations
from streamplan.runtime import run_and_compare
from streamplan.schedule import ScheduleContext

CTX = ScheduleContext(max_streams=1, time_limit_s=5)


@functools.cache
def _priced(policy: str):
    return plan_checkpointing(block_graph("adam"), policy, policy="sequential", ctx=CTX)


def test_blocks_are_the_numbered_submodules_cut_at_the_residual_stream():
    g = block_graph("adam")
    found = blocks(g)
    assert [b.name for b in found] == ["layers.0", "layers.1", "layers.2"]
    for a, b in zip(found, found[1:], strict=False):
        assert a.end == b.start
    for b in found:
        ops = [g.node(g.node_ids[i]).op for i in range(b.start, b.end)]
        assert ops[0] == "aten.native_layer_norm.default" and ops[-1] == "aten.add.Tensor"
        assert sum(op == "aten.mm.default" for op in ops) == 2


def test_a_model_without_numbered_blocks_is_refused():
    with pytest.raises(BudgetError, match="no repeated blocks"):
        blocks(mlp_graph("sgd"))


@pytest.mark.parametrize("policy", ["full", "selective"])
def test_the_plan_recomputes_block_ops_before_the_block_backward(policy):
    g = block_graph("adam")
    p = RematProblem.build(g, None, CTX.cost)
    seq = checkpoint_plan(p, policy)
    check_plan(p, seq)
    inside = {g.node_ids[i] for b in blocks(g) for i in range(b.start, b.end)}
    backward = g.position(training_step(g).first_backward_op)
    seen: set[int] = set()
    for i, k in enumerate(seq):
        if k in seen:  # a recomputation: of a block op, placed before a backward op
            assert p.order[k] in inside
            first_original_after = next(j for j in seq[i + 1 :] if j not in seen)
            assert g.position(p.order[first_original_after]) >= backward
        seen.add(k)
    assert evaluate(p, seq).peak_bytes < p.baseline_peak_bytes()


def test_selective_keeps_the_first_matmul_of_each_block_and_full_recomputes_it():
    full = {n.recompute_of for n in recomputations(_priced("full").graph)}
    selective = {n.recompute_of for n in recomputations(_priced("selective").graph)}
    assert {"mm", "mm_2", "mm_4"} <= full
    assert not {"mm", "mm_2", "mm_4"} & selective
    assert _priced("full").worst_case_peak_bytes <= _priced("selective").worst_case_peak_bytes


@pytest.mark.parametrize("policy", ["full", "selective"])
def test_a_checkpointed_step_runs_to_the_same_bits(policy):
    plan = _priced(policy)
    assert plan.recomputed_ops > 0
    assert plan.worst_case_peak_bytes < plan.baseline_worst_case_peak_bytes
    c = run_and_compare(
        block_problem(), "sequential", graph=plan.graph, schedule=plan.schedule, train=True, optimizer="adam"
    )
    assert c.matches_eager and c.max_abs_error == 0.0


def test_the_search_at_the_full_checkpointing_peak_recomputes_fewer_flops():
    ac = _priced("full")
    plan = plan_remat(block_graph("adam"), ac.worst_case_peak_bytes, policy="sequential", ctx=CTX)
    assert plan.worst_case_peak_bytes <= ac.worst_case_peak_bytes
    assert plan.recomputed_flops <= ac.recomputed_flops
    assert plan.makespan_ms <= ac.makespan_ms
