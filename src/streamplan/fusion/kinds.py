"""What kind of kernel an op is, for fusion: a view, pointwise code, a reduction, a GEMM, or opaque.

The classes follow how Inductor lowers ATen ops (``docs/fusion.md``):

- ``view``: no kernel (a new tensor header over existing storage);
- ``pointwise``: one output element from a few input elements (elementwise math, casts,
  inference batch-norm and dropout, pooling windows, padding, gathers);
- ``reduction``: reduces along some dimensions (sum, mean, softmax, layer norm, global
  pooling); its pointwise prologue and epilogue can run inside it;
- ``gemm``: a convolution or matrix multiply, run by a library kernel or a template;
- ``concat``: a concatenation (its inputs may be written in place by their producers);
- ``opaque``: anything else, and every op that writes its input in place: never fused.
"""

from __future__ import annotations

from typing import Literal

from streamplan.cost.op_classes import CONV_OPS, GEMM_OPS, is_view_op, op_base_name
from streamplan.ir.dtypes import numel
from streamplan.ir.graph import Graph, Node

OpClass = Literal["view", "pointwise", "reduction", "gemm", "concat", "opaque"]

POINTWISE_OPS = frozenset(
    {
        # elementwise math
        "abs", "acos", "acosh", "add", "addcdiv", "addcmul", "asin", "asinh", "atan", "atan2",
        "atanh", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "ceil", "clamp",
        "clamp_max", "clamp_min", "copysign", "cos", "cosh", "div", "elu", "eq", "erf", "erfc",
        "exp", "exp2", "expm1", "floor", "floor_divide", "fmod", "frac", "ge", "gelu", "gt",
        "hardsigmoid", "hardswish", "hardtanh", "isinf", "isnan", "le", "leaky_relu", "lerp",
        "log", "log10", "log1p", "log2", "logical_and", "logical_not", "logical_or",
        "logical_xor", "lt", "masked_fill", "maximum", "minimum", "mish", "mul", "nan_to_num",
        "ne", "neg", "pow", "prelu", "reciprocal", "relu", "relu6", "remainder", "round",
        "rsqrt", "rsub", "selu", "sigmoid", "sign", "silu", "sin", "sinh", "softplus", "sqrt",
        "square", "sub", "tan", "tanh", "threshold", "trunc", "where", "xlogy",
        "__and__", "__or__", "__xor__", "__invert__",
        # copies and casts, constants
        "clone", "contiguous", "copy", "_to_copy", "to", "type_as", "fill", "zeros_like",
        "ones_like", "full_like", "arange", "zeros", "ones", "full", "new_ones", "new_zeros",
        "new_full", "scalar_tensor", "lift_fresh_copy",
        # windows, padding, resampling and gathers (Inductor lowers them to pointwise loads)
        "avg_pool1d", "avg_pool2d", "avg_pool3d", "max_pool1d", "max_pool2d", "max_pool3d",
        "max_pool2d_with_indices", "max_pool3d_with_indices", "pad", "constant_pad_nd",
        "reflection_pad1d", "reflection_pad2d", "replication_pad2d", "upsample_nearest2d",
        "upsample_bilinear2d", "embedding", "index", "index_select", "gather",
        # inference normalisation: a per-channel affine map
        "_native_batch_norm_legit_no_training",
    }
)  # fmt: skip
REDUCTION_OPS = frozenset(
    {
        "sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "var_mean",
        "std_mean", "logsumexp", "norm", "linalg_vector_norm", "argmax", "argmin", "any", "all",
        "softmax", "_softmax", "log_softmax", "_log_softmax", "layer_norm", "native_layer_norm",
        "group_norm", "native_group_norm", "instance_norm", "rms_norm", "adaptive_avg_pool1d",
        "adaptive_avg_pool2d", "_adaptive_avg_pool2d", "adaptive_avg_pool3d",
    }
)  # fmt: skip
# Pointwise ops whose output element reads other positions of an input (a window, padding, an
# index): they can take a producer into their kernel only by recomputing it, never by reading a
# buffer the same kernel writes (its other elements belong to other threads)
WINDOW_OPS = frozenset(
    {
        "avg_pool1d", "avg_pool2d", "avg_pool3d", "max_pool1d", "max_pool2d", "max_pool3d",
        "max_pool2d_with_indices", "max_pool3d_with_indices", "pad", "constant_pad_nd",
        "reflection_pad1d", "reflection_pad2d", "replication_pad2d", "upsample_nearest2d",
        "upsample_bilinear2d", "embedding", "index", "index_select", "gather",
    }
)  # fmt: skip
CONCAT_OPS = frozenset({"cat", "concat", "concatenate"})
BATCH_NORM_OPS = frozenset({"batch_norm", "native_batch_norm", "_native_batch_norm_legit"})


def op_class(graph: Graph, node: Node) -> OpClass:
    """The kernel class of ``node`` (see the module docstring)."""
    if node.mutates:
        return "opaque"  # in-place writes keep their own kernel and their order
    base = op_base_name(node.op)
    if is_view_op(graph, node):
        return "view"
    if base in GEMM_OPS:
        return "gemm"
    if base in CONCAT_OPS:
        return "concat"
    if base in BATCH_NORM_OPS:
        return "reduction" if _training(node) else "pointwise"
    if base == "dropout":
        return "opaque" if _training(node) else "pointwise"  # random masks stay their own kernel
    if base in POINTWISE_OPS:
        return "pointwise"
    if base in REDUCTION_OPS:
        return "reduction"
    return "opaque"


def reads_neighbours(node: Node) -> bool:
    """True for a window, padding or gather op (see ``WINDOW_OPS``)."""
    return op_base_name(node.op) in WINDOW_OPS


def foldable_batch_norm(graph: Graph, node: Node) -> bool:
    """An inference batch-norm whose statistics and affine weights are parameters or buffers."""
    if op_base_name(node.op) not in BATCH_NORM_OPS or _training(node) or len(node.inputs) < 2:
        return False
    return all(graph.values[v].kind in ("param", "buffer", "constant") for v in node.inputs[1:])


def foldable_convolution(node: Node) -> bool:
    """A convolution whose output channels are its weight's first dimension (not transposed)."""
    if op_base_name(node.op) not in CONV_OPS:
        return False
    args = node.attrs.get("args", ())
    transposed = (
        args[6] if op_base_name(node.op) in ("convolution", "_convolution") and len(args) > 6 else False
    )
    return transposed is False and len(node.inputs) >= 2


def out_numel(graph: Graph, node: Node) -> int:
    """Elements of the op's largest output (its iteration space when pointwise)."""
    return max((numel(graph.values[o].shape) for o in node.outputs if o in graph.values), default=1)


def in_numel(graph: Graph, node: Node) -> int:
    """Elements of the op's first activation input (what a reduction iterates over)."""
    for v in node.inputs:
        value = graph.values.get(v)
        if value is not None and value.kind in ("activation", "input"):
            return numel(value.shape)
    return out_numel(graph, node)


def _training(node: Node) -> bool:
    """The ``training``/``train`` flag of a batch-norm or dropout call (False when absent)."""
    base = op_base_name(node.op)
    args = node.attrs.get("args", ())
    kwargs = node.attrs.get("kwargs", {})
    if base == "dropout":
        flag = kwargs.get("train", args[2] if len(args) > 2 else False)
    elif base == "_native_batch_norm_legit":
        flag = kwargs.get("training", args[5] if len(args) > 5 else True)
    else:  # batch_norm / native_batch_norm(input, weight, bias, mean, var, training, ...)
        flag = kwargs.get("training", args[5] if len(args) > 5 else False)
    return bool(flag)
