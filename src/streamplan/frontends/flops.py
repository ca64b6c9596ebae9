"""FLOPs of one ATen op from its shapes (no torch needed).

``node_flops(name, bound, outputs)`` takes the op's base name (``"convolution"``,
``"relu"``; in-place and ``out=`` variants use the base name), its schema-bound
arguments (tensors as ``Value``\\ s, tensor lists as lists of ``Value``\\ s, the rest as
python values) and its tensor outputs. The counts are the usual ones, a multiply-add
being 2 FLOPs:

- matmul family (mm, addmm, bmm, baddbmm, matmul, linear, einsum): 2·M·N·K;
- convolution: 2 · out numel · (Cin/groups) · kernel area; transposed convolution
  counts per *input* element instead (2 · in numel · (Cout/groups) · kernel area),
  which is the number of multiply-adds it really performs;
- scaled dot-product attention: 2·B·H·L·S·(D + Dv) (= 4·B·H·L·S·D); its backward 2.5 times
  that (four matmuls, and the flash kernels' recomputation of the scores);
- grouped matmuls (mixture-of-experts layers: ``_grouped_mm``, transformers'
  ``grouped_mm_fallback``): 2·S·K·N for S rows of K against the experts' K×N, twice that
  for the backward (the gradients of the input and of the weights);
- pooling: out numel · window area; adaptive pooling: in numel;
- norms and softmax: 5 · numel; reductions: in numel (variance 3×);
- data movement and creation (cat, copy, embedding, zeros...): 0;
- anything else is taken as elementwise: numel of the first output.

Views cost nothing; the caller sets their FLOPs to 0 before asking. ``node_bytes_read``
counts what an op reads: every input once, but only the picked rows of a gather's table
(``embedding``, ``index_select``, ``gather``, ``index``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from streamplan.ir.dtypes import numel
from streamplan.ir.graph import Value

_NORMS = {
    "batch_norm",
    "native_batch_norm",
    "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training",
    "_native_batch_norm_legit_functional",
    "layer_norm",
    "native_layer_norm",
    "group_norm",
    "native_group_norm",
    "instance_norm",
    "rms_norm",
    "_fused_rms_norm",
    "cudnn_batch_norm",
}
_SOFTMAX = {"softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax"}
_REDUCTIONS = {
    "sum",
    "mean",
    "amax",
    "amin",
    "max",
    "min",
    "prod",
    "argmax",
    "argmin",
    "all",
    "any",
    "cumsum",
    "cumprod",
    "count_nonzero",
    "norm",
    "linalg_vector_norm",
    "nansum",
    "aminmax",
}
_VARIANCE = {"var", "std", "var_mean", "std_mean", "logsumexp"}
_ZERO = {
    "cat",
    "stack",
    "clone",
    "copy",
    "_to_copy",
    "to",
    "contiguous",
    "embedding",
    "index",
    "index_select",
    "gather",
    "scatter",
    "slice_scatter",
    "select_scatter",
    "index_put",
    "constant_pad_nd",
    "pad",
    "zeros",
    "ones",
    "full",
    "empty",
    "empty_strided",
    "arange",
    "new_zeros",
    "new_ones",
    "new_full",
    "new_empty",
    "new_empty_strided",
    "zeros_like",
    "ones_like",
    "full_like",
    "empty_like",
    "rand",
    "randn",
    "rand_like",
    "randn_like",
    "lift_fresh_copy",
    "fill",
    "repeat",
    "tile",
    "roll",
    "flip",
    "scalar_tensor",
    "tensor",
    "masked_select",
    "nonzero",
    "unfold_copy",
    "_unsafe_view",
    "detach_copy",
    "permute_copy",
    "view_copy",
    "expand_copy",
    "split_with_sizes_copy",
    "lift_fresh",
    "zero",
    "reflection_pad1d",
    "reflection_pad2d",
    "replication_pad1d",
    "replication_pad2d",
}
_SDPA_BACKWARD = {
    "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_flash_attention_for_cpu_backward",
    "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_cudnn_attention_backward",
}
_SDPA = {
    "scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_attention_math",
}


def node_flops(name: str, bound: dict[str, Any], outputs: Sequence[Value]) -> int:
    """FLOPs of one op (see the module docstring for the rules)."""
    tensors = [v for v in bound.values() if isinstance(v, Value)]
    first_in = numel(tensors[0].shape) if tensors else 0
    first_out = numel(outputs[0].shape) if outputs else 0
    rule = _RULES.get(name)
    if rule is not None:
        return int(rule(bound, outputs))
    if "conv" in name and "weight" in bound:
        return _conv(bound, outputs)
    if name in _SDPA:
        return _sdpa(bound)
    if name in _SDPA_BACKWARD:
        return int(2.5 * _sdpa(bound))
    if "adaptive" in name and "pool" in name:
        return first_in
    if "pool" in name:
        return _pool(bound, outputs)
    if name in _NORMS or name in _SOFTMAX:
        return 5 * first_in
    if name in _VARIANCE:
        return 3 * first_in
    if name in _REDUCTIONS:
        return first_in
    if name in _ZERO:
        return 0
    return first_out


# ops that pick rows or elements out of a table: the table's argument name in the op's schema
_GATHERS = {"embedding": "weight", "index_select": "self", "gather": "self", "index": "self", "take": "self"}


def node_bytes_read(
    name: str, bound: dict[str, Any], inputs: Sequence[Value], outputs: Sequence[Value]
) -> int:
    """Bytes one op reads: each of its inputs once, except that a gather (``embedding``,
    ``index_select``, ``gather``, ``index``, ``take``) reads only what it picks from its table (at
    most its output's bytes), not the whole table: a 32,000-row embedding looking up 16 tokens
    reads 16 rows."""
    total = sum(v.nbytes for v in inputs)
    table = bound.get(_GATHERS.get(name, ""))
    if isinstance(table, Value) and any(v.id == table.id for v in inputs):
        picked = min(table.nbytes, sum(v.nbytes for v in outputs))
        total -= table.nbytes - picked
    return total


def _shape(bound: dict[str, Any], *names: str) -> tuple[int, ...]:
    for n in names:
        v = bound.get(n)
        if isinstance(v, Value):
            return v.shape
    return ()


def _mm(bound: dict[str, Any], outputs: Sequence[Value]) -> int:
    a = _shape(bound, "mat1", "batch1", "self", "input")
    k = a[-1] if a else 1
    return 2 * numel(outputs[0].shape) * k if outputs else 0


def _matmul(bound: dict[str, Any], outputs: Sequence[Value]) -> int:
    a = _shape(bound, "self", "input")
    k = a[-1] if a else 1
    return 2 * max(numel(outputs[0].shape), 1) * k if outputs else 0


def _linear(bound: dict[str, Any], outputs: Sequence[Value]) -> int:
    w = _shape(bound, "weight")
    k = w[-1] if w else 1
    return 2 * numel(outputs[0].shape) * k if outputs else 0


def _einsum(bound: dict[str, Any], outputs: Sequence[Value]) -> int:
    equation = str(bound.get("equation", "")).replace(" ", "")
    operands = [v for v in bound.get("tensors", []) if isinstance(v, Value)]
    lhs = equation.split("->")[0].split(",")
    sizes: dict[str, int] = {}
    for term, v in zip(lhs, operands, strict=False):
        if "." in term:  # ellipsis: fall back to a matmul-like estimate
            return 2 * numel(outputs[0].shape) if outputs else 0
        for letter, d in zip(term, v.shape, strict=False):
            sizes[letter] = d
    return 2 * math.prod(sizes.values()) if sizes else 0


def _conv(bound: dict[str, Any], outputs: Sequence[Value]) -> int:
    w = bound["weight"].shape if isinstance(bound.get("weight"), Value) else ()
    x = _shape(bound, "input", "self")
    if len(w) < 2 or not outputs:
        return 0
    kernel_area = numel(w[2:])
    if bool(bound.get("transposed", False)):
        # weight is (Cin, Cout/groups, *k): every input element meets Cout/groups * k weights
        return 2 * numel(x) * w[1] * kernel_area
    return 2 * numel(outputs[0].shape) * w[1] * kernel_area


def _sdpa(bound: dict[str, Any]) -> int:
    q = _shape(bound, "query")
    k = _shape(bound, "key")
    v = _shape(bound, "value")
    if len(q) < 2 or len(k) < 2 or len(v) < 1:
        return 0
    batch_heads = numel(q[:-2])
    length, d = q[-2], q[-1]
    source = k[-2]
    return 2 * batch_heads * length * source * (d + v[-1])


def _pool(bound: dict[str, Any], outputs: Sequence[Value]) -> int:
    if not outputs:
        return 0
    out = outputs[0].shape
    kernel = bound.get("kernel_size", 1)
    spatial = max(len(out) - 2, 1)
    if isinstance(kernel, int):
        kernel = [kernel] * spatial
    kernel = list(kernel) or [1]
    if len(kernel) == 1:
        kernel = kernel * spatial
    return numel(out) * numel(kernel)


def _grouped_mm(bound: dict[str, Any], outputs: Sequence[Value]) -> int:
    """S rows of K against per-expert K x N weights: 2·S·K·N (the output is S x N)."""
    k = (_shape(bound, "input", "self", "mat_a") or (1,))[-1]
    return 2 * numel(outputs[0].shape) * k if outputs else 0


def _grouped_mm_backward(bound: dict[str, Any], outputs: Sequence[Value]) -> int:
    """The gradients of the input and of the weights: two grouped matmuls of the forward's size."""
    grad_out = _shape(bound, "grad_output")
    k = (_shape(bound, "input") or (1,))[-1]
    return 4 * numel(grad_out) * k if grad_out else 0


_RULES = {
    "_grouped_mm": _grouped_mm,
    "grouped_mm": _grouped_mm,
    "grouped_mm_fallback": _grouped_mm,
    "grouped_mm_fallback_backward": _grouped_mm_backward,
    "mm": _mm,
    "addmm": _mm,
    "bmm": _mm,
    "baddbmm": _mm,
    "addbmm": lambda b, o: 2 * numel(_shape(b, "batch1")) * (_shape(b, "batch2") or (1,))[-1],
    "mv": lambda b, o: 2 * numel(_shape(b, "self")),
    "addmv": lambda b, o: 2 * numel(_shape(b, "mat")),
    "dot": lambda b, o: 2 * numel(_shape(b, "self")),
    "vdot": lambda b, o: 2 * numel(_shape(b, "self")),
    "matmul": _matmul,
    "linear": _linear,
    "einsum": _einsum,
}


def _conv_transpose_rule(bound: dict[str, Any], outputs: Sequence[Value]) -> int:
    return _conv({**bound, "transposed": True}, outputs)


for _name in ("conv_transpose1d", "conv_transpose2d", "conv_transpose3d"):
    _RULES[_name] = _conv_transpose_rule
