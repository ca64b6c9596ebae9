"""``asap`` (RAF): chains that follow the longest path; finished streams are reused.

Every op u picks, among its successors, the one with the longest path to a sink;
an op continues the chain of the predecessor that picked it (the deepest one when
several did), so chains run along the critical paths. A new chain takes, in this
order: the stream of a predecessor whose chain just ended (no event needed), any
stream whose chain has ended, a fresh stream while under ``max_streams``, or the
stream whose last op is shallowest. Waits are derived only for edges between
chains. Linear in ops + edges (plus a sort for the launch order).
"""

from __future__ import annotations

from streamplan.ir.analysis import levels
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.schedule._launch import level_launch_order, renumber_streams
from streamplan.schedule.context import DEFAULT_CONTEXT, ScheduleContext
from streamplan.schedule.events import with_derived_waits


def asap_streams(graph: Graph, max_streams: int = 8) -> tuple[dict[str, int], int]:
    """Stream of every op and the number of chains formed."""
    preds, succs = graph.pred_positions(), graph.succ_positions()
    n = len(preds)
    height = [0] * n
    for u in range(n - 1, -1, -1):
        if succs[u]:
            height[u] = 1 + max(height[w] for w in succs[u])
    depth = levels(graph)
    chosen = [max(succs[u], key=lambda w: (height[w], -w)) if succs[u] else -1 for u in range(n)]
    stream = [0] * n
    tail: list[int] = []  # last op of each stream
    free: list[int] = []  # streams whose chain has ended
    is_free: list[bool] = []
    chains = 0
    for v in range(n):
        pickers = [u for u in preds[v] if chosen[u] == v]
        if pickers:
            u = max(pickers, key=lambda p: (depth[p], -p))
            s = stream[u]
            for other in pickers:
                if other != u and stream[other] != s and tail[stream[other]] == other:
                    _release(stream[other], free, is_free)
        else:
            chains += 1
            s = _new_chain_stream(v, preds, stream, tail, free, is_free, depth, max_streams)
        stream[v] = s
        tail[s] = v
        if not succs[v]:
            _release(s, free, is_free)
    ids = graph.node_ids
    return {ids[i]: stream[i] for i in range(n)}, chains


def _release(s: int, free: list[int], is_free: list[bool]) -> None:
    if not is_free[s]:
        is_free[s] = True
        free.append(s)


def _new_chain_stream(v, preds, stream, tail, free, is_free, depth, max_streams) -> int:
    for u in preds[v]:
        s = stream[u]
        if is_free[s] and tail[s] == u:
            is_free[s] = False
            free.remove(s)
            return s
    while free:
        s = free.pop()
        if is_free[s]:
            is_free[s] = False
            return s
    if len(tail) < max_streams:
        tail.append(v)
        is_free.append(False)
        return len(tail) - 1
    return min(range(len(tail)), key=lambda s: (depth[tail[s]], s))


def schedule_asap(graph: Graph, ctx: ScheduleContext = DEFAULT_CONTEXT) -> StreamSchedule:
    """RAF's ASAP schedule on at most ``ctx.max_streams`` streams."""
    streams, chains = asap_streams(graph, ctx.max_streams)
    order = level_launch_order(graph)
    streams = renumber_streams(order, streams)
    return with_derived_waits(graph, order, streams, "asap", chains=chains)
