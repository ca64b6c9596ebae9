"""Models written as timm and transformers write theirs (``helpers.outside_models``) run equal
to eager, and on one stream the kernels' allocations are predicted to the byte: measuring each
op alone has no side effects and sees the kernels a run sees; autocast regions are captured."""

from __future__ import annotations

import pytest
import torch

from helpers.outside_models import SPECS
from streamplan.app.run import run_model
from streamplan.model_files import load_python_module
from streamplan.models import load_model
from streamplan.runtime.interpret import initial_env, params_from_module
from streamplan.runtime.op_timing import op_scratch_bytes, op_times_ms
from streamplan.schedule.context import ScheduleContext

CTX = ScheduleContext(max_streams=4, cost="cpu")
MODELS = [
    "position_buckets",  # an add_ on an index tensor: measured thrice, it left the embedding's range
    "writes_its_input",  # the eager reference wrote the input the run then started from
    "counts_calls",  # ... and the buffer
    "tiny_t5_encoder",
    "autocast_off",
    "autocast_on",
    "bicubic",  # scratch measured under inference_mode saw a decomposition the run never runs
]


@pytest.mark.parametrize("name", MODELS)
def test_runs_equal_to_eager_and_one_stream_allocations_are_predicted_exactly(name):
    spec = f"{SPECS}:{name}"
    report = run_model(spec, "sequential", CTX, graph=load_model(spec), repeat=1)
    assert report.comparison.matches_eager, report.comparison
    assert report.comparison.max_abs_error == 0.0
    assert report.predicted_tracked_peak_bytes == report.comparison.result.tracked_peak_bytes
    if name in ("position_buckets", "tiny_t5_encoder", "autocast_on"):  # with streams too
        report = run_model(spec, "asap", CTX, graph=load_model(spec), repeat=1, chaos=True)
        assert report.comparison.matches_eager, report.comparison


def test_measuring_ops_alone_leaves_every_tensor_as_it_was():
    spec = f"{SPECS}:counts_calls"
    module, inputs = load_python_module(spec)
    graph = load_model(spec)
    env = initial_env(graph, list(inputs), params_from_module(graph, module))
    before = {k: v.clone() for k, v in env.items() if isinstance(v, torch.Tensor)}
    op_scratch_bytes(graph, env)
    op_times_ms(graph, env, repeat=2)
    for k, t in before.items():
        assert torch.equal(env[k], t), k


def test_autocast_regions_are_captured_as_their_casts():
    off = load_model(f"{SPECS}:autocast_off")
    assert {off.values[v].dtype for n in off.nodes for v in n.outputs} == {"float32"}
    on = load_model(f"{SPECS}:autocast_on")
    dtypes = {n.op: on.values[n.outputs[0]].dtype for n in on.nodes}
    assert dtypes["aten.addmm.default"] == "bfloat16"  # the region's linear, at autocast's dtype
    assert dtypes["aten.mm.default"] == "float32"  # the disabled region inside it


def test_a_python_model_is_named_after_its_function():
    assert load_model(f"{SPECS}:bicubic").name == "bicubic"
