"""Which ops are which: views that launch no kernel, GEMM-like and convolution ops, an op's base name.

The cost models (``cost.opcost``), fusion, remat and the memory analyses all ask these
questions of an op by its ATen name; the answers live here, apart from what an op costs.
"""

from __future__ import annotations

from streamplan.ir.fused import is_concat_in_place
from streamplan.ir.graph import Graph, Node

# Ops that only make a new tensor header (or nothing): no kernel, no device time.
VIEW_OPS = frozenset(
    {
        "view",
        "_unsafe_view",
        "reshape",
        "t",
        "transpose",
        "permute",
        "expand",
        "expand_as",
        "slice",
        "select",
        "squeeze",
        "unsqueeze",
        "alias",
        "detach",
        "getitem",
        "split",
        "split_with_sizes",
        "unbind",
        "chunk",
        "narrow",
        "as_strided",
        "unflatten",
        "flatten",
        "view_as",
        "empty",
        "empty_like",
        "empty_strided",
        "lift_fresh",
        "lift_fresh_copy",
        "_reshape_alias",
        "numpy_T",
        "sym_size",
        "output",
    }
)
GEMM_OPS = frozenset(
    {
        "convolution",
        "conv2d",
        "conv1d",
        "conv3d",
        "_convolution",
        "cudnn_convolution",
        "mm",
        "addmm",
        "bmm",
        "baddbmm",
        "matmul",
        "linear",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
        "scaled_dot_product_attention",
        "_scaled_dot_product_cudnn_attention",
        # their backward kernels are matmuls on the tensor cores too
        "_scaled_dot_product_efficient_attention_backward",
        "_scaled_dot_product_flash_attention_backward",
        "_scaled_dot_product_flash_attention_for_cpu_backward",
        "_scaled_dot_product_cudnn_attention_backward",
        # mixture-of-experts layers: one grouped matmul over the experts
        "_grouped_mm",
        "grouped_mm",
        "grouped_mm_fallback",
        "grouped_mm_fallback_backward",
        "einsum",
    }
)
CONV_OPS = frozenset({"convolution", "conv2d", "conv1d", "conv3d", "_convolution", "cudnn_convolution"})


def op_base_name(op: str) -> str:
    """'aten.convolution.default' -> 'convolution'; 'operator.getitem' / 'getitem' -> 'getitem'."""
    parts = op.split(".")
    if parts[0] in ("aten", "prims", "torch") and len(parts) > 1:
        return parts[1]
    if len(parts) == 3 and parts[0] != "fused":  # a custom op: 'namespace.name.overload'
        return parts[1]
    return parts[-1] if len(parts) > 1 and parts[0] != "aten" else parts[0]


def is_view_op(graph: Graph, node: Node) -> bool:
    """True when the op launches no kernel: a known view/metadata op, only aliasing outputs, or
    a concatenation its producers write in place."""
    if node.mutates:
        return False
    if is_concat_in_place(node):
        return True
    if op_base_name(node.op) in VIEW_OPS:
        return True
    if node.outputs and all(graph.values[o].is_alias for o in node.outputs if o in graph.values):
        return node.flops == 0
    return False
