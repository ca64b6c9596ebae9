"""Capture a PyTorch module as a streamplan ``Graph`` through ``torch.export``.

``torch.export`` (non-strict) traces ``forward`` with FakeTensors: every tensor,
parameters included, is replaced by one that has shape, dtype and strides but no
data, so no kernel runs and no activation memory is allocated (a batch-32
Inception V3 captures in about a second). The exported training IR keeps ATen ops
as the user wrote them, in-place ones included (``relu_``), which is what memory
analysis needs. ``graph_from_fx`` converts any ATen-level fx graph whose nodes carry
``meta["val"]`` (an exported program's, or an AOTAutograd forward graph given to a
``torch.compile`` backend).

What the conversion keeps for each node: ``node.op = str(OpOverload)``, ids from the
fx names, its call arguments encoded by ``argcodec`` (so the runtime can call the
op again), aliasing from the op schema (views share their base's root storage,
in-place and ``out=`` writes are listed in ``node.mutates``), FLOPs and bytes moved.
A multi-output op gets one value per tensor result (the ``getitem`` node names, or
``<node>.out<i>`` for results nobody reads) and ``attrs["output_index"]`` saying
which result each output is.

``Graph.param_names`` maps value ids to state_dict names (for params, buffers
and constants). Graph ``meta``: ``input_names`` (user-input value ids in call order),
``output_values`` (the flattened outputs, encoded: ``{"$v": id}`` or a constant),
``output_structure`` (a ``torch.utils._pytree`` treespec dump, when it serializes)
and ``constant_values`` (small lifted constants, as nested lists).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import traceback
import warnings
from collections.abc import Iterator
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree

from streamplan.errors import CaptureError
from streamplan.frontends.fx_import import STATIC_HINT, FxConverter, Problems
from streamplan.ir.graph import Graph

CONSTANT_VALUE_LIMIT = 65536  # lifted constants with at most this many elements are stored in meta


def capture(module: torch.nn.Module, example_inputs: Any, *, name: str | None = None) -> Graph:
    """Trace ``module`` on ``example_inputs`` with ``torch.export`` (FakeTensors) into a Graph.

    ``example_inputs`` is a Tensor, a tuple/list of positional arguments, or
    ``(args_tuple, kwargs_dict)``. The inputs may be real or fake tensors (made in a
    ``FakeTensorMode``); either way nothing is computed. A module on the meta device (a
    full-size model built without memory, ``fullsize``) is traced as fake CPU tensors. Raises ``CaptureError`` when
    ``forward`` cannot be traced (the model raised, data-dependent control flow) and
    ``UnsupportedError`` listing every construct the graph cannot represent.
    """
    if not isinstance(module, torch.nn.Module):
        raise CaptureError(
            f"capture() needs a torch.nn.Module, got {type(module).__name__}",
            hint="wrap the function in a Module whose forward calls it",
        )
    name = name or type(module).__name__
    args, kwargs = _split_inputs(example_inputs)
    program = _export(module, args, kwargs, name)
    sig = program.graph_signature
    kinds: dict[str, str] = {}
    fqns: dict[str, str] = {}
    input_names: list[str] = []
    constant_values: dict[str, Any] = {}
    problems = Problems(name)
    kind_of = {"USER_INPUT": "input", "PARAMETER": "param", "BUFFER": "buffer", "CONSTANT_TENSOR": "constant"}
    for spec in sig.input_specs:
        arg_name = getattr(spec.arg, "name", None)
        kind = kind_of.get(spec.kind.name)
        if kind is None:
            problems.add(
                f"input kind {spec.kind.name}",
                arg_name or "?",
                "script objects and effect tokens cannot be captured",
            )
            continue
        if arg_name is None or type(spec.arg).__name__ != "TensorArgument":
            continue  # a non-tensor input, specialised into the graph as a constant
        kinds[arg_name] = kind
        if kind == "input":
            input_names.append(arg_name)
        else:
            fqns[arg_name] = str(spec.target)
        if kind == "constant":
            tensor = program.constants.get(str(spec.target))
            if isinstance(tensor, torch.Tensor) and tensor.numel() <= CONSTANT_VALUE_LIMIT:
                constant_values[arg_name] = tensor.detach().cpu().tolist()
    structure = None
    with contextlib.suppress(Exception):
        structure = pytree.treespec_dumps(program.call_spec.out_spec)
    return FxConverter(program.graph_module, name, kinds, fqns, problems).run(
        input_names=input_names,
        constant_values=constant_values,
        output_structure=structure,
        source="torch.export",
    )


def graph_from_fx(
    gm: torch.fx.GraphModule, *, name: str, params: dict[str, torch.Tensor] | None = None
) -> Graph:
    """Convert an ATen-level fx graph whose nodes carry ``meta["val"]`` to a Graph.

    Placeholders are user inputs unless ``params`` names them (by placeholder name
    or target); those become params (``nn.Parameter``) or buffers (other tensors),
    with ``Graph.param_names`` mapping each to its key in ``params``.
    """
    params = params or {}
    kinds: dict[str, str] = {}
    fqns: dict[str, str] = {}
    input_names: list[str] = []
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        key = node.name if node.name in params else str(node.target)
        if key in params:
            is_param = isinstance(params[key], torch.nn.Parameter)
            kinds[node.name] = "param" if is_param else "buffer"
            fqns[node.name] = key
        else:
            kinds[node.name] = "input"
            input_names.append(node.name)
    converter = FxConverter(gm, name, kinds, fqns, Problems(name))
    return converter.run(input_names=input_names, constant_values={}, output_structure=None, source="fx")


# -- export ------------------------------------------------------------------


def _split_inputs(example_inputs: Any) -> tuple[tuple, dict]:
    x = example_inputs
    if isinstance(x, torch.Tensor):
        return (x,), {}
    if (
        isinstance(x, (tuple, list))
        and len(x) == 2
        and isinstance(x[0], (tuple, list))
        and isinstance(x[1], dict)
    ):
        return tuple(x[0]), dict(x[1])
    if isinstance(x, (tuple, list)):
        return tuple(x), {}
    if isinstance(x, dict):
        return (), dict(x)
    return (x,), {}


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence torch's warnings and log dumps while tracing; errors are reported by us."""
    previous = logging.root.manager.disable
    logging.disable(logging.ERROR)
    try:
        # export also prints partial graphs of failed traces straight to stderr
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


