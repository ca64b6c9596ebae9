"""Load an ONNX model as a streamplan ``Graph`` (a model spec ending in ``.onnx``).

Shapes are static: a symbolic batch dimension (axis 0 of the inputs) is bound to
``batch`` (1 by default) and ONNX shape inference gives every other tensor its shape.
Each ONNX node becomes one or a few ATen nodes (``onnx_ops``), so that the rest of
streamplan (cost model, memory analyses, runtime, codegen) sees the same kind of graph
a torch capture gives: call arguments encoded by ``argcodec``, aliasing from the ATen
schema (Reshape, Flatten, Squeeze, Unsqueeze and Transpose become views; Identity and
inference-mode Dropout add no node at all), FLOPs from ``flops``. Each ATen node is
also run once under ``FakeTensorMode``: its result must have the shape and dtype ONNX
inference gave, or the import fails naming the node.

Initializers become parameters (kind ``param``; batch-norm running statistics are
``buffer``s), named by ``Graph.param_names`` after the initializer. ``Constant`` nodes
and everything computed from constants alone (shape arithmetic, ``ConstantOfShape``...)
are folded at import; a folded tensor an op reads as a tensor becomes a ``constant``
value whose data is kept in ``meta["constant_values"]``. Control flow, dimensions that
cannot be bound and unsupported ops are collected and raised as one ``UnsupportedError``.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from streamplan.errors import FileFormatError, ModelSpecError
from streamplan.frontends.onnx_convert import Converter, onnx_problems
from streamplan.frontends.onnx_ops import OPS
from streamplan.frontends.problems import Problems
from streamplan.ir.graph import Graph

CONTROL_FLOW = {"If", "Loop", "Scan", "SequenceMap"}
INSTALL_HINT = "pip install onnx onnxruntime  (or: pip install 'streamplan[onnx]')"


def require_onnx() -> Any:
    """The ``onnx`` package, or a clear error naming the optional extra."""
    try:
        import onnx
    except ImportError:
        raise ModelSpecError(
            "reading .onnx models needs the optional package 'onnx'", hint=INSTALL_HINT
        ) from None
    return onnx


def load_onnx(path: str | Path, *, batch: int | None = None, dtype: str | None = None) -> Graph:
    """Read ``path`` as a verified graph; ``batch`` binds a symbolic batch dimension."""
    onnx = require_onnx()
    p = Path(path)
    if not p.is_file():
        raise ModelSpecError(f"ONNX file {str(path)!r} does not exist")
    try:
        model = onnx.load(str(p))
    except Exception as e:  # a protobuf that does not parse
        raise FileFormatError(f"not a readable ONNX model ({type(e).__name__}: {e})", where=str(p)) from None
    name = p.stem
    problems = onnx_problems(name)
    _check_structure(model, problems)
    bound_batch = bind_inputs(model, batch, problems)
    problems.raise_if_any()
    try:
        inferred = onnx.shape_inference.infer_shapes(
            model, check_type=False, strict_mode=False, data_prop=True
        )
    except Exception as e:
        raise FileFormatError(f"ONNX shape inference failed: {e}", where=str(p)) from None
    graph = Converter(inferred, name, problems).run()
    floats = [
        graph.values[v].dtype for v in (*graph.inputs, *graph.params) if "float" in graph.values[v].dtype
    ]
    if dtype is not None and floats and dtype != floats[0]:
        raise ModelSpecError(
            f"an ONNX model keeps the dtypes it was exported with; {dtype} was asked for",
            where=str(p),
            hint="export the model in that dtype",
        )
    meta = {**graph.meta, "source": "onnx", "onnx_path": str(p.resolve()), "batch": bound_batch}
    return graph.replace(meta=meta)


def _check_structure(model: Any, problems: Problems) -> None:
    """Control flow, ops outside the default domain and ops with no ATen mapping (unless they
    only compute constants, which are folded), listed before anything is converted."""
    known = {i.name for i in model.graph.initializer}
    for node in model.graph.node:
        where = node.name or node.op_type
        if node.op_type in ("Constant", "Shape", "Size") or all(n in known for n in node.input if n):
            known.update(node.output)  # folded at import
        elif node.op_type not in OPS and node.op_type not in CONTROL_FLOW and node.domain in ("", "ai.onnx"):
            problems.add(f"op {node.op_type}", where, "streamplan has no mapping of this op to ATen")
        if node.op_type in CONTROL_FLOW:
            problems.add(
                f"control flow ({node.op_type})",
                where,
                "a static schedule needs a static graph; export each branch or unrolled loop as its own model",
            )
        elif node.domain not in ("", "ai.onnx"):
            problems.add(
                f"op {node.domain}.{node.op_type}",
                where,
                "only standard ONNX ops (the default domain) can be imported",
            )
    if model.functions:
        problems.add(
            "model-local functions",
            ", ".join(f.name for f in model.functions[:3]),
            "inline them (onnx.inliner.inline_local_functions) before loading",
        )


def bind_inputs(model: Any, batch: int | None, problems: Problems) -> int | None:
    """Give every graph input static dims in place: a symbolic axis 0 becomes ``batch`` (default 1).

    Returns the batch bound (None when the model has no symbolic batch dimension).
    Symbolic dims elsewhere, or a ``batch`` a fixed-batch model cannot take, are problems.
    """
    initializers = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    symbolic_batch = False
    for inp in inputs:
        dims = inp.type.tensor_type.shape.dim
        for axis, d in enumerate(dims):
            if d.HasField("dim_value") and d.dim_value > 0:
                continue
            label = d.dim_param or "unknown"
            if axis == 0:
                symbolic_batch = True
            else:
                problems.add(
                    f"symbolic dimension {label!r} (axis {axis} of input {inp.name!r})",
                    inp.name,
                    "only the batch dimension (axis 0) can be bound; export with a static size here",
                )
    bound = (batch or 1) if symbolic_batch else None
    for inp in inputs:
        dims = inp.type.tensor_type.shape.dim
        if not dims:
            continue
        d0 = dims[0]
        if d0.HasField("dim_value") and d0.dim_value > 0:
            if batch is not None and not symbolic_batch and d0.dim_value != batch:
                problems.add(
                    f"fixed batch size {d0.dim_value} (input {inp.name!r}), batch {batch} asked for",
                    inp.name,
                    "re-export with a dynamic batch axis (torch.onnx.export(..., dynamic_axes="
                    "{name: {0: 'batch'}}))",
                )
        elif bound is not None:
            d0.Clear()
            d0.dim_value = bound
    for out in model.graph.output:  # recomputed by shape inference from the bound inputs
        with contextlib.suppress(Exception):
            out.type.tensor_type.ClearField("shape")
    del model.graph.value_info[:]
    return bound


def leaf_tensors(graph: Graph, path: str | Path | None = None) -> dict[str, Any]:
    """value id -> torch tensor for the model's initializers and folded constants (what ``run``
    executes with; inputs are left to the caller)."""
    import numpy as np
    import torch

    onnx = require_onnx()
    model = onnx.load(str(path or graph.meta["onnx_path"]))
    arrays = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    out: dict[str, Any] = {}
    constants = graph.meta.get("constant_values", {}) or {}
    for vid in graph.params:
        v = graph.values[vid]
        if vid in constants:
            out[vid] = torch.tensor(constants[vid], dtype=getattr(torch, v.dtype)).reshape(v.shape)
        elif graph.param_names.get(vid) in arrays:
            out[vid] = torch.from_numpy(np.array(arrays[graph.param_names[vid]])).reshape(v.shape)  # a copy
    return out
