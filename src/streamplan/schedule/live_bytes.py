"""Live activation bytes along a one-stream order (the liveness convention every policy shares).

A storage is allocated when the op that creates it runs and freed right after the
last op that reads or writes any of its values (views and in-place results share
their base's storage, so they extend its life). Graph outputs are never freed.
Only activation storages count: inputs, parameters, buffers and constants do not.
The bytes live *during* an op are those live before it plus what it allocates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from streamplan.errors import ScheduleError
from streamplan.ir.graph import Graph


@dataclass(frozen=True, slots=True)
class LiveTrace:
    """Activation bytes live during each op of ``order`` and right after it."""

    order: tuple[str, ...]
    during_bytes: tuple[int, ...]
    after_bytes: tuple[int, ...]

    @property
    def peak_bytes(self) -> int:
        """The largest amount live during any op (0 for an empty graph)."""
        return max(self.during_bytes, default=0)

    def __str__(self) -> str:
        lines = [f"live activation bytes, peak {self.peak_bytes / 2**20:.2f} MiB"]
        for op, d, a in zip(self.order, self.during_bytes, self.after_bytes, strict=True):
            lines.append(f"  {op}: during {d / 2**20:.2f} MiB, after {a / 2**20:.2f} MiB")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class StorageFacts:
    """Per node position: bytes it allocates, and the storages it uses (id index, bytes).

    ``users[s]`` counts the nodes touching activation storage s; ``pinned[s]`` is True
    for storages that hold a graph output (never freed).
    """

    alloc_bytes: tuple[int, ...]
    touches: tuple[tuple[int, ...], ...]
    storage_bytes: tuple[int, ...]
    users: tuple[int, ...]
    pinned: tuple[bool, ...]


def storage_facts(graph: Graph) -> StorageFacts:
    """Index the activation storages of ``graph`` for fast liveness replays."""
    storages = graph.activation_storages()
    sid = {s: i for i, s in enumerate(storages)}
    sbytes = [storages[s].nbytes for s in storages]
    pinned = [False] * len(sid)
    for vid in graph.outputs:
        v = graph.values.get(vid)
        if v is not None and v.storage in sid:
            pinned[sid[v.storage]] = True
    alloc = [0] * len(graph.nodes)
    touches: list[tuple[int, ...]] = []
    users = [0] * len(sid)
    created: set[int] = set()
    for i, node in enumerate(graph.nodes):
        seen: dict[int, None] = {}
        for vid in (*node.inputs, *node.outputs, *node.mutates):
            v = graph.values.get(vid)
            if v is not None and v.storage in sid:
                seen[sid[v.storage]] = None
        for vid in node.outputs:
            v = graph.values.get(vid)
            if v is not None and v.storage == vid and vid in sid and sid[vid] not in created:
                created.add(sid[vid])
                alloc[i] += sbytes[sid[vid]]
        for s in seen:
            users[s] += 1
        touches.append(tuple(seen))
    # A storage no node creates (an activation fed from outside) is live from its first use.
    for i, ts in enumerate(touches):
        for s in ts:
            if s not in created:
                created.add(s)
                alloc[i] += sbytes[s]
    return StorageFacts(tuple(alloc), tuple(touches), tuple(sbytes), tuple(users), tuple(pinned))


def sequential_trace(graph: Graph, order: Sequence[str]) -> LiveTrace:
    """Replay ``order`` (every op once, dependencies first) on one stream."""
    if len(order) != len(graph.nodes) or set(order) != set(graph.node_ids):
        raise ScheduleError(
            "order must list every op of the graph exactly once",
            where=graph.name,
            hint=f"got {len(order)} ops for a graph of {len(graph.nodes)}",
        )
    facts = storage_facts(graph)
    return _replay(facts, [graph.position(op) for op in order], tuple(order))


def sequential_peak_bytes(graph: Graph, order: Sequence[str]) -> int:
    """Peak live activation bytes when ``order`` runs on one stream."""
    return sequential_trace(graph, order).peak_bytes


def _replay(facts: StorageFacts, positions: Sequence[int], order: tuple[str, ...]) -> LiveTrace:
    remaining = list(facts.users)
    live = 0
    during: list[int] = []
    after: list[int] = []
    for p in positions:
        live += facts.alloc_bytes[p]
        during.append(live)
        for s in facts.touches[p]:
            remaining[s] -= 1
            if remaining[s] == 0 and not facts.pinned[s]:
                live -= facts.storage_bytes[s]
        after.append(live)
    return LiveTrace(order, tuple(during), tuple(after))
