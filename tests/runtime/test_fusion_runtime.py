"""Fused kernels run for real on CPU threads: outputs equal eager for every zoo model, policy and
fusion order, under chaos delays; folded batch-norms give eager's result to tolerance."""

from __future__ import annotations

import copy

import pytest
import torch

from helpers.matrix import pairs
from helpers.models import RUNNABLE_MODELS, small_model
from streamplan.fusion import schedule_with_fusion
from streamplan.ir.fused import folded_pair, is_fused
from streamplan.runtime import compare_outputs, run, run_and_compare
from streamplan.runtime.compare import _flat_tensors
from streamplan.runtime.interpret import params_from_module
from streamplan.schedule.context import ScheduleContext
from streamplan.schedule.registry import POLICIES


def with_random_batch_norms(module: torch.nn.Module, seed: int = 1) -> torch.nn.Module:
    """A copy whose batch-norms have non-trivial statistics and affine weights (so folding matters)."""
    module = copy.deepcopy(module)
    gen = torch.Generator().manual_seed(seed)
    for m in module.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            n = m.num_features
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(n, generator=gen) * 0.2)
                m.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
                if m.affine:
                    m.weight.copy_(torch.rand(n, generator=gen) + 0.5)
                    m.bias.copy_(torch.randn(n, generator=gen) * 0.2)
    return module


@pytest.fixture(scope="module", params=RUNNABLE_MODELS)
def zoo_model(request):
    name = request.param
    module, inputs, graph = small_model(name)
    module = with_random_batch_norms(module)
    with torch.no_grad():
        ref = _flat_tensors(module(*inputs))
    return name, graph, params_from_module(graph, module), inputs, ref


def _check(zoo_model, policy: str, fusion: str, **options) -> None:
    name, graph, params, inputs, ref = zoo_model
    ctx = ScheduleContext(max_streams=4, fusion=fusion, options=options)
    planned = schedule_with_fusion(graph, policy, ctx)
    assert len(planned.graph.nodes) < len(graph.nodes)
    result = run(planned.graph, planned.schedule, list(inputs), params=params, chaos=True)
    ok, max_abs, _ = compare_outputs(result.outputs, ref)
    assert ok, f"{name} {policy} {fusion}: max abs error {max_abs}"


@pytest.mark.parametrize("fusion", ["first", "stream-aware"])
def test_zoo_fused_matches_eager_under_asap(zoo_model, fusion: str) -> None:
    _check(zoo_model, "asap", fusion)


# Every zoo model runs fused under asap above; here each of the other policies runs fused, in
# both fusion orders, on two zoo models, and each zoo model under two of them (helpers.matrix:
# a fused kernel's run follows the schedule's shape and the graph's branches, not the pairing;
# STREAMPLAN_FULL_MATRIX=1 runs every pair).
@pytest.mark.slow
@pytest.mark.parametrize(
    "zoo_model,policy",
    pairs(RUNNABLE_MODELS, [p for p in POLICIES if p != "asap"], 2),
    indirect=["zoo_model"],
)
@pytest.mark.parametrize("fusion", ["first", "stream-aware"])
def test_zoo_fused_matches_eager_under_every_policy(zoo_model, policy: str, fusion: str) -> None:
    # ios on small blocks: the same stages and barriers, a search of seconds on the largest graphs
    _check(zoo_model, policy, fusion, **({"block_ops": 8} if policy == "ios" else {}))


def test_folded_batch_norm_computes_eagers_result_with_folded_weights():
    from streamplan.frontends.torch_capture import capture
    from streamplan.zoo._layers import ConvBNReLU

    torch.manual_seed(0)
    module = with_random_batch_norms(ConvBNReLU(3, 8, 3, padding=1)).eval()
    x = torch.randn(2, 3, 12, 12)
    graph = capture(module, (x,), name="conv_bn_relu")
    planned = schedule_with_fusion(graph, "sequential", ScheduleContext(fusion="first"))
    (kernel,) = [n for n in planned.graph.nodes if is_fused(n)]
    assert folded_pair(kernel) is not None and kernel.attrs["kind"] == "gemm"
    # the batch-norm's FLOPs are gone; it reads the folded bias, not the four statistics
    conv = next(n for n in graph.nodes if n.op == "aten.conv2d.default")
    assert kernel.flops == conv.flops
    out = run(planned.graph, planned.schedule, [x], params=params_from_module(graph, module)).outputs
    with torch.no_grad():
        ref = module(x)
    ok, max_abs, _ = compare_outputs(out, (ref,))
    assert ok and max_abs < 1e-4
    assert not torch.equal(out[0], ref)  # computed another way (folded), not by the same ops


@pytest.mark.parametrize("spec", ["seed-concat", "seed-example2", "random:60"])
@pytest.mark.parametrize("fusion", ["first", "stream-aware"])
def test_graph_only_models_fused(spec: str, fusion: str) -> None:
    c = run_and_compare(spec, "asap", ctx=ScheduleContext(fusion=fusion), chaos=True)
    assert c.matches_eager, (spec, fusion, c.max_abs_error)
    assert len(c.graph.nodes) < len(c.schedule.launch_order) + 1  # it ran the kernels


def test_fused_kernels_launch_on_the_cuda_path_through_the_fake_backend():
    """The CUDA executor runs a fused kernel as one launch on its stream (fake backend, CPU)."""
    from streamplan.models import load_model
    from streamplan.runtime.backend_api import FakeBackend
    from streamplan.runtime.compare import _graph_order_reference
    from streamplan.runtime.cuda import StreamExecutor
    from streamplan.runtime.interpret import initial_env
    from streamplan.runtime.measure import LiveBytes

    source = load_model("seed-concat")
    planned = schedule_with_fusion(source, "asap", ScheduleContext(fusion="stream-aware"))
    backend = FakeBackend()
    env = initial_env(source, None, None)
    outputs = StreamExecutor(planned.graph, planned.schedule, backend).launch(dict(env), LiveBytes())
    ok, _, _ = compare_outputs(outputs, _graph_order_reference(source, env=dict(env)))
    assert ok
    launches = [c[2] for c in backend.calls if c[0] == "launch"]
    assert launches == list(planned.schedule.launch_order) and "atan2+atan4" in launches
