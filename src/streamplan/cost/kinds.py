"""What kind of work an op is, as the calibrated cost model sees it.

A calibrated profile (``streamplan calibrate``) measures each *kind* of op at
several sizes. ``op_features`` names the kind of a node and the sizes its time
depends on:

- GEMM-like kinds are timed against their implicit GEMM (M x N x K, FLOPs =
  2·M·N·K): ``gemm`` (mm, addmm, linear, matmul, bmm), ``conv`` (a dense
  convolution with a k x k kernel: M = batch x output pixels, N = output channels,
  K = input channels x kernel area) and ``conv1x1`` (a dense 1 x 1 convolution,
  which libraries run as a plain GEMM and which runs at a different rate than a
  k x k one of the same shape); a ``conv`` op also says whether it is one cuDNN
  can run with a Winograd algorithm (``OpFeatures.winograd``: a dense 2-D 3 x 3
  convolution at stride 1, dilation 1, not transposed), which does fewer
  multiplications than its direct FLOP count; the GPU profiles' ``conv`` curve
  divides such an op's time by its ``winograd_speedup`` (1 on measured curves);
- every other kind is timed against one number, its *work*: FLOPs for
  ``conv_grouped`` (grouped and depthwise convolutions; a depthwise one whose channels
  are not a multiple of 16, ``conv_grouped_unaligned``, is a kind of its own: the CPU's
  library computes 16 channels at once, and on a 2-core AVX-512 machine a 3 x 3
  depthwise convolution at 56 x 56 took 0.9-1.1 ns per output at 152, 154 or 168
  channels against 0.36-0.55 at 128, 144, 160 or 176), pooling windows and
  attention, bytes moved for everything else (pointwise ops, norms, softmax,
  reductions, copies);
- each kind belongs to a *family* (``FAMILIES``) whose pooled measurements cost an
  op whose own kind the calibration did not measure (``gelu`` from the pointwise
  family when only ``relu`` and ``sigmoid`` were timed);
- an attention op also carries its two GEMMs and its score matrix
  (``OpFeatures.attention``): a calibrated profile costs it as those GEMMs on the
  ``gemm`` surface plus a softmax over the scores, not by its FLOPs alone (with 8-wide
  heads and 1,024 tokens, a diffusion UNet's attention, the scores' exponentials cost more
  than the multiplications: the FLOPs curve put it at a third of its time on the CPU).

The kind of an ordinary op is its ATen base name (``max_pool2d``, ``relu``) except
for the GEMM and convolution kinds above and for pooling at stride 1
(``max_pool2d_stride1``): a window that moves by one element reads mostly what the
previous window read, so it costs less per window than one at a larger stride with the
same FLOPs (GoogLeNet's stride-1 max pools run about 25% cheaper per window on the CPU
than stride-2 ones); a fused kernel takes its anchor's kind when
the anchor is a GEMM or convolution, otherwise its family (``pointwise``,
``reduction``) with its own external bytes as work.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamplan.ir.dtypes import itemsize, numel
from streamplan.ir.fused import fused_parts, is_fused, kernel_op
from streamplan.ir.graph import Graph, Node

GEMM_KINDS = ("gemm", "conv", "conv1x1")
FAMILIES = ("gemm", "conv", "conv1x1", "conv_grouped", "attention", "pool", "norm", "softmax",
            "reduction", "copy", "pointwise")  # fmt: skip

_MATMUL = frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "einsum"})
_CONV = frozenset({"convolution", "conv2d", "conv1d", "conv3d", "_convolution", "cudnn_convolution"})
_ATTENTION = frozenset(
    {
        "scaled_dot_product_attention",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_attention_math",
    }
)
_POOL = frozenset({"max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices", "avg_pool1d",
                   "avg_pool2d", "avg_pool3d"})  # fmt: skip
_NORM = frozenset({"batch_norm", "native_batch_norm", "_native_batch_norm_legit_no_training", "layer_norm",
                   "native_layer_norm", "group_norm", "native_group_norm", "instance_norm", "rms_norm"})  # fmt: skip
_SOFTMAX = frozenset({"softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax"})
_REDUCTION = frozenset({"sum", "mean", "amax", "amin", "max", "min", "prod", "argmax", "argmin", "var",
                        "std", "var_mean", "logsumexp", "norm", "linalg_vector_norm", "adaptive_avg_pool1d",
                        "adaptive_avg_pool2d", "adaptive_max_pool2d", "cumsum"})  # fmt: skip
_COPY = frozenset({"cat", "stack", "clone", "copy", "copy_", "_to_copy", "to", "contiguous", "embedding",
                   "index", "index_select", "gather", "scatter", "constant_pad_nd", "pad", "repeat",
                   "permute_copy", "roll", "flip", "masked_fill"})  # fmt: skip


@dataclass(frozen=True, slots=True)
class OpFeatures:
    """The kind of an op, its family, and the sizes its calibrated time depends on."""

    kind: str
    family: str
    flops: int
    bytes_moved: int
    gemm_mnk: tuple[int, int, int] | None = None  # (M, N, K) of GEMM-like kinds
    winograd: bool = False  # a 3 x 3 stride-1 dense convolution (``winograd_eligible``)
    attention: AttentionShape | None = None  # an attention op's GEMMs and scores, when its shapes are known


@dataclass(frozen=True)
class AttentionShape:
    """Attention as its parts: ``Q Kᵀ`` and ``P V`` (implicit GEMMs, every head's rows stacked in
    M) and the softmax between them, which reads and writes the score matrix once."""

    qk_mnk: tuple[int, int, int]
    pv_mnk: tuple[int, int, int]
    score_bytes: int

    def gemm_flops(self) -> tuple[int, int]:
        """The FLOPs of ``Q Kᵀ`` and of ``P V`` (2·M·N·K each)."""
        (m1, n1, k1), (m2, n2, k2) = self.qk_mnk, self.pv_mnk
        return 2 * m1 * n1 * k1, 2 * m2 * n2 * k2

    @property
    def work(self) -> float:
        """The one size a non-GEMM kind's time is measured against (FLOPs or bytes moved)."""
        return float(self.flops if work_unit(self.family) == "flops" else self.bytes_moved)


