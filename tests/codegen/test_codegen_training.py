"""Generated training steps: eager ``loss.backward()`` + ``torch.optim``'s results on the CPU, a
training loop that keeps in step with torch.optim, ruff-clean text, and (under the fake CUDA
backend) stream and event calls that the independent launch-log checker accepts."""

from __future__ import annotations

import copy
import functools
import sys

import pytest
import torch

from helpers.cli import cli
from helpers.codegen import assert_ruff_clean, generated_class, import_source, stream_calls
from helpers.launch_log import check_launch_log
from helpers.training import mlp_graph, mlp_problem, small_zoo_problem, two_branch_graph, two_branch_problem
from streamplan.codegen import generate_module
from streamplan.frontends.training import capture_training
from streamplan.ir.graph import Graph
from streamplan.ir.training import training_step
from streamplan.runtime import compare_outputs
from streamplan.runtime.interpret import seeded_random_ops
from streamplan.runtime.training import prepare_training
from streamplan.schedule import make_schedule
from streamplan.schedule.context import ScheduleContext

CTX = ScheduleContext(max_streams=4, time_limit_s=2.0)


def _state_dict(graph: Graph, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The generated module's names for a run's tensors (value id -> tensor)."""
    step = training_step(graph)
    out = {}
    for v, t in tensors.items():
        if v in step.optimizer_state:
            param, slot = step.optimizer_state[v]
            out[f"optimizer_state.{graph.param_names[param]}.{slot}"] = t
        else:
            out[graph.param_names.get(v, v)] = t
    return out


def _check_matches_eager(tmp_path, problem, graph: Graph, policy: str, optimizer: str) -> None:
    prepared = prepare_training(problem, optimizer=optimizer, graph=graph)
    source = generate_module(graph, make_schedule(graph, policy, CTX))
    model = generated_class(import_source(source, tmp_path))()
    model.load_weights(_state_dict(graph, prepared.params))
    with seeded_random_ops():  # dropout draws eager's masks (as the reference does)
        outputs = model(*prepared.inputs)
    ok, max_abs, _ = compare_outputs(tuple(outputs), prepared.reference)
    assert ok, f"{graph.name} {policy} {optimizer}: max abs error {max_abs}"


@pytest.mark.parametrize("optimizer", ["none", "sgd", "momentum", "adam", "adamw"])
def test_two_branch_step_matches_eager(tmp_path, optimizer: str) -> None:
    """Branches, batch norm's running statistics, dropout, and every optimizer's in-place update."""
    _check_matches_eager(tmp_path, two_branch_problem(), two_branch_graph(optimizer), "nimble", optimizer)


@functools.cache
def test_mixed_precision_step_matches_eager_on_master_copies(tmp_path) -> None:
    """bf16 parameters and gradients, fp32 master weights and AdamW state: the generated module
    casts each gradient up, updates the master copy and writes it back, as the eager reference."""
    import dataclasses

    problem = two_branch_problem()
    problem = dataclasses.replace(
        problem,
        module=problem.module.to(torch.bfloat16),
        inputs=tuple(x.to(torch.bfloat16) for x in problem.inputs),
    )
    graph = capture_training(problem, optimizer="adamw", name="two_branch", master_dtype="float32")
    _check_matches_eager(tmp_path, problem, graph, "asap", "adamw")


def _zoo_graph(name: str, optimizer: str) -> Graph:
    return capture_training(small_zoo_problem(name), optimizer=optimizer, name=name)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "optimizer"), [("squeezenet", "adam"), ("googlenet", "momentum")])
def test_zoo_step_matches_eager(tmp_path, name: str, optimizer: str) -> None:
    _check_matches_eager(tmp_path, small_zoo_problem(name), _zoo_graph(name, optimizer), "asap", optimizer)


def test_a_training_loop_keeps_in_step_with_torch_optim(tmp_path) -> None:
    """The user's side: load the model's weights, call the module once per step; the parameters
    it holds follow torch.optim.SGD(momentum) step after step (its state starts at zero, as
    torch.optim's does), and load_optimizer_state takes over a running optimizer's state."""
    problem = mlp_problem()
    graph = mlp_graph("momentum")
    step = generated_class(import_source(generate_module(graph, make_schedule(graph, "asap", CTX)), tmp_path))
    eager = copy.deepcopy(problem.module)
    hyper = training_step(graph).hyperparameters
    optimizer = torch.optim.SGD(eager.parameters(), lr=hyper["lr"], momentum=hyper["momentum"], foreach=False)
    model = step()
    model.load_weights(eager)
    for _ in range(3):
        optimizer.zero_grad(set_to_none=True)
        loss = problem.compute_loss(eager(*problem.inputs))
        loss.backward()
        optimizer.step()
        generated_loss, *_ = model(*problem.inputs, *problem.targets)
        torch.testing.assert_close(generated_loss, loss.detach())
    for name, p in eager.named_parameters():
        torch.testing.assert_close(model.tensors.get_parameter(name), p.detach())
    resumed = step()
    resumed.load_weights(eager)
    resumed.load_optimizer_state(optimizer, eager)
    optimizer.zero_grad(set_to_none=True)
    problem.compute_loss(eager(*problem.inputs)).backward()
    optimizer.step()
    resumed(*problem.inputs, *problem.targets)
    for name, p in eager.named_parameters():
        torch.testing.assert_close(resumed.tensors.get_parameter(name), p.detach())


def test_training_module_text(tmp_path) -> None:
    graph = two_branch_graph("adam")
    source = generate_module(graph, make_schedule(graph, "nimble", CTX), model="two_branch")
    assert source == generate_module(graph, make_schedule(graph, "nimble", CTX), model="two_branch")
    assert "import streamplan" not in source and "optimizer adam" in source
    assert "class TwoBranchNimbleTrainAdam(torch.nn.Module):" in source
    module = import_source(source, tmp_path)
    assert module.OUTPUTS[0] == "loss" and "fc.weight" in module.OUTPUTS
    keys = dict(generated_class(module)().tensors.named_buffers())
    assert "optimizer_state.fc.weight.exp_avg_sq" in keys
    path = tmp_path / "step.py"
    path.write_text(source)
    assert_ruff_clean(path)


@pytest.mark.parametrize("policy", ["asap", "nimble"])
def test_training_stream_calls_satisfy_the_schedule(tmp_path, monkeypatch, policy: str) -> None:
    graph = two_branch_graph("adam")
    schedule = make_schedule(graph, policy, CTX)
    assert schedule.num_streams > 1
    prepared = prepare_training(two_branch_problem(), optimizer="adam", graph=graph)
    model = generated_class(import_source(generate_module(graph, schedule), tmp_path))()
    model.load_weights(_state_dict(graph, prepared.params))
    with seeded_random_ops():
        calls, outputs, launched = stream_calls(monkeypatch, graph, schedule, model, prepared.inputs)
    assert launched == len(schedule.launch_order)
    assert check_launch_log(graph, calls) == []
    ok, max_abs, _ = compare_outputs(tuple(outputs), prepared.reference)
    assert ok, max_abs


def test_training_module_runs_under_torch_compile(tmp_path) -> None:
    """One graph, no fallback: the in-place updates of the held parameters trace too."""
    problem, graph = mlp_problem(), mlp_graph("adam")
    cls = generated_class(import_source(generate_module(graph, make_schedule(graph, "asap", CTX)), tmp_path))
    plain, compiled = cls(), cls()
    plain.load_weights(problem.module)
    compiled.load_weights(problem.module)
    torch._dynamo.reset()
    step = torch.compile(compiled, backend="eager", fullgraph=True)
    for want, got in zip(
        plain(*problem.inputs, *problem.targets), step(*problem.inputs, *problem.targets), strict=True
    ):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    for (name, want), got in zip(
        plain.tensors.state_dict().items(), compiled.tensors.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(got, want, rtol=0, atol=0, msg=name)


@pytest.mark.parametrize("mode", ["first", "stream-aware"])
def test_fused_step_matches_eager(tmp_path, mode: str) -> None:
    """Fused kernels of a training step (batch norm, dropout, the SGD update) written as their parts."""
    from streamplan.fusion.plan import schedule_with_fusion
    from streamplan.ir.fused import is_fused

    planned = schedule_with_fusion(two_branch_graph("sgd"), "nimble", CTX.replace(fusion=mode))
    assert any(is_fused(n) for n in planned.graph.nodes)
    prepared = prepare_training(two_branch_problem(), optimizer="sgd", graph=planned.graph)
    model = generated_class(import_source(generate_module(planned.graph, planned.schedule), tmp_path))()
    model.load_weights(_state_dict(planned.graph, prepared.params))
    with seeded_random_ops():
        outputs = model(*prepared.inputs)
    ok, max_abs, _ = compare_outputs(tuple(outputs), prepared.reference)
    assert ok, f"{mode}: max abs error {max_abs}"


def test_codegen_cli_training_step(tmp_path) -> None:
    path = tmp_path / "step.py"
    r = cli("codegen", "random:30", "--train", "--optimizer", "sgd", "--policy", "asap", "-o", str(path))
    assert r.returncode == 0, r.stderr
    text = path.read_text()
    assert "training step:" in text and "OUTPUTS = (" in text and "@torch.no_grad()" in text


@pytest.mark.slow
def test_gpu_training_check_dry_run(tmp_path, capsys, monkeypatch) -> None:
    """bench/gpu_codegen_training.py must not first fail on a lent GPU: its CPU dry run goes end to end."""
    import importlib.util
    import json
    from pathlib import Path

    bench = Path(__file__).resolve().parents[2] / "bench"
    monkeypatch.syspath_prepend(str(bench))
    spec = importlib.util.spec_from_file_location("gpu_codegen_training", bench / "gpu_codegen_training.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gpu_codegen_training", module)
    spec.loader.exec_module(module)
    out = tmp_path / "gct.json"
    assert module.main(["--dry-run", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["policy"] for r in rows] == ["sequential", "nimble"] and all(r["matches_eager"] for r in rows)
    assert "generated training steps (codegen --train) on cpu" in capsys.readouterr().out
