"""Derive the cross-stream waits a schedule needs, and drop the redundant ones.

Happens-before is tracked with vector clocks: ``clock[s][t]`` is the number of
ops of stream t known to have finished before the next op of stream s runs. A
dependency u -> v across streams needs a wait only if v's stream does not already
know that u has finished. Linear in ops x streams.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule, Wait


def derive_waits(
    graph: Graph,
    launch_order: Sequence[str],
    streams: Mapping[str, int],
    extra_deps: Mapping[str, Sequence[str]] | None = None,
) -> tuple[Wait, ...]:
    """The waits that order every dependency of ``graph`` (plus ``extra_deps``) across streams.

    Keeps only waits not implied by stream order and earlier waits. Dependencies must
    point backwards in ``launch_order`` (the caller guarantees a topological launch order).
    ``extra_deps[v]`` lists more ops v must wait for (e.g. stage barriers).
    """
    stream_ids = sorted(set(streams.values()))
    slot = {s: i for i, s in enumerate(stream_ids)}
    k = len(stream_ids)
    clock = [[0] * k for _ in range(k)]  # per stream: ops of each stream known done
    op_clock: dict[str, tuple[int, ...]] = {}  # clock right after op finishes (incl. itself)
    op_index: dict[str, int] = {}  # 1-based index of op on its stream
    count = [0] * k
    waits: list[Wait] = []
    for v in launch_order:
        s = slot[streams[v]]
        deps = list(graph.predecessors(v))
        if extra_deps and v in extra_deps:
            deps.extend(extra_deps[v])
        cross = [u for u in dict.fromkeys(deps) if slot[streams[u]] != s]
        # Latest in graph (topological) order first: a dependency that reaches a later one is
        # then implied by that one's wait, while stream indices are not comparable across streams.
        cross.sort(key=lambda u: -graph.position(u) if graph.has_node(u) else 0)
        cur = clock[s]
        for u in cross:
            t = slot[streams[u]]
            if u not in op_index:
                continue  # not launched yet; the verifier reports this
            if cur[t] >= op_index[u]:
                continue  # already known finished
            waits.append(Wait(u, v))
            uc = op_clock[u]
            cur = [max(a, b) for a, b in zip(cur, uc)]
        count[s] += 1
        op_index[v] = count[s]
        cur = list(cur)
        cur[s] = count[s]
        clock[s] = cur
        op_clock[v] = tuple(cur)
    return tuple(waits)


def with_derived_waits(
    graph: Graph, launch_order: Sequence[str], streams: Mapping[str, int], policy: str, **meta: object
) -> StreamSchedule:
    """A complete schedule from an order and a stream assignment (waits derived, minimal-ish)."""
    return StreamSchedule(
        tuple(launch_order), dict(streams), derive_waits(graph, launch_order, streams), policy, dict(meta)
    )


def prune_waits(graph: Graph, schedule: StreamSchedule) -> StreamSchedule:
    """Drop waits implied by the others (and waits within one stream)."""
    keep = derive_waits(
        graph, schedule.launch_order, schedule.streams, extra_deps=_non_data_waits(graph, schedule)
    )
    return schedule.replace(waits=keep)


def _non_data_waits(graph: Graph, schedule: StreamSchedule) -> dict[str, list[str]]:
    """Waits that are not data dependencies (barriers) must be preserved as extra deps."""
    extra: dict[str, list[str]] = {}
    for w in schedule.waits:
        if w.after not in graph.predecessors(w.before):
            extra.setdefault(w.before, []).append(w.after)
    return extra
