"""IOS's operator merge: convolutions that read one tensor, run as one convolution.

Besides running groups of ops concurrently, IOS (Ding et al., MLSys 2021) can end a
stage by merging convolutions into one kernel: dense 2-D convolutions that read the
same tensor with the same stride, output size and activation become one convolution
whose output channels are theirs side by side, whose kernel is the largest of theirs
(smaller kernels zero-padded to it, centred) and whose padding is the largest. One
launch and one kernel replace several small ones, at the price of the padded kernels'
extra multiply-adds.

streamplan's runtime has no such kernel, so the merge is modelled only for IOS's own
executor (``IosOptions(executor="synchronized", merge=True)``): what IOS would measure.
This module says which ops may merge (``merge_key``) and costs a merged convolution
with the cost model (``merged_facts``), as one synthetic convolution node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from streamplan.cost.op_classes import CONV_OPS, op_base_name
from streamplan.cost.opcost import CostModel
from streamplan.cost.simulate import OpCosts, op_costs
from streamplan.ir.fused import fused_parts, is_fused, kernel_op
from streamplan.ir.graph import Graph, Node, Value

# Parts of a fused convolution that fold into it (IOS folds batch norm into the weights):
# they do not distinguish one convolution's epilogue from another's.
_FOLDED = frozenset({"batch_norm", "native_batch_norm", "_native_batch_norm_legit_no_training"})


@dataclass(frozen=True)
class ConvFacts:
    """What merging needs to know of a (possibly fused) 2-D convolution."""

    input: str  # the value it reads
    weight: str  # its weight value
    out_channels: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    output: tuple[int, ...]  # its output's shape
    dtype: str
    epilogue: tuple[str, ...]  # the pointwise ops after it in its kernel (batch norm folded)

    @property
    def key(self) -> tuple:
        """Convolutions with equal keys may merge: one input, stride, output size, epilogue."""
        return (self.input, self.stride, (self.output[0], *self.output[2:]), self.dtype, self.epilogue)


def conv_facts(graph: Graph, node: Node) -> ConvFacts | None:
    """The merge facts of ``node``, or None when it is not a dense 2-D convolution IOS could merge
    (grouped, dilated, transposed, string padding, or an op of another kind), or a kernel
    that does more than a convolution and its epilogue (a prologue, a second output)."""
    if op_base_name(kernel_op(node)) not in CONV_OPS:
        return None
    parts = fused_parts(node) if is_fused(node) else (node,)
    conv = parts[0]  # the convolution first: it reads the kernel's input (no prologue)
    if conv.op != kernel_op(node) or len(conv.inputs) < 2 or len(node.outputs) != 1:
        return None
    x, w = graph.values.get(conv.inputs[0]), graph.values.get(conv.inputs[1])
    out = graph.values.get(node.outputs[0])
    if x is None or w is None or out is None or len(w.shape) != 4 or len(x.shape) != 4 or len(out.shape) != 4:
        return None
    if x.shape[1] != w.shape[1]:
        return None  # grouped (or depthwise): IOS merges dense convolutions only
    args = conv.attrs.get("args")
    kwargs = conv.attrs.get("kwargs") or {}
    if not isinstance(args, list | tuple):
        return None
    base = op_base_name(conv.op)

    def arg(i: int, name: str, default: object) -> object:
        if name in kwargs:
            return kwargs[name]
        return args[i] if i < len(args) else default

    if base == "conv2d":
        stride, padding, dilation, groups, transposed = (
            arg(3, "stride", 1), arg(4, "padding", 0), arg(5, "dilation", 1), arg(6, "groups", 1), False
        )  # fmt: skip
    elif base in ("convolution", "_convolution"):
        stride, padding, dilation = arg(3, "stride", 1), arg(4, "padding", 0), arg(5, "dilation", 1)
        transposed, groups = arg(6, "transposed", False), arg(8, "groups", 1)
    else:
        return None
    pair_stride, pair_padding, pair_dilation = _pair(stride), _pair(padding), _pair(dilation)
    if (
        None in (pair_stride, pair_padding)
        or pair_dilation != (1, 1)
        or groups != 1
        or transposed is not False
    ):
        return None
    epilogue = tuple(op_base_name(p.op) for p in parts if p is not conv and op_base_name(p.op) not in _FOLDED)
    return ConvFacts(
        input=conv.inputs[0],
        weight=conv.inputs[1],
        out_channels=w.shape[0],
        kernel=(w.shape[2], w.shape[3]),
        stride=pair_stride,  # type: ignore[arg-type]
        padding=pair_padding,  # type: ignore[arg-type]
        output=out.shape,
        dtype=out.dtype,
        epilogue=epilogue,
    )


def _pair(v: object) -> tuple[int, int] | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return (v, v)
    if isinstance(v, list | tuple) and all(isinstance(s, int) and not isinstance(s, bool) for s in v):
        if len(v) == 1:
            return (v[0], v[0])
        if len(v) == 2:
            return (v[0], v[1])
    return None


def mergeable(graph: Graph) -> dict[int, tuple]:
    """Graph positions of the convolutions that have a merge partner, with their merge key."""
    keys: dict[int, tuple] = {}
    seen: dict[tuple, list[int]] = {}
    for p, node in enumerate(graph.nodes):
        f = conv_facts(graph, node)
        if f is not None:
            seen.setdefault(f.key, []).append(p)
    for key, positions in seen.items():
        if len(positions) > 1:
            keys.update((p, key) for p in positions)
    return keys


def merged_node(graph: Graph, positions: Sequence[int]) -> tuple[Graph, Node]:
    """One convolution standing for the merge of the convolutions at ``positions`` (equal keys),
    in a graph of its own: output channels summed, the largest kernel and padding, the
    multiply-adds and weight bytes of the padded kernels, the epilogues' work summed."""
    nodes = [graph.nodes[p] for p in positions]
    facts = [conv_facts(graph, n) for n in nodes]
    if any(f is None for f in facts) or len({f.key for f in facts}) != 1:  # type: ignore[union-attr]
        raise ValueError(f"ops {[n.id for n in nodes]} are not convolutions that can merge")
    fs: list[ConvFacts] = facts  # type: ignore[assignment]
    kh, kw = max(f.kernel[0] for f in fs), max(f.kernel[1] for f in fs)
    ph, pw = max(f.padding[0] for f in fs), max(f.padding[1] for f in fs)
    x = graph.values[fs[0].input]
    c_out = sum(f.out_channels for f in fs)
    flops = read = written = 0
    for node, f in zip(nodes, fs, strict=True):
        conv_flops = _conv_flops(node)
        grow = (kh * kw) / (f.kernel[0] * f.kernel[1])
        flops += node.flops - conv_flops + round(conv_flops * grow)
        w = graph.values[f.weight]
        read += node.bytes_read - x.nbytes - w.nbytes + round(w.nbytes * grow)
        written += node.bytes_written
    read += x.nbytes
    itemsize = max(1, graph.values[nodes[0].outputs[0]].nbytes // max(1, _numel(fs[0].output)))
    out_shape = (fs[0].output[0], c_out, *fs[0].output[2:])
    w_shape = (c_out, x.shape[1], kh, kw)
    values = {
        x.id: x,
        "merged_weight": Value("merged_weight", w_shape, fs[0].dtype, _numel(w_shape) * itemsize, "param"),
        "merged_output": Value("merged_output", out_shape, fs[0].dtype, _numel(out_shape) * itemsize),
    }
    node = Node(
        "+".join(n.id for n in nodes),
        "aten.conv2d.default",
        (x.id, "merged_weight"),
        ("merged_output",),
        {"args": [{"$v": x.id}, {"$v": "merged_weight"}, None, list(fs[0].stride), [ph, pw]], "kwargs": {}},
        flops=flops,
        bytes_read=read,
        bytes_written=written,
    )
    mini = Graph(
        "merged", (node,), values, inputs=(x.id,), params=("merged_weight",), outputs=("merged_output",)
    )
    return mini, node


def merged_facts(graph: Graph, positions: Sequence[int], model: CostModel) -> OpCosts:
    """The cost facts of the merged convolution of ``positions``: one op's ``OpCosts``."""
    mini, node = merged_node(graph, positions)
    return op_costs(mini, (node.id,), model)


def _conv_flops(node: Node) -> int:
    """The convolution's own multiply-adds (2 FLOPs each) inside a possibly fused kernel."""
    if not is_fused(node):
        return node.flops
    anchor = kernel_op(node)
    return next((p.flops for p in fused_parts(node) if p.op == anchor), node.flops)


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
