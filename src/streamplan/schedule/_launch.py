"""Helpers shared by the multi-stream policies: launch orders and stream numbering."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from streamplan.ir.analysis import levels
from streamplan.ir.graph import Graph


def level_launch_order(graph: Graph) -> tuple[str, ...]:
    """A topological order by dependency level, then graph order.

    Ops of one level are independent, so the host issues the heads of every stream
    before the tails of any: no stream's queue starves while the host is busy
    launching a long chain elsewhere.
    """
    lv = levels(graph)
    ids = graph.node_ids
    return tuple(ids[i] for i in sorted(range(len(ids)), key=lambda i: (lv[i], i)))


def renumber_streams(launch_order: Sequence[str], streams: Mapping[str, int]) -> dict[str, int]:
    """Streams renumbered 0..k-1 by first launch, so stream 0 holds the first op."""
    new: dict[int, int] = {}
    out: dict[str, int] = {}
    for op in launch_order:
        s = streams[op]
        if s not in new:
            new[s] = len(new)
        out[op] = new[s]
    return out
