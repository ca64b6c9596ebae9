"""Running a training step: the loss, gradients and updated parameters equal eager
``loss.backward()`` + ``torch.optim`` under every policy, with and without chaos; the
memory the run measures equals the prediction on one stream."""

from __future__ import annotations

import pytest
import torch

from helpers import fake_cuda
from helpers.training import mlp_graph, mlp_problem, two_branch_graph, two_branch_problem
from streamplan.memory.allocators import replay
from streamplan.memory.host_order import host_order_peak_bytes
from streamplan.models import load_model
from streamplan.runtime import run, run_and_compare
from streamplan.runtime.training import prepare_training
from streamplan.schedule import make_schedule
from streamplan.schedule.context import ScheduleContext
from streamplan.schedule.registry import POLICIES

CTX = ScheduleContext(max_streams=4)


@pytest.mark.parametrize("optimizer", ["none", "sgd", "momentum", "adam"])
def test_one_stream_is_bit_identical_to_eager(optimizer):
    c = run_and_compare(
        two_branch_problem(), "sequential", graph=two_branch_graph(optimizer), train=True, optimizer=optimizer
    )
    assert c.matches_eager and c.max_abs_error == 0.0, c.max_abs_error


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_matches_eager_with_and_without_chaos(policy):
    for optimizer, chaos in (("none", False), ("adam", True)):
        c = run_and_compare(
            two_branch_problem(),
            policy,
            graph=two_branch_graph(optimizer),
            train=True,
            optimizer=optimizer,
            chaos=chaos,
            seed=3,
            ctx=CTX,
        )
        assert c.matches_eager, (policy, optimizer, c.max_abs_error)


def test_updated_parameters_really_move_and_match_torch_optim():
    graph = mlp_graph("adam")
    prepared = prepare_training(mlp_problem(), optimizer="adam", graph=graph)
    before = {vid: t.clone() for vid, t in prepared.params.items()}
    result = run(graph, make_schedule(graph, "asap", CTX), prepared.inputs, params=prepared.params, repeat=3)
    # each of the three runs starts from the same parameters: the result is one step, not three
    for out, ref in zip(result.outputs, prepared.reference, strict=True):
        assert torch.equal(out, ref)
    step_params = [v for v in graph.params if graph.values[v].kind == "param"]
    assert any(not torch.equal(prepared.params[p], before[p]) for p in step_params)


def test_measured_peaks_equal_the_prediction_on_one_stream():
    graph = two_branch_graph("momentum")
    c = run_and_compare(
        two_branch_problem(),
        "sequential",
        graph=graph,
        train=True,
        optimizer="momentum",
        track_allocations=True,
    )
    sched = c.schedule
    assert c.result.measured_peak_bytes == host_order_peak_bytes(graph, sched)
    from streamplan.app.run import _op_memory

    predicted = replay(graph, sched, "exact", op_memory=_op_memory(graph, c)).allocated_peak_bytes
    assert c.result.tracked_peak_bytes == predicted


@pytest.mark.parametrize("optimizer", ["none", "sgd"])
def test_random_training_graphs_run_under_every_policy_with_chaos(optimizer):
    graph = load_model("random:30", train=True, optimizer=optimizer)
    for policy in ("wavefront", "asap", "nimble", "memory"):
        c = run_and_compare(
            "random:30", policy, graph=graph, train=True, optimizer=optimizer, chaos=True, ctx=CTX
        )
        assert c.matches_eager, (policy, c.max_abs_error)


def test_the_cuda_executor_runs_a_training_step(monkeypatch):
    """The stream executor and ``measure_cuda`` (repeats restore what the step updates) under a
    fake ``torch.cuda``: the step equals eager."""
    from streamplan.runtime.backend_api import TorchCudaBackend
    from streamplan.runtime.cuda import measure_cuda
    from streamplan.runtime.interpret import Restorer, initial_env

    graph = two_branch_graph("sgd")  # captured and referenced before torch.cuda is faked
    prepared = prepare_training(two_branch_problem(), optimizer="sgd", graph=graph)
    fake_cuda.install(monkeypatch)
    monkeypatch.setattr(TorchCudaBackend, "device", "cpu")
    schedule = make_schedule(graph, "asap", CTX)
    env = initial_env(graph, prepared.inputs, prepared.params)
    restore = Restorer(graph, env)
    m = measure_cuda(graph, schedule, env, repeat=2, warmup=1, before_run=restore)
    for out, ref in zip(m.outputs, prepared.reference, strict=True):
        assert torch.allclose(out, ref, atol=1e-6)
    # the fake replays nothing: what a captured graph computes is the capture run's, whose loss is right
    m = measure_cuda(graph, schedule, env, repeat=2, warmup=1, cuda_graph=True, before_run=restore)
    assert torch.equal(m.outputs[0], prepared.reference[0])