def work_unit(family: str) -> str:
    """``"flops"`` or ``"bytes"``: what a family's time curve is measured against."""
    return "flops" if family in ("gemm", "conv", "conv1x1", "conv_grouped", "attention", "pool") else "bytes"


def base_name(op: str) -> str:
    """'aten.convolution.default' -> 'convolution'; 'operator.getitem' -> 'getitem'."""
    parts = op.split(".")
    if parts[0] in ("aten", "prims", "torch") and len(parts) > 1:
        return parts[1]
    return parts[-1] if len(parts) > 1 else parts[0]


def family_of(base: str) -> str:
    """The family of an ATen base name (GEMM-like ops: ``gemm``; convolutions: ``conv``)."""
    if base in _MATMUL:
        return "gemm"
    if base in _CONV:
        return "conv"
    if base in _ATTENTION:
        return "attention"
    if base in _POOL:
        return "pool"
    if base in _NORM:
        return "norm"
    if base in _SOFTMAX:
        return "softmax"
    if base in _REDUCTION:
        return "reduction"
    if base in _COPY:
        return "copy"
    return "pointwise"


def op_features(graph: Graph, node: Node) -> OpFeatures:
    """The kind, family and sizes of ``node`` (a fused kernel: its anchor's, see the module doc)."""
    nbytes = int(node.bytes_read + node.bytes_written)
    anchor = kernel_op(node)
    base = base_name(anchor)
    family = family_of(base)
    if is_fused(node) and family not in ("gemm", "conv", "attention"):
        kind = "reduction" if node.attrs.get("kind") == "reduction" else "pointwise"
        return OpFeatures(kind, kind, int(node.flops), nbytes)
    if family == "gemm":
        return OpFeatures("gemm", "gemm", int(node.flops), nbytes, _gemm_mnk(graph, node))
    if family == "conv":
        conv = _anchor_node(node)
        groups, kernel_area = _conv_shape(graph, conv)
        if groups > 1:
            kind = "conv_grouped" if groups % CHANNEL_BLOCK == 0 or not _depthwise(graph, conv) else UNALIGNED
            return OpFeatures(kind, "conv_grouped", int(node.flops), nbytes)
        kind = "conv1x1" if kernel_area == 1 else "conv"
        mnk = _conv_mnk(graph, conv, node, int(node.flops))
        winograd = kind == "conv" and winograd_eligible(graph, conv)
        return OpFeatures(kind, kind, int(node.flops), nbytes, mnk, winograd)
    if family == "pool" and _stride_one(_anchor_node(node)):
        return OpFeatures(f"{base}{STRIDE_ONE}", family, int(node.flops), nbytes)
    if family == "attention":
        return OpFeatures(
            "attention", family, int(node.flops), nbytes, attention=_attention_shape(graph, node)
        )
    return OpFeatures(base, family, int(node.flops), nbytes)


