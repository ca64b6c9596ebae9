"""Generated modules of fused schedules: each kernel written as its parts' ATen calls (a folded
batch-norm as the convolution with the folded weight), eager's outputs on the CPU, ruff-clean
and byte-stable text, and (under the fake CUDA backend) stream and event calls that the
launch-log checker accepts."""

from __future__ import annotations

import functools

import pytest
import torch

from helpers.cli import cli
from helpers.codegen import assert_ruff_clean, generated_class, graph_leaves, import_source, stream_calls
from helpers.launch_log import check_launch_log
from helpers.models import small_model
from streamplan.app.codegen import codegen_policy
from streamplan.codegen import generate_module
from streamplan.fusion.plan import schedule_with_fusion
from streamplan.ir.fused import folded_pair, is_fused
from streamplan.models import load_model
from streamplan.runtime import compare_outputs
from streamplan.runtime.compare import _flat_tensors, _graph_order_reference
from streamplan.schedule.context import ScheduleContext

CTX = ScheduleContext(max_streams=4, time_limit_s=2.0)
MODES = ("first", "stream-aware")
MODELS = ("squeezenet", "googlenet")  # googlenet: branches, concatenations, batch norms folded


@functools.cache
def _generated(name: str, mode: str):
    """(kernel graph, schedule, module source) of the model under ASAP with ``mode`` fusion."""
    graph = small_model(name)[2]
    ctx = CTX.replace(fusion=mode)
    planned = schedule_with_fusion(graph, "asap", ctx)
    source = codegen_policy(graph, "asap", ctx, model=name).source
    return planned.graph, planned.schedule, source


@pytest.mark.parametrize("mode", MODES)
def test_seed_example_fused_matches_graph_order(tmp_path, mode: str) -> None:
    graph = load_model("seed-example2")
    planned = schedule_with_fusion(graph, "asap", CTX.replace(fusion=mode))
    assert any(is_fused(n) for n in planned.graph.nodes)
    source = generate_module(planned.graph, planned.schedule, model="seed-example2")
    assert f"fusion: {mode};" in source and "# fused kernel " in source
    model = generated_class(import_source(source, tmp_path))()
    inputs, _ = graph_leaves(graph)
    ok, _, _ = compare_outputs(_flat_tensors(model(*inputs)), _graph_order_reference(graph, 0))
    assert ok


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", MODELS)
def test_fused_module_matches_eager_and_is_stable(tmp_path, name: str, mode: str) -> None:
    module, inputs, graph = small_model(name)
    kernels, schedule, source = _generated(name, mode)
    again = codegen_policy(small_model(name)[2], "asap", CTX.replace(fusion=mode), model=name).source
    assert again == source
    folds = sum(1 for n in kernels.nodes if is_fused(n) and folded_pair(n) is not None)
    assert (folds > 0) == (name == "googlenet")
    assert source.count("_fold_batch_norm(") == folds + (1 if folds else 0)  # each call, and the def
    model = generated_class(import_source(source, tmp_path))()
    model.load_weights(module)
    with torch.no_grad():
        ok, max_abs, _ = compare_outputs(_flat_tensors(model(*inputs)), _flat_tensors(module(*inputs)))
    assert ok, f"{name} {mode}: max abs error {max_abs}"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", MODELS)
def test_fused_stream_calls_satisfy_the_schedule(tmp_path, monkeypatch, name: str, mode: str) -> None:
    module, inputs, _ = small_model(name)
    kernels, schedule, source = _generated(name, mode)
    assert schedule.num_streams > 1
    model = generated_class(import_source(source, tmp_path))()
    model.load_weights(module)
    calls, outputs, launched = stream_calls(monkeypatch, kernels, schedule, model, list(inputs))
    assert launched == len(schedule.launch_order)
    assert check_launch_log(kernels, calls) == []
    with torch.no_grad():
        ok, _, _ = compare_outputs(_flat_tensors(outputs), _flat_tensors(module(*inputs)))
    assert ok


def test_fused_modules_are_ruff_clean(tmp_path) -> None:
    for name in MODELS:
        for mode in MODES:
            (tmp_path / f"{name}_{mode.replace('-', '_')}.py").write_text(_generated(name, mode)[2])
    assert_ruff_clean(tmp_path)


def test_codegen_cli_fused(tmp_path) -> None:
    path = tmp_path / "f.py"
    r = cli("codegen", "seed-example2", "--fusion", "stream-aware", "-o", str(path))
    assert r.returncode == 0, r.stderr
    assert "fusion: stream-aware;" in path.read_text()