def drop_kv_cache(module: torch.nn.Module) -> bool:
    """Turn off a transformers model's KV cache (``config.use_cache``): its forward then returns
    tensors only, not a ``Cache`` object torch.export cannot return (and a planned forward pass
    has no use for). True when it was on."""
    config = getattr(module, "config", None)
    if getattr(config, "use_cache", False) is True:
        config.use_cache = False
        return True
    return False


@contextlib.contextmanager
def _kv_cache_off(module: torch.nn.Module) -> Iterator[None]:
    """``drop_kv_cache`` while tracing, the user's setting restored afterwards."""
    was_on = drop_kv_cache(module)
    try:
        yield
    finally:
        if was_on:
            module.config.use_cache = True


def _export(module: torch.nn.Module, args: tuple, kwargs: dict, name: str) -> Any:
    from streamplan.frontends.fullsize import faked_module, has_meta_state

    try:
        with _quiet(), _kv_cache_off(module):
            if has_meta_state(module):  # a full-size model on the meta device: trace it as fake CPU tensors
                with faked_module(module, args, kwargs) as (fake_args, fake_kwargs):
                    return torch.export.export(module, fake_args, fake_kwargs, strict=False)
            return torch.export.export(module, args, kwargs, strict=False)
    except Exception as e:  # any failure of tracing, with the user's own line when we find it
        raise _export_error(e, name) from None


def _export_error(e: Exception, name: str) -> CaptureError:
    where = name
    frame = _user_frame(e)
    if frame is not None:
        where = f"{name} ({frame.filename}:{frame.lineno} in {frame.name})"
    first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), "")
    first = first.split(" (unhinted")[0]
    if len(first) > 300:
        first = first[:300] + "..."
    kind = type(e).__name__
    if "data-dependent" in str(e) or "GuardOnDataDependent" in kind:
        return CaptureError(
            f"data-dependent control flow: forward branches on a tensor's value ({kind}: {first})",
            where=where,
            hint="a static graph cannot follow a branch on tensor data; rewrite it with torch.where, "
            "or move the decision out of forward",
        )
    if "dynamic" in first.lower() and "shape" in first.lower():
        return CaptureError(f"dynamic shape: {first}", where=where, hint=STATIC_HINT)
    return CaptureError(
        f"torch.export could not trace forward: it raised {kind}: {first}",
        where=where,
        hint="run the module eagerly on the same inputs to check it works; "
        "model code must be traceable by torch.export (no data-dependent Python control flow)",
    )


def _user_frame(e: BaseException) -> traceback.FrameSummary | None:
    """The innermost traceback frame outside torch and streamplan (the user's code)."""
    torch_dir = os.path.dirname(torch.__file__)
    own_dir = os.path.dirname(os.path.dirname(__file__))
    found = None
    for frame in traceback.extract_tb(e.__traceback__):
        if not frame.filename.startswith((torch_dir, own_dir)) and "<" not in frame.filename:
            found = frame
    return found