def _attention_shape(graph: Graph, node: Node) -> AttentionShape | None:
    """Q Kᵀ, P V and the scores of a scaled-dot-product attention from its q, k, v shapes."""
    op = _anchor_node(node)
    if len(op.inputs) < 3:
        return None
    shapes = [_shape(graph, v) for v in op.inputs[:3]]
    if any(sh is None or len(sh) < 2 for sh in shapes):
        return None
    q, k, v = shapes
    heads = numel(q[:-2])
    s_q, d_qk, s_k, d_v = q[-2], q[-1], k[-2], v[-1]
    if min(heads, s_q, d_qk, s_k, d_v) <= 0:
        return None
    scores = heads * s_q * s_k
    return AttentionShape(
        (heads * s_q, s_k, d_qk),
        (heads * s_q, d_v, s_k),
        2 * scores * itemsize(graph.values[op.inputs[0]].dtype),
    )


STRIDE_ONE = "_stride1"  # the suffix of a pooling kind whose windows move by one element
CHANNEL_BLOCK = 16  # channels per vector block of oneDNN's depthwise kernels on AVX-512 (16 floats)
UNALIGNED = "conv_grouped_unaligned"  # a depthwise convolution whose channels are not whole blocks


# Where each convolution overload keeps its stride, dilation and transposed flag among its
# positional arguments (index or None), and their keyword names.
_CONV_ARGS = {
    "conv1d": (3, 5, None),
    "conv2d": (3, 5, None),
    "conv3d": (3, 5, None),
    "convolution": (3, 5, 6),
    "_convolution": (3, 5, 6),
    "cudnn_convolution": (3, 4, None),  # (self, weight, padding, stride, dilation, groups, ...)
}


