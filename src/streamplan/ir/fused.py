"""Fused kernels as ordinary IR nodes: how a node that runs several ops as one kernel is written.

A fused node's ``op`` starts with ``fused.`` and its attributes say what it runs:

- ``attrs["parts"]``: the original nodes, in the order they run, each in the JSON form
  of a node (id, op, inputs, outputs, call arguments, FLOPs, bytes), so that the
  runtime can call them again;
- ``attrs["kind"]``: ``"pointwise"``, ``"reduction"`` or ``"gemm"`` (what decides the
  kernel's cost: a GEMM/convolution with its epilogue, a reduction with its prologue
  and epilogue, or pointwise code);
- ``attrs["anchor"]``: the op that decides the cost class (the GEMM or the reduction;
  the first part for pointwise kernels), see ``kernel_op``;
- ``attrs["fold"]`` (optional): ``{"conv": part id, "batch_norm": part id}`` when an
  inference batch-norm is folded into the convolution's weights.

The node's inputs are the values its parts read from outside, its outputs the values
read after it (or returned by the graph); the values passed between parts inside the
kernel are not values of the graph at all, so no memory figure counts them. Its FLOPs
are the parts' (a folded batch-norm's are gone: folding happens once, before any run),
its bytes moved are its external inputs and outputs only.

A concatenation whose every input is written by a kernel straight into its slice of
the output (as Inductor's ``ConcatKernel`` does) keeps its op and carries
``attrs["concat_in_place"] = True``: it launches nothing of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from streamplan.ir.graph import Node

FUSED_OP_PREFIX = "fused."
KERNEL_KINDS = ("pointwise", "reduction", "gemm")
CONCAT_IN_PLACE = "concat_in_place"


def is_fused(node: Node) -> bool:
    """True when ``node`` is a fused kernel (its parts are in ``attrs["parts"]``)."""
    return node.op.startswith(FUSED_OP_PREFIX)


def is_concat_in_place(node: Node) -> bool:
    """True for a concatenation its producers write in place (no kernel of its own)."""
    return bool(node.attrs.get(CONCAT_IN_PLACE, False))


def kernel_op(node: Node) -> str:
    """The op that decides the kernel's cost class: the anchor of a fused node, else its own op."""
    if is_fused(node):
        return str(node.attrs.get("anchor", node.op))
    return node.op


def fused_parts(node: Node) -> tuple[Node, ...]:
    """The original nodes a fused node runs, in order (empty for an ordinary node)."""
    if not is_fused(node):
        return ()
    return tuple(part_from_dict(p) for p in node.attrs.get("parts", ()))


def folded_pair(node: Node) -> tuple[str, str] | None:
    """(convolution part id, batch-norm part id) when the node folds a batch-norm, else None."""
    fold = node.attrs.get("fold")
    if not isinstance(fold, Mapping):
        return None
    return str(fold["conv"]), str(fold["batch_norm"])


def part_to_dict(part: Node) -> dict[str, Any]:
    """A part in the JSON form of a node (what ``attrs["parts"]`` holds)."""
    return {
        "id": part.id,
        "op": part.op,
        "inputs": list(part.inputs),
        "outputs": list(part.outputs),
        "attrs": _thaw(part.attrs),
        "flops": part.flops,
        "bytes_read": part.bytes_read,
        "bytes_written": part.bytes_written,
    }


def part_from_dict(data: Mapping[str, Any]) -> Node:
    return Node(
        id=str(data["id"]),
        op=str(data["op"]),
        inputs=tuple(data["inputs"]),
        outputs=tuple(data["outputs"]),
        attrs=dict(data.get("attrs", {})),
        flops=int(data.get("flops", 0)),
        bytes_read=int(data.get("bytes_read", 0)),
        bytes_written=int(data.get("bytes_written", 0)),
    )


def make_fused_node(
    node_id: str,
    op: str,
    parts: Sequence[Node],
    inputs: Sequence[str],
    outputs: Sequence[str],
    *,
    kind: str,
    anchor: str,
    flops: int,
    bytes_read: int,
    bytes_written: int,
    fold: tuple[str, str] | None = None,
) -> Node:
    """A fused node running ``parts`` in order (see the module docstring for the fields)."""
    attrs: dict[str, Any] = {
        "kind": kind,
        "anchor": anchor,
        "parts": [part_to_dict(p) for p in parts],
    }
    if fold is not None:
        attrs["fold"] = {"conv": fold[0], "batch_norm": fold[1]}
    return Node(
        node_id,
        op if op.startswith(FUSED_OP_PREFIX) else FUSED_OP_PREFIX + op,
        tuple(inputs),
        tuple(outputs),
        attrs,
        flops=flops,
        bytes_read=bytes_read,
        bytes_written=bytes_written,
    )


def fused_problems(node: Node) -> list[str]:
    """What is wrong with a fused node's parts (empty when it is sound).

    Sound: at least one part; part ids unique; no part is itself fused or writes in
    place; each part reads only the node's inputs or values earlier parts wrote; every
    output of the node is written by a part and every input read by one; a fold names
    a convolution part whose output only the batch-norm part reads.
    """
    try:
        parts = fused_parts(node)
    except (KeyError, TypeError, ValueError) as e:
        return [f"fused node {node.id!r} has malformed parts ({type(e).__name__}: {e})"]
    if not parts:
        return [f"fused node {node.id!r} has no parts"]
    if node.attrs.get("kind") not in KERNEL_KINDS:
        return [f"fused node {node.id!r} has kind {node.attrs.get('kind')!r}, not one of {KERNEL_KINDS}"]
    problems: list[str] = []
    available = set(node.inputs)
    written: set[str] = set()
    read: set[str] = set()
    seen: set[str] = set()
    for p in parts:
        if p.id in seen:
            problems.append(f"fused node {node.id!r} has two parts with id {p.id!r}")
        seen.add(p.id)
        if is_fused(p):
            problems.append(f"part {p.id!r} of {node.id!r} is itself fused")
        for vid in p.inputs:
            if vid not in available:
                problems.append(
                    f"part {p.id!r} of {node.id!r} reads {vid!r}, which is neither an input "
                    "of the fused node nor written by an earlier part"
                )
            read.add(vid)
        for vid in p.outputs:
            if vid in written:
                problems.append(f"value {vid!r} is written twice inside {node.id!r}")
            written.add(vid)
            available.add(vid)
    problems += [
        f"output {v!r} of {node.id!r} is written by none of its parts"
        for v in node.outputs
        if v not in written
    ]
    problems += [
        f"input {v!r} of {node.id!r} is read by none of its parts" for v in node.inputs if v not in read
    ]
    fold = folded_pair(node) if "fold" in node.attrs else None
    if "fold" in node.attrs:
        by_id = {p.id: p for p in parts}
        if fold is None or fold[0] not in by_id or fold[1] not in by_id:
            problems.append(f"the fold of {node.id!r} names parts it does not have")
        else:
            conv_out = by_id[fold[0]].outputs
            readers = {p.id for p in parts if set(p.inputs) & set(conv_out)}
            if readers != {fold[1]} or set(conv_out) & set(node.outputs):
                problems.append(
                    f"{node.id!r} folds {fold[1]!r} into {fold[0]!r}, but the convolution's output "
                    "is read by more than the batch-norm"
                )
    return problems


def _thaw(x: Any) -> Any:
    """Plain dicts and lists again (the IR freezes attributes; parts are stored as JSON)."""
    if isinstance(x, Mapping):
        return {str(k): _thaw(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_thaw(v) for v in x]
    return x
