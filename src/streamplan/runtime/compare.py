"""``run_and_compare``: run a model under a policy and compare with eager PyTorch.

The eager reference is the torch module called on the same inputs and weights. For
models that are graphs only (seed-*, random:N, graph JSON) there is no module: the
reference is the graph's ops run one by one in graph order on one thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from streamplan.errors import ExecutionError, StreamplanError
from streamplan.frontends.user_code import running_user_code
from streamplan.ir.frozen import FrozenDict
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.runtime.interpret import initial_env, params_from_module
from streamplan.runtime.measure import RunResult
from streamplan.schedule.context import ScheduleContext

RTOL = 1e-4
ATOL = 1e-4  # relative to the largest reference magnitude (at least 1)


@dataclass(frozen=True)
class MeasuredOpMemory:
    """Device memory the ops take beyond the graph's tensors, measured before a run.

    ``scratch_bytes``: transient bytes per op signature (workspaces, temporaries);
    ``stream_workspace_bytes``: what each stream keeps after its first BLAS call.
    """

    scratch_bytes: Mapping[str, int]
    stream_workspace_bytes: int

    def __post_init__(self) -> None:  # read-only, so a run's report is a hashable value
        object.__setattr__(self, "scratch_bytes", FrozenDict(self.scratch_bytes))


@dataclass(frozen=True)
class Comparison:
    """Executed outputs vs eager, and what the run measured.

    ``max_rel_error`` is the largest ``|out - ref| / max(|ref|)`` over outputs (a
    scale-free figure); ``matches_eager`` holds when every element is within
    ``ATOL * max(1, max|ref|) + RTOL * |ref|``. ``predicted_peak_bytes`` and
    ``predicted_ms`` are left for the caller (memory model, simulator) to fill.
    """

    model: str
    policy: str
    device: str
    matches_eager: bool
    max_abs_error: float
    max_rel_error: float
    result: RunResult
    schedule: StreamSchedule
    graph: Graph | None = None
    predicted_peak_bytes: int | None = None
    predicted_ms: float | None = None
    op_memory: MeasuredOpMemory | None = None
    reference: str = "eager"  # what the outputs were compared with (onnxruntime for ONNX models)

    @property
    def measured_ms(self) -> float:
        return self.result.measured_ms

    @property
    def measured_peak_bytes(self) -> int:
        return self.result.measured_peak_bytes

    def with_predictions(
        self, *, predicted_peak_bytes: int | None = None, predicted_ms: float | None = None
    ) -> Comparison:
        import dataclasses

        return dataclasses.replace(self, predicted_peak_bytes=predicted_peak_bytes, predicted_ms=predicted_ms)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "policy": self.policy,
            "device": self.device,
            "num_streams": self.schedule.num_streams,
            "num_events": self.schedule.num_events,
            "matches_eager": self.matches_eager,
            "reference": self.reference,
            "max_abs_error": self.max_abs_error,
            "max_rel_error": self.max_rel_error,
            "measured_ms": self.result.measured_ms,
            "times_ms": list(self.result.times_ms),
            "measured_peak_bytes": self.result.measured_peak_bytes,
            "max_memory_allocated_bytes": self.result.max_memory_allocated_bytes,
            "max_memory_reserved_bytes": self.result.max_memory_reserved_bytes,
            "predicted_peak_bytes": self.predicted_peak_bytes,
            "predicted_ms": self.predicted_ms,
            "tracked_peak_bytes": self.result.tracked_peak_bytes,
            "chaos": self.result.chaos,
        }

    def __str__(self) -> str:
        verdict = "match" if self.matches_eager else "DIFFER from"
        return (
            f"{self.model} {self.policy} on {self.device}: outputs {verdict} {self.reference} "
            f"(max abs err {self.max_abs_error:.3g}, rel {self.max_rel_error:.3g}); {self.result}"
        )


def compare_outputs(outputs: Sequence[Any], reference: Sequence[Any]) -> tuple[bool, float, float]:
    """(matches, max abs error, max scale-relative error) of outputs against a reference."""
    if len(outputs) != len(reference):
        return False, float("inf"), float("inf")
    ok, max_abs, max_rel = True, 0.0, 0.0
    for out, ref in zip(outputs, reference, strict=True):
        if not isinstance(ref, torch.Tensor):
            ok = ok and out == ref
            continue
        if out.shape != ref.shape:
            return False, float("inf"), float("inf")
        a, b = out.detach().cpu().double(), ref.detach().cpu().double()
        if a.numel() == 0:
            continue
        diff = (a - b).abs()
        diff = torch.where(torch.isnan(a) & torch.isnan(b), torch.zeros_like(diff), diff)
        scale = max(1.0, float(b.abs().nan_to_num(0.0).max()))
        err = float(diff.nan_to_num(float("inf")).max())
        max_abs = max(max_abs, err)
        max_rel = max(max_rel, err / scale)
        ok = ok and bool((diff <= ATOL * scale + RTOL * b.abs()).all())
    return ok, max_abs, max_rel


def run_and_compare(
    model: str | tuple[Any, Any],
    policy: str = "sequential",
    *,
    device: str = "cpu",
    chaos: bool = False,
    repeat: int = 1,
    warmup: int = 0,
    batch: int | None = None,
    ctx: ScheduleContext | None = None,
    seed: int = 0,
    cuda_graph: bool = False,
    graph: Graph | None = None,
    track_allocations: bool = False,
    schedule: StreamSchedule | None = None,
    train: bool = False,
    optimizer: str = "none",
) -> Comparison:
    """Capture/load ``model``, schedule it with ``policy``, run it, compare with eager.

    ``model`` is a model spec (zoo name, ``random:N``, graph ``.json``, ``file.py:fn``)
    or ``(module, example_inputs)``. ``graph`` skips capture when the caller already
    has the captured graph of that module. ``ctx`` is the scheduling context of
    ``policy``, whose ``fusion`` mode says whether the kernels run fused
    (``Comparison.graph`` is then the graph of kernels; the reference stays eager). ``track_allocations`` measures each op's scratch before the run
    (``Comparison.op_memory``) so the caller can predict what the kernels allocate;
    on the CPU the run then counts those allocations in one more run. ``schedule``
    runs a given (e.g. saved) schedule instead of making one with ``policy``; it is
    verified against the graph first. ``train`` runs one training step (with
    ``optimizer``'s update) and compares its loss and gradients, or updated parameters,
    with eager ``loss.backward()`` and ``torch.optim`` (``runtime/training.py``).
    """
    from streamplan.fusion.plan import graph_for_schedule, schedule_with_fusion
    from streamplan.runtime.execute import run
    from streamplan.runtime.op_timing import op_scratch_bytes, stream_workspace_bytes
    from streamplan.schedule.verify import verify_schedule

    prepared = None
    module = None
    if train:
        from streamplan.runtime.training import prepare_training

        prepared = prepare_training(
            model, optimizer=optimizer, batch=batch, graph=graph, seed=seed, device=device
        )
        name, source = prepared.name, prepared.graph
    else:
        name, module, inputs, source = _load(model, batch, graph)
    if schedule is None:
        planned = schedule_with_fusion(source, policy, ctx)  # fused as ctx.fusion says
    else:
        planned = graph_for_schedule(source, schedule)
        verify_schedule(planned.graph, planned.schedule)
        policy = schedule.policy
    graph, schedule = planned.graph, planned.schedule
    reference = "eager"
    if prepared is not None:
        params, env_inputs, ref = prepared.params, prepared.inputs, prepared.reference
    elif module is not None:
        if device != "cpu":
            module = module.to(device)
            inputs = tuple(x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs)
        params = params_from_module(graph, module)
        env_inputs: Any = list(inputs)
        ref = _eager_reference(module, inputs, graph, params, name)
    elif isinstance(model, str) and model.endswith(".onnx"):  # its weights; onnxruntime is the reference
        from streamplan.runtime.onnx_reference import onnx_run_inputs

        # the file named on the command line, never a path a graph JSON's meta holds
        env_inputs, params, ref = onnx_run_inputs(source, seed, path=model)
        reference = "onnxruntime"
    else:  # the graph as captured gives the reference and, by value id, every leaf tensor
        params = None
        env_inputs = initial_env(source, None, None, seed=seed)
        ref = _graph_order_reference(source, env=dict(env_inputs))
    op_memory = None
    if track_allocations:  # before the run: the CUDA run starts from an emptied cache
        scratch_params = {k: v.clone() for k, v in params.items()} if params and train else params
        env = initial_env(graph, env_inputs, scratch_params, seed=seed, device=device)
        op_memory = MeasuredOpMemory(
            scratch_bytes=op_scratch_bytes(graph, env, device=device),
            stream_workspace_bytes=stream_workspace_bytes(device),
        )
        del env
    result = run(
        graph,
        schedule,
        env_inputs,
        params=params,
        device=device,
        chaos=chaos,
        seed=seed,
        repeat=repeat,
        warmup=warmup,
        cuda_graph=cuda_graph,
        track_allocations=track_allocations,
    )
    ok, max_abs, max_rel = compare_outputs(result.outputs, ref)
    return Comparison(
        model=name,
        policy=policy,
        device=device,
        matches_eager=ok,
        max_abs_error=max_abs,
        max_rel_error=max_rel,
        result=result,
        schedule=schedule,
        graph=graph,
        op_memory=op_memory,
        reference=reference,
    )


def _eager_reference(
    module: Any, inputs: tuple[Any, ...], graph: Graph, params: Mapping[str, Any], name: str
) -> tuple[Any, ...]:
    """The module's outputs on ``inputs``, leaving the run the tensors it starts from: the
    module reads copies of the inputs (a model may write its own input), and the buffers the
    graph writes in place (a call counter, running statistics) are put back afterwards."""
    from streamplan.runtime.interpret import written_leaves

    written = [vid for vid in written_leaves(graph) if isinstance(params.get(vid), torch.Tensor)]
    saved = {vid: params[vid].clone() for vid in written}
    try:
        with torch.no_grad(), running_user_code("the model, run eagerly for reference,", name):
            ref = _flat_tensors(module(*(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)))
    except StreamplanError:
        raise
    except Exception as e:  # the user's model fails on its own: not streamplan's doing
        raise ExecutionError(
            f"the model raised when run eagerly: {type(e).__name__}: {e}",
            where=name,
            hint="the model fails without streamplan too; fix it or its example inputs",
        ) from e
    with torch.no_grad():
        for vid, t in saved.items():
            params[vid].copy_(t)
    return ref


def _load(model: str | tuple[Any, Any], batch: int | None, graph: Graph | None):
    if isinstance(model, tuple):
        module, inputs = model
        inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
        module = module.eval()
        if graph is None:
            from streamplan.frontends.torch_capture import capture

            graph = capture(module, inputs, name=type(module).__name__)
        return graph.name, module, inputs, graph
    from streamplan.models import load_model
    from streamplan.zoo.registry import ZOO

    entry = ZOO.get(model)
    if entry is not None and entry.kind == "torch":
        # The module gives the real weights and the eager reference; a graph the caller
        # already captured from the same factory saves a second capture.
        module, inputs = entry.load_factory()(batch or entry.default_batch)
        inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
        module = module.eval()
        return model, module, inputs, graph if graph is not None else _capture_named(module, inputs, model)
    if graph is not None:
        return model, None, None, graph
    return model, None, None, load_model(model, batch=batch)


def _capture_named(module: Any, inputs: Any, name: str) -> Graph:
    from streamplan.frontends.torch_capture import capture

    return capture(module, inputs, name=name)


def _graph_order_reference(
    graph: Graph, seed: int = 0, *, env: dict[str, Any] | None = None
) -> tuple[Any, ...]:
    """Eager op-by-op execution in graph order (the reference for graph-only models), from
    the leaf tensors ``env`` or seeded random ones."""
    from streamplan.runtime.interpret import call_node

    env = initial_env(graph, None, None, seed=seed) if env is None else env
    with torch.no_grad():
        for node in graph.nodes:
            env.update(zip(node.outputs, call_node(node, env, "cpu"), strict=True))
    return tuple(env[v] for v in graph.outputs)


def _flat_tensors(obj: Any) -> tuple[Any, ...]:
    """Module outputs flattened like ``graph.outputs`` (tensors of tuples/lists/dicts/ModelOutput)."""
    if isinstance(obj, torch.Tensor):
        return (obj,)
    if isinstance(obj, dict) or hasattr(obj, "to_tuple"):
        obj = obj.to_tuple() if hasattr(obj, "to_tuple") else tuple(obj.values())
    if isinstance(obj, (tuple, list)):
        out: list[Any] = []
        for x in obj:
            out.extend(_flat_tensors(x))
        return tuple(out)
    return ()