def winograd_eligible(graph: Graph, conv: Node) -> bool:
    """True when cuDNN could run a (dense) convolution with a Winograd algorithm: a 2-D 3 x 3
    kernel at stride 1 and dilation 1, not transposed (cuDNN's ``WINOGRAD`` forward algorithm
    requires a 3 x 3 filter; a 1 x 3 or 3 x 1, a 5 x 5, 1-D or 3-D kernel is left to implicit
    GEMM here). Stride and dilation are read from the op's arguments; where the op carries
    none, the stride is taken as 1 when no output side is shorter than a valid convolution's
    (input minus 2)."""
    w = _shape(graph, conv.inputs[1]) if len(conv.inputs) > 1 else None
    if not w or len(w) != 4 or tuple(w[2:]) != (3, 3):
        return False
    base = base_name(conv.op)
    positions = _CONV_ARGS.get(base)
    args = conv.attrs.get("args")
    kwargs = conv.attrs.get("kwargs") or {}
    if positions is not None and isinstance(args, list | tuple):
        stride_at, dilation_at, transposed_at = positions

        def arg(i: int | None, name: str, default: object) -> object:
            if name in kwargs:
                return kwargs[name]
            return args[i] if i is not None and i < len(args) else default

        stride, dilation = arg(stride_at, "stride", 1), arg(dilation_at, "dilation", 1)
        if transposed_at is not None and arg(transposed_at, "transposed", False) is True:
            return False
        return _all_ones(stride) and _all_ones(dilation)
    x = _shape(graph, conv.inputs[0]) if conv.inputs else None
    out = _shape(graph, conv.outputs[0]) if conv.outputs else None
    if not x or not out or len(x) != 4 or len(out) != 4:
        return False
    return all(o >= i - 2 for o, i in zip(out[2:], x[2:], strict=True))


def _all_ones(v: object) -> bool:
    """True for 1 or a non-empty list of 1s (a conv's stride or dilation); False for anything else."""
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return v == 1
    return isinstance(v, list | tuple) and bool(v) and all(isinstance(s, int) and s == 1 for s in v)


def _depthwise(graph: Graph, conv: Node) -> bool:
    """True when every group of a grouped convolution has one input channel."""
    w = _shape(graph, conv.inputs[1]) if len(conv.inputs) > 1 else None
    return bool(w) and len(w) >= 2 and w[1] == 1


def _stride_one(pool: Node) -> bool:
    """True when a pooling op's stride is 1 in every dimension (an empty stride means the
    kernel size, PyTorch's default)."""
    args = pool.attrs.get("args")
    if not isinstance(args, list) or len(args) < 3:
        return False
    stride = args[2]
    if isinstance(stride, int):
        return stride == 1
    return isinstance(stride, list) and bool(stride) and all(s == 1 for s in stride)


def _anchor_node(node: Node) -> Node:
    """The convolution inside a fused kernel (its anchor), or the node itself."""
    if not is_fused(node):
        return node
    anchor = kernel_op(node)
    return next((p for p in fused_parts(node) if p.op == anchor), node)


def _shape(graph: Graph, value_id: str) -> tuple[int, ...] | None:
    v = graph.values.get(value_id)
    return None if v is None else v.shape


def _conv_shape(graph: Graph, conv: Node) -> tuple[int, int]:
    """(groups, kernel area) of a convolution from its input and weight shapes."""
    x = _shape(graph, conv.inputs[0]) if conv.inputs else None
    w = _shape(graph, conv.inputs[1]) if len(conv.inputs) > 1 else None

    if not x or not w or len(w) < 3 or len(x) < 2:
        return 1, 9
    groups = max(1, x[1] // max(1, w[1]))
    area = numel(w[2:])
    return groups, area


def _conv_mnk(graph: Graph, conv: Node, kernel: Node, flops: int) -> tuple[int, int, int]:
    """The implicit GEMM of a convolution; inside a fused kernel its output may be internal, and
    the kernel's own output (its pointwise epilogue keeps the shape) stands in for it."""
    out = _shape(graph, conv.outputs[0]) if conv.outputs else None
    if out is None and kernel.outputs:
        out = _shape(graph, kernel.outputs[0])
    if not out or len(out) < 2:
        return 1, 1, max(1, flops // 2)
    n = out[1]
    m = max(1, numel(out) // max(1, n))
    return m, n, max(1, flops // max(1, 2 * m * n))


def _gemm_mnk(graph: Graph, node: Node) -> tuple[int, int, int]:
    out = _shape(graph, node.outputs[0]) if node.outputs else None
    if not out:
        return 1, 1, max(1, int(node.flops) // 2)
    n = out[-1]
    m = max(1, numel(out) // max(1, n))
    return m, n, max(1, int(node.flops) // max(1, 2 * m * n))
