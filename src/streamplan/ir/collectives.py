"""Collectives as ordinary IR nodes: all-gather, reduce-scatter and all-reduce.

A collective node's ``op`` is ``comm.all_gather``, ``comm.reduce_scatter`` or
``comm.all_reduce``; its attributes say who takes part:

- ``attrs["group"]``: the name of the process group (``dp`` for data parallelism,
  ``tp`` for tensor parallelism...): collectives of one group run in one order on
  every rank;
- ``attrs["group_size"]``: how many ranks it spans;
- ``attrs["reduce"]``: ``sum`` or ``avg`` for the reducing kinds.

Shapes follow the ranks' view of one flat tensor: an all-gather reads this rank's
shard (``n`` elements) and writes the gathered tensor (``n * group_size``); a
reduce-scatter reads the full tensor and writes this rank's reduced shard; an
all-reduce reduces a tensor in place (its output aliases the input's storage and the
node lists the input in ``mutates``, as ``torch.distributed.all_reduce`` does).

Which stream a collective runs on is the schedule's business (communication streams
are streams like any other); what it costs is the link model's (``cost.links``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from streamplan.ir.graph import Graph, Node

CollectiveKind = Literal["all_gather", "reduce_scatter", "all_reduce"]
COLLECTIVE_KINDS: tuple[str, ...] = ("all_gather", "reduce_scatter", "all_reduce")
COLLECTIVE_OP_PREFIX = "comm."
REDUCE_OPS: tuple[str, ...] = ("sum", "avg")


@dataclass(frozen=True, slots=True)
class Collective:
    """What a collective node does: its kind, its group, and how many bytes the whole
    (unsharded) tensor has (``full_bytes``: the all-gather's output, the reduce-scatter's
    input, the all-reduce's tensor)."""

    kind: str
    group: str
    group_size: int
    full_bytes: int
    reduce: str = "sum"

    @property
    def shard_bytes(self) -> int:
        """What one rank contributes (all-gather) or keeps (reduce-scatter)."""
        return self.full_bytes // max(1, self.group_size)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "group": self.group,
            "group_size": self.group_size,
            "full_bytes": self.full_bytes,
            "reduce": self.reduce,
        }


def is_collective(node: Node) -> bool:
    """True when ``node`` is a collective (its op starts with ``comm.``)."""
    return node.op.startswith(COLLECTIVE_OP_PREFIX)


def collective_kind(node: Node) -> str:
    """``all_gather``, ``reduce_scatter`` or ``all_reduce`` (from the op name)."""
    return node.op[len(COLLECTIVE_OP_PREFIX) :]


def collective_of(graph: Graph, node: Node) -> Collective | None:
    """The collective ``node`` runs, or None for any other op."""
    if not is_collective(node):
        return None
    kind = collective_kind(node)
    size = int(node.attrs.get("group_size", 1))
    if kind == "all_gather":
        full = graph.values[node.outputs[0]].nbytes if node.outputs else 0
    else:
        full = graph.values[node.inputs[0]].nbytes if node.inputs else 0
    return Collective(
        kind, str(node.attrs.get("group", "")), size, full, str(node.attrs.get("reduce", "sum"))
    )


def collective_node(
    node_id: str,
    kind: str,
    source: str,
    output: str,
    *,
    group: str,
    group_size: int,
    source_bytes: int,
    output_bytes: int,
    reduce: str = "avg",
    **attrs: Any,
) -> Node:
    """A collective node reading ``source`` and writing ``output`` (for ``all_reduce`` the
    output must alias the source: the node writes it in place)."""
    mutates = (source,) if kind == "all_reduce" else ()
    extra = {"reduce": reduce} if kind != "all_gather" else {}
    return Node(
        node_id,
        COLLECTIVE_OP_PREFIX + kind,
        (source,),
        (output,),
        {"group": group, "group_size": group_size, **extra, **attrs},
        bytes_read=source_bytes,
        bytes_written=output_bytes,
        mutates=mutates,
    )


def collective_problems(graph: Graph, node: Node) -> list[str]:
    """What is wrong with collective ``node`` (empty when it is sound): a known kind, one
    input and one output, a group of at least one rank, sizes that agree with the kind."""
    kind = collective_kind(node)
    if kind not in COLLECTIVE_KINDS:
        return [f"{node.id} runs unknown collective {node.op!r} (known: {', '.join(COLLECTIVE_KINDS)})"]
    if len(node.inputs) != 1 or len(node.outputs) != 1:
        return [
            f"collective {node.id} must read one value and write one, not {node.inputs} -> {node.outputs}"
        ]
    size = node.attrs.get("group_size")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        return [f"collective {node.id} has group_size {size!r}; it is an int >= 1"]
    if not str(node.attrs.get("group", "")):
        return [f"collective {node.id} names no process group (attrs['group'])"]
    if kind != "all_gather" and node.attrs.get("reduce", "sum") not in REDUCE_OPS:
        return [
            f"collective {node.id} reduces with {node.attrs.get('reduce')!r}; use {', '.join(REDUCE_OPS)}"
        ]
    src, out = graph.values.get(node.inputs[0]), graph.values.get(node.outputs[0])
    if src is None or out is None:
        return []  # reported by the value checks
    if kind == "all_gather" and out.nbytes != src.nbytes * size:
        return [f"all-gather {node.id} writes {out.nbytes} B from a {src.nbytes} B shard over {size} ranks"]
    if kind == "reduce_scatter" and src.nbytes != out.nbytes * size:
        return [f"reduce-scatter {node.id} writes a {out.nbytes} B shard of {src.nbytes} B over {size} ranks"]
    if kind == "all_reduce" and (node.mutates != node.inputs or out.storage != src.storage):
        return [f"all-reduce {node.id} must write its input in place (mutates it; output aliases it)"]
    return []


def collectives(graph: Graph) -> tuple[Node, ...]:
    """Every collective node of ``graph``, in graph order."""
    return tuple(n for n in graph.nodes if is_collective(n))
