"""A ``torch.compile`` backend that runs each captured graph with a streamplan schedule.

``torch.compile(model, backend=streamplan.runtime.backend(policy="nimble"))``, or
``backend="streamplan"`` (registered with dynamo on first use of ``streamplan.runtime``).
Dynamo hands over a torch-level FX graph; AOTAutograd lowers it to ATen, which is
converted to a streamplan ``Graph`` (placeholders become graph inputs, in order),
scheduled with the policy and run by the CPU or CUDA executor. In training,
AOTAutograd splits the step into a forward graph (which also returns what the
backward needs) and a backward graph (saved values and incoming gradients in, the
inputs' gradients out, ``None`` where an input needs none); both are scheduled and
run the same way. Whatever cannot be converted, scheduled or run falls back to
eager, with one warning per reason ("streamplan: falling back to eager for ...:
reason").
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

import torch

from streamplan.errors import StreamplanError
from streamplan.schedule.context import DEFAULT_CONTEXT, ScheduleContext

_WARNED: set[str] = set()
_WARN_LOCK = threading.Lock()
_REGISTERED = False


def warn_fallback(what: str, reason: str) -> None:
    """Warn once per distinct reason that ``what`` runs eagerly."""
    key = f"{what}: {reason}"
    with _WARN_LOCK:
        if reason in _WARNED:
            return
        _WARNED.add(reason)
    warnings.warn(f"streamplan: falling back to eager for {key}", RuntimeWarning, stacklevel=3)


def backend(
    policy: str = "nimble", ctx: ScheduleContext | None = None, *, device: str | None = None
) -> Callable[..., Any]:
    """A ``torch.compile`` backend running graphs under ``policy`` (scheduled in ``ctx``) on
    ``device`` (default: the inputs')."""
    from streamplan.schedule.registry import policy_options

    policy_options(
        policy, (ctx or DEFAULT_CONTEXT).options
    )  # a bad policy or option fails here, not per graph

    def compile_fx(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        from torch._functorch.aot_autograd import aot_module_simplified

        def forward_compiler(fx_gm: torch.fx.GraphModule, fx_inputs: list[Any]) -> Callable[..., Any]:
            return _compile_forward(fx_gm, fx_inputs, policy, ctx, device)

        def backward_compiler(fx_gm: torch.fx.GraphModule, fx_inputs: list[Any]) -> Callable[..., Any]:
            return _compile_forward(fx_gm, fx_inputs, policy, ctx, device, what="backward graph")

        return aot_module_simplified(
            gm, example_inputs, fw_compiler=forward_compiler, bw_compiler=backward_compiler
        )

    compile_fx.__name__ = f"streamplan_{policy}"
    return compile_fx


def _compile_forward(
    fx_gm: torch.fx.GraphModule,
    fx_inputs: list[Any],
    policy: str,
    ctx: ScheduleContext | None,
    device: str | None,
    what: str = "graph",
) -> Callable[..., Any]:
    from streamplan.runtime.cuda import StreamExecutor
    from streamplan.runtime.interpret import check_supported
    from streamplan.schedule import registry

    name = f"{what} of {len(fx_gm.graph.nodes)} fx nodes"
    try:
        graph, constants = _to_graph(fx_gm)
        if len(graph.inputs) != len(fx_inputs) or not graph.nodes:
            raise StreamplanError("inputs do not map one to one" if graph.nodes else "nothing to schedule")
        check_supported(graph)
        schedule = registry.make_schedule(graph, policy, ctx)  # verified
    except (StreamplanError, KeyError, TypeError, ValueError, AttributeError, NotImplementedError) as e:
        warn_fallback(name, f"{type(e).__name__}: {e}".splitlines()[0])
        return _boxed(fx_gm.forward)
    run_device = device or _device_of(fx_inputs)
    cuda_executor = None
    if run_device.startswith("cuda"):
        from streamplan.runtime.backend_api import TorchCudaBackend

        cuda_executor = StreamExecutor(graph, schedule, TorchCudaBackend())

    leaves = graph.meta.get("output_values")

    def run_graph(*args: Any) -> list[Any]:
        env = dict(zip(graph.inputs, args, strict=True))
        env.update(constants)
        if cuda_executor is not None:
            results = cuda_executor.launch(env)
        else:
            from streamplan.runtime.cpu import execute_cpu
            from streamplan.runtime.execute import one_thread

            with one_thread():
                results = execute_cpu(graph, schedule, env)
        return _in_fx_order(graph, leaves, results)

    return _boxed(run_graph)


def _in_fx_order(graph: Any, leaves: list[Any] | None, results: tuple[Any, ...]) -> list[Any]:
    """The fx graph's outputs from the run's (``graph.outputs`` order, each value once): a value
    returned twice comes back twice, and a constant output (a backward's ``None`` gradient
    for an input that needs none) as itself."""
    if leaves is None:
        return list(results)
    by_id = dict(zip(graph.outputs, results, strict=True))
    return [by_id[leaf["$v"]] if isinstance(leaf, dict) and "$v" in leaf else leaf for leaf in leaves]


def _to_graph(fx_gm: torch.fx.GraphModule):
    """Capture's ``graph_from_fx`` (every placeholder an input); our converter if it cannot."""
    from streamplan.runtime.fx_convert import fx_to_graph
    from streamplan.runtime.interpret import leaf_values

    try:
        from streamplan.frontends.torch_capture import graph_from_fx

        graph = graph_from_fx(fx_gm, name="torch.compile")
        placeholders = [n.name for n in fx_gm.graph.nodes if n.op == "placeholder"]
        if list(graph.inputs) == placeholders and set(leaf_values(graph)) <= set(graph.inputs):
            return graph, {}
    except (StreamplanError, ImportError, KeyError, TypeError, ValueError):
        pass
    return fx_to_graph(fx_gm, name="torch.compile")


def _device_of(inputs: list[Any]) -> str:
    for x in inputs:
        if isinstance(x, torch.Tensor):
            return str(x.device)
    return "cpu"


def _boxed(fn: Callable[..., Any]) -> Callable[..., Any]:
    """AOTAutograd's boxed calling convention: the compiled function takes one list of args."""

    def boxed(args: list[Any]) -> Any:
        flat = list(args)
        args.clear()
        return fn(*flat)

    boxed._boxed_call = True  # type: ignore[attr-defined]
    return boxed


def register() -> None:
    """Register ``backend="streamplan"`` with dynamo (once)."""
    global _REGISTERED
    if _REGISTERED:
        return
    from torch._dynamo import list_backends, register_backend

    if "streamplan" not in list_backends(exclude_tags=()):
        register_backend(name="streamplan")(backend())
    _REGISTERED = True


def streamplan_backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """The backend ``torch.compile(..., backend="streamplan")`` finds through the package's
    ``torch_dynamo_backends`` entry point: the nimble policy with default options."""
    return backend()(gm, example_inputs)
