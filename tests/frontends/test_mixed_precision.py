"""Mixed precision and AdamW in a captured training step: bf16 parameters and gradients, fp32
master weights and optimizer state (16 bytes per parameter with Adam), and one step run on the
CPU equal to eager torch.optim on the master copies, to the bit on one stream."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from helpers.training import mlp_problem
from streamplan.frontends.optimizers import MASTER_SLOT
from streamplan.frontends.training import capture_training
from streamplan.ir.training import training_step
from streamplan.memory.breakdown import Composition
from streamplan.runtime import run_and_compare


def _bf16_problem():
    p = mlp_problem()
    return dataclasses.replace(
        p,
        module=p.module.to(torch.bfloat16),
        inputs=(p.inputs[0].to(torch.bfloat16),),
        targets=(p.targets[0].to(torch.bfloat16),),
    )


@pytest.fixture(scope="module")
def mixed_step():
    return capture_training(_bf16_problem(), optimizer="adamw", name="mlp", master_dtype="float32")


def test_master_weights_and_state_are_fp32_and_the_model_bf16(mixed_step):
    g = mixed_step
    step = training_step(g)
    assert step.master_dtype == "float32" and step.optimizer == "adamw"
    slots = {slot for _, slot in step.optimizer_state.values()}
    assert slots == {MASTER_SLOT, "exp_avg", "exp_avg_sq"}
    for vid in step.optimizer_state:
        assert g.values[vid].dtype == "float32"
    for p, grad in step.gradients.items():
        assert g.values[p].dtype == "bfloat16" and g.values[grad].dtype == "bfloat16"
    # the update writes the master copy back into the bf16 parameter, in place
    for p, updated in step.updates.items():
        assert g.storage_of(updated) == g.storage_of(p)
        assert g.nodes[g.position(g.producer(updated))].op == "aten.copy_.default"


def test_sixteen_bytes_per_parameter_with_adam(mixed_step):
    g = mixed_step
    totals = Composition.of(g, g.storages())
    n = sum(g.values[p].nbytes // 2 for p in training_step(g).gradients)  # bf16: 2 bytes per element
    assert totals["parameters"] == 2 * n
    assert totals["gradients"] == 2 * n
    assert totals["optimizer_state"] == 12 * n  # fp32 master, exp_avg, exp_avg_sq


def test_one_stream_equals_eager_master_weight_adamw(mixed_step):
    c = run_and_compare(_bf16_problem(), "sequential", graph=mixed_step, train=True, optimizer="adamw")
    assert c.matches_eager and c.max_abs_error == 0.0, c.max_abs_error


def test_adamw_without_mixed_precision_equals_torch_optim():
    problem = mlp_problem()
    graph = capture_training(problem, optimizer="adamw", name="mlp")
    ops = [n.op for n in graph.nodes]
    assert ops.count("aten.mul_.Scalar") >= 2 * len(training_step(graph).gradients)  # decay + beta2
    c = run_and_compare(mlp_problem(), "asap", graph=graph, train=True, optimizer="adamw", chaos=True, seed=2)
    assert c.matches_eager, c.max_abs_error
