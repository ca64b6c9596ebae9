"""ONNX op -> ATen calls, for the ops that exported CNNs (and simple transformers) use.

Each function reads the current node through the converter ``cv`` (``cv.x(i)`` a
tensor operand, ``cv.const(i)``/``cv.ints(i)`` known values, ``cv.attr``), emits ATen
calls with ``cv.emit`` and names the node's outputs with ``cv.bind``. What a function
cannot express (asymmetric average-pool padding, a computed shape...) is reported with
``cv.fail`` and collected with every other problem of the model.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

ONNX_DTYPES = {
    1: "float32",
    2: "uint8",
    3: "int8",
    5: "int16",
    6: "int32",
    7: "int64",
    9: "bool",
    10: "float16",
    11: "float64",
    16: "bfloat16",
}
FOLD_LIMIT = 65536  # constants up to this many elements are folded and kept in the graph

OpFn = Callable[[Any, Any], None]
OPS: dict[str, OpFn] = {}


def op(*names: str) -> Callable[[OpFn], OpFn]:
    def register(fn: OpFn) -> OpFn:
        for n in names:
            OPS[n] = fn
        return fn

    return register


_UNARY = {
    "Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Log": "log", "Sqrt": "sqrt",
    "Neg": "neg", "Abs": "abs", "Erf": "erf", "Reciprocal": "reciprocal", "Floor": "floor", "Ceil": "ceil",
    "Sin": "sin", "Cos": "cos", "HardSwish": "hardswish", "Softplus": "softplus", "Not": "logical_not",
}  # fmt: skip
_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow"}
_COMPARE = {"Equal": "eq", "Less": "lt", "Greater": "gt", "LessOrEqual": "le", "GreaterOrEqual": "ge"}


@op(*_UNARY)
def _unary(cv, node) -> None:
    cv.bind(0, cv.emit(f"aten.{_UNARY[node.op_type]}.default", [cv.x(0)])[0])


@op("Identity", "Dropout")
def _identity(cv, node) -> None:
    # no node: the output is the input (inference-mode Dropout is the identity too)
    if node.op_type == "Dropout" and len(node.output) > 1 and node.output[1]:
        cv.fail("Dropout with its mask output read", "export the model in inference (eval) mode")
    cv.bind(0, cv.x(0))


@op(*_BINARY)
def _binary(cv, node) -> None:
    name = _BINARY[node.op_type]
    if node.op_type == "Div" and not cv.dtype(0).startswith(("float", "bfloat")):
        cv.bind(0, cv.emit("aten.div.Tensor_mode", [cv.x(0), cv.x(1)], {"rounding_mode": "trunc"})[0])
        return
    scalar = cv.const(1)
    if scalar is not None and np.asarray(scalar).size == 1 and len(cv.shape(1)) <= len(cv.shape(0)):
        value = np.asarray(scalar).reshape(()).item()
        overload = "Tensor_Scalar" if name == "pow" else "Scalar"
        cv.bind(0, cv.emit(f"aten.{name}.{overload}", [cv.x(0), value])[0])
        return
    overload = "Tensor_Tensor" if name == "pow" else "Tensor"
    cv.bind(0, cv.emit(f"aten.{name}.{overload}", [cv.x(0), cv.x(1)])[0])


@op(*_COMPARE)
def _compare(cv, node) -> None:
    cv.bind(0, cv.emit(f"aten.{_COMPARE[node.op_type]}.Tensor", [cv.x(0), cv.x(1)])[0])


@op("Where")
def _where(cv, node) -> None:
    cv.bind(0, cv.emit("aten.where.self", [cv.x(0), cv.x(1), cv.x(2)])[0])


@op("MatMul")
def _matmul(cv, node) -> None:
    cv.bind(0, cv.emit("aten.matmul.default", [cv.x(0), cv.x(1)])[0])


@op("Gemm")
def _gemm(cv, node) -> None:
    alpha, beta = float(cv.attr("alpha", 1.0)), float(cv.attr("beta", 1.0))
    trans_a, trans_b = int(cv.attr("transA", 0)), int(cv.attr("transB", 0))
    bias = cv.x(2) if cv.has(2) else None
    if not trans_a and trans_b and alpha == 1.0 and beta == 1.0 and (bias is None or len(cv.shape(2)) == 1):
        cv.bind(0, cv.emit("aten.linear.default", [cv.x(0), cv.x(1), bias])[0])  # a Linear layer
        return
    a = cv.emit("aten.permute.default", [cv.x(0), [1, 0]])[0] if trans_a else cv.x(0)
    b = cv.emit("aten.permute.default", [cv.x(1), [1, 0]])[0] if trans_b else cv.x(1)
    if bias is None:
        out = cv.emit("aten.mm.default", [a, b])[0]
        if alpha != 1.0:
            out = cv.emit("aten.mul.Scalar", [out, alpha])[0]
    else:
        out = cv.emit("aten.addmm.default", [bias, a, b], {"beta": beta, "alpha": alpha})[0]
    cv.bind(0, out)


def _spatial_pads(cv, node, x_shape, kernel, strides, dilations) -> list[int]:
    """Explicit begin+end pads of the spatial dims (auto_pad resolved)."""
    n = len(kernel)
    auto = cv.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        return list(cv.attr("pads", [0] * (2 * n)))
    if auto == "VALID":
        return [0] * (2 * n)
    begins, ends = [], []
    for size, k, s, d in zip(x_shape[2:], kernel, strides, dilations, strict=True):
        total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
        small, large = total // 2, total - total // 2
        begins.append(small if auto == "SAME_UPPER" else large)
        ends.append(large if auto == "SAME_UPPER" else small)
    return begins + ends


def _pad_first(cv, x, pads: list[int], value: float):
    """Pad asymmetrically before an op that only pads symmetrically; returns (input, symmetric pads)."""
    n = len(pads) // 2
    begins, ends = pads[:n], pads[n:]
    if begins == ends:
        return x, begins
    torch_pads = [p for i in reversed(range(n)) for p in (begins[i], ends[i])]
    return cv.emit("aten.constant_pad_nd.default", [x, torch_pads, value])[0], [0] * n


@op("Conv")
def _conv(cv, node) -> None:
    w_shape = cv.shape(1)
    kernel = list(cv.attr("kernel_shape", w_shape[2:]))
    n = len(kernel)
    strides = list(cv.attr("strides", [1] * n))
    dilations = list(cv.attr("dilations", [1] * n))
    pads = _spatial_pads(cv, node, cv.shape(0), kernel, strides, dilations)
    x, padding = _pad_first(cv, cv.x(0), pads, 0.0)
    bias = cv.x(2) if cv.has(2) else None
    args = [x, cv.x(1), bias, strides, padding, dilations, False, [0] * n, int(cv.attr("group", 1))]
    cv.bind(0, cv.emit("aten.convolution.default", args)[0])


@op("MaxPool", "AveragePool")
def _pool(cv, node) -> None:
    kernel = list(cv.attr("kernel_shape"))
    n = len(kernel)
    if n not in (1, 2, 3):
        cv.fail(f"{node.op_type} over {n} dims", "pool over 1, 2 or 3 dims")
    strides = list(cv.attr("strides", [1] * n))
    dilations = list(cv.attr("dilations", [1] * n))
    pads = _spatial_pads(cv, node, cv.shape(0), kernel, strides, dilations)
    ceil = bool(cv.attr("ceil_mode", 0))
    if node.op_type == "MaxPool":
        if len(node.output) > 1 and node.output[1]:
            cv.fail("MaxPool with its indices output", "only the pooled values can be imported")
        x, padding = _pad_first(cv, cv.x(0), pads, -math.inf)
        out = cv.emit(f"aten.max_pool{n}d.default", [x, kernel, strides, padding, dilations, ceil])[0]
    else:
        if pads[:n] != pads[n:]:
            cv.fail("AveragePool with asymmetric padding", "pad symmetrically")
        if any(d != 1 for d in dilations):
            cv.fail("AveragePool with dilations", "torch average pooling has no dilation")
        include = bool(cv.attr("count_include_pad", 0))
        out = cv.emit(f"aten.avg_pool{n}d.default", [cv.x(0), kernel, strides, pads[:n], ceil, include])[0]
    cv.bind(0, out)


@op("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(cv, node) -> None:
    dims = list(range(2, len(cv.shape(0))))
    fn = "aten.mean.dim" if node.op_type == "GlobalAveragePool" else "aten.amax.default"
    cv.bind(0, cv.emit(fn, [cv.x(0), dims, True])[0])


@op("ReduceMean", "ReduceSum", "ReduceMax")
def _reduce(cv, node) -> None:
    axes = cv.attr("axes")
    if axes is None and cv.has(1):
        axes = cv.ints(1, "axes")
    rank = len(cv.shape(0))
    if not axes:
        if cv.attr("noop_with_empty_axes", 0):
            cv.bind(0, cv.x(0))
            return
        axes = list(range(rank))
    axes = sorted(a % rank for a in axes)
    keep = bool(cv.attr("keepdims", 1))
    fn = {
        "ReduceMean": "aten.mean.dim",
        "ReduceSum": "aten.sum.dim_IntList",
        "ReduceMax": "aten.amax.default",
    }
    cv.bind(0, cv.emit(fn[node.op_type], [cv.x(0), axes, keep])[0])


@op("Softmax")
def _softmax(cv, node) -> None:
    rank = len(cv.shape(0))
    axis = int(cv.attr("axis", -1 if cv.opset >= 13 else 1)) % rank
    if cv.opset < 13 and axis != rank - 1:
        cv.fail("Softmax before opset 13 over more than the last axis", "export with opset 13 or later")
    cv.bind(0, cv.emit("aten.softmax.int", [cv.x(0), axis])[0])


@op("LayerNormalization")
def _layer_norm(cv, node) -> None:
    shape = cv.shape(0)
    axis = int(cv.attr("axis", -1)) % len(shape)
    bias = cv.x(2) if cv.has(2) else None
    args = [cv.x(0), list(shape[axis:]), cv.x(1), bias, float(cv.attr("epsilon", 1e-5))]
    cv.bind(0, cv.emit("aten.layer_norm.default", args)[0])


@op("BatchNormalization")
def _batch_norm(cv, node) -> None:
    if cv.attr("training_mode", 0):
        cv.fail("BatchNormalization in training mode", "export the model in inference (eval) mode")
    stats = [cv.x(3, kind="buffer"), cv.x(4, kind="buffer")]
    eps, momentum = float(cv.attr("epsilon", 1e-5)), float(cv.attr("momentum", 0.9))
    args = [cv.x(0), cv.x(1), cv.x(2), *stats, False, 1.0 - momentum, eps, True]
    cv.bind(0, cv.emit("aten.batch_norm.default", args)[0])


@op("Concat")
def _concat(cv, node) -> None:
    rank = len(cv.shape(0))
    parts = [cv.x(i) for i in range(len(node.input)) if cv.has(i)]
    cv.bind(0, cv.emit("aten.cat.default", [parts, int(cv.attr("axis")) % rank])[0])


@op("Split")
def _split(cv, node) -> None:
    shape = cv.shape(0)
    axis = int(cv.attr("axis", 0)) % len(shape)
    sizes = cv.attr("split") or (cv.ints(1, "split sizes") if cv.has(1) else None)
    if not sizes:
        count = int(cv.attr("num_outputs", len(node.output)))
        step = -(-shape[axis] // count)
        sizes = [min(step, shape[axis] - k * step) for k in range(count)]
    parts = cv.emit("aten.split_with_sizes.default", [cv.x(0), list(sizes), axis])
    for j, part in enumerate(parts):
        cv.bind(j, part)


@op("Flatten")
def _flatten(cv, node) -> None:
    shape = cv.shape(0)
    axis = int(cv.attr("axis", 1)) % (len(shape) + 1) if shape else 0
    if axis == 1 and len(shape) >= 2:
        cv.bind(0, cv.emit("aten.flatten.using_ints", [cv.x(0), 1, -1])[0])
        return
    target = [math.prod(shape[:axis]), math.prod(shape[axis:])]
    cv.bind(0, cv.emit("aten.reshape.default", [cv.x(0), target])[0])


@op("Reshape")
def _reshape(cv, node) -> None:
    shape = cv.shape(0)
    target = cv.ints(1, "target shape")
    if not cv.attr("allowzero", 0):
        target = [shape[i] if d == 0 else d for i, d in enumerate(target)]
    cv.bind(0, cv.emit("aten.reshape.default", [cv.x(0), target])[0])


@op("Squeeze")
def _squeeze(cv, node) -> None:
    axes = cv.attr("axes") or (cv.ints(1, "axes") if cv.has(1) else None)
    if not axes:
        cv.bind(0, cv.emit("aten.squeeze.default", [cv.x(0)])[0])
        return
    rank = len(cv.shape(0))
    cv.bind(0, cv.emit("aten.squeeze.dims", [cv.x(0), sorted(a % rank for a in axes)])[0])


@op("Unsqueeze")
def _unsqueeze(cv, node) -> None:
    axes = cv.attr("axes") or cv.ints(1, "axes")
    rank = len(cv.shape(0)) + len(axes)
    x = cv.x(0)
    for a in sorted(a % rank for a in axes):  # one view per new axis, in increasing order
        x = cv.emit("aten.unsqueeze.default", [x, a])[0]
    cv.bind(0, x)


@op("Transpose")
def _transpose(cv, node) -> None:
    rank = len(cv.shape(0))
    perm = list(cv.attr("perm", list(reversed(range(rank)))))
    cv.bind(0, cv.emit("aten.permute.default", [cv.x(0), perm])[0])


@op("Slice")
def _slice(cv, node) -> None:
    shape = cv.shape(0)
    if cv.opset < 10:
        starts, ends = list(cv.attr("starts")), list(cv.attr("ends"))
        axes = list(cv.attr("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = cv.ints(1, "starts"), cv.ints(2, "ends")
        axes = cv.ints(3, "axes") if cv.has(3) else list(range(len(starts)))
        steps = cv.ints(4, "steps") if cv.has(4) else [1] * len(starts)
    x = cv.x(0)
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        if step <= 0:
            cv.fail("Slice with a negative step", "slice forwards, then flip")
        dim = shape[axis % len(shape)]
        start = max(0, min(start + dim if start < 0 else start, dim))
        end = max(0, min(end + dim if end < 0 else end, dim))
        x = cv.emit("aten.slice.Tensor", [x, axis % len(shape), start, end, step])[0]
    cv.bind(0, x)


@op("Pad")
def _pad(cv, node) -> None:
    pad_mode = cv.attr("mode", "constant")
    pads = list(cv.attr("pads")) if cv.opset < 11 else cv.ints(1, "pads")
    rank = len(cv.shape(0))
    axes = cv.ints(3, "axes") if cv.has(3) else list(range(rank))
    n = len(axes)
    full = [0] * (2 * rank)
    for k, a in enumerate(axes):
        full[a % rank], full[rank + a % rank] = pads[k], pads[n + k]
    if pad_mode != "constant":
        cv.fail(f"Pad in {pad_mode} mode", "only constant padding is supported")
    value = cv.attr("value", 0.0) if cv.opset < 11 else (cv.const(2) if cv.has(2) else 0.0)
    value = float(np.asarray(value).reshape(-1)[0]) if np.asarray(value).size else 0.0
    torch_pads = [p for i in reversed(range(rank)) for p in (full[i], full[rank + i])]
    while len(torch_pads) > 2 and torch_pads[-1] == 0 and torch_pads[-2] == 0:
        torch_pads = torch_pads[:-2]  # leading dims without padding need not be named
    cv.bind(0, cv.emit("aten.constant_pad_nd.default", [cv.x(0), torch_pads, value])[0])


@op("Cast")
def _cast(cv, node) -> None:
    to = ONNX_DTYPES.get(int(cv.attr("to")))
    if to is None:
        cv.fail(f"Cast to ONNX type {cv.attr('to')}", "cast to a standard dtype")
    import torch

    cv.bind(0, cv.emit("aten._to_copy.default", [cv.x(0)], {"dtype": getattr(torch, to)})[0])


@op("Gather")
def _gather(cv, node) -> None:
    rank = len(cv.shape(0))
    axis = int(cv.attr("axis", 0)) % rank
    index = cv.const(1)
    if index is not None and np.asarray(index).ndim == 0:
        cv.bind(0, cv.emit("aten.select.int", [cv.x(0), axis, int(index)])[0])
    elif index is not None and np.asarray(index).ndim == 1:
        cv.bind(0, cv.emit("aten.index_select.default", [cv.x(0), axis, cv.x(1)])[0])
    elif axis == 0 and rank == 2:
        cv.bind(0, cv.emit("aten.embedding.default", [cv.x(0), cv.x(1)])[0])  # a lookup table
    else:
        cv.fail("Gather with computed indices other than a table lookup", "gather rows of a 2-D table")


@op("Expand")
def _expand(cv, node) -> None:
    shape, target = list(cv.shape(0)), cv.ints(1, "shape")
    rank = max(len(shape), len(target))
    shape, target = [1] * (rank - len(shape)) + shape, [1] * (rank - len(target)) + target
    out = [t if s == 1 else s for s, t in zip(shape, target, strict=True)]
    cv.bind(0, cv.emit("aten.expand.default", [cv.x(0), out])[0])


@op("Clip")
def _clip(cv, node) -> None:
    if cv.opset < 11:
        low, high = cv.attr("min"), cv.attr("max")
    else:
        low = float(np.asarray(cv.const(1)).item()) if cv.has(1) and cv.const(1) is not None else None
        high = float(np.asarray(cv.const(2)).item()) if cv.has(2) and cv.const(2) is not None else None
        if (cv.has(1) and cv.const(1) is None) or (cv.has(2) and cv.const(2) is None):
            cv.fail("Clip with computed bounds", "its bounds must be constants")
    cv.bind(0, cv.emit("aten.clamp.default", [cv.x(0), low, high])[0])


@op("LeakyRelu")
def _leaky_relu(cv, node) -> None:
    cv.bind(0, cv.emit("aten.leaky_relu.default", [cv.x(0), float(cv.attr("alpha", 0.01))])[0])


@op("Gelu")
def _gelu(cv, node) -> None:
    cv.bind(0, cv.emit("aten.gelu.default", [cv.x(0)], {"approximate": cv.attr("approximate", "none")})[0])
