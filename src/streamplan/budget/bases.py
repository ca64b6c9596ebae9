"""More starting points for the budget search than the fixed policies' schedules.

``list_schedule`` is classic critical-path list scheduling (highest level first): on
``max_streams`` streams, whenever a stream is free it takes the ready op with the
longest chain of op times still ahead of it. The fixed policies build chains from
the graph's shape alone; this one uses the cost model's op times and the stream cap,
which is what a budget that forbids running everything at once needs most.
``memory_list_schedule`` does the same but starts an op only when the launch-order
position bound of the worst case stays within the budget (waiting, if it must, for
every op finished by then), so what it returns fits by construction.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from streamplan.cost.opcost import CostModel
from streamplan.cost.simulate import op_costs
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule, Wait
from streamplan.memory.position_bound import CountedStorages, PositionBound
from streamplan.schedule.events import derive_waits


def list_schedule(graph: Graph, cost: CostModel, max_streams: int) -> StreamSchedule:
    """Highest-level-first list scheduling on ``max_streams`` streams (launch order = start order)."""
    ids = graph.node_ids
    n = len(ids)
    times = op_costs(graph, ids, cost).time_ms
    preds, succs = graph.pred_positions(), graph.succ_positions()
    level = [0.0] * n  # longest chain of op times from the op to a sink, the op included
    for v in range(n - 1, -1, -1):
        level[v] = times[v] + max((level[w] for w in succs[v]), default=0.0)
    missing = [len(p) for p in preds]
    ready: list[tuple[float, int]] = [(-level[v], v) for v in range(n) if not missing[v]]
    heapq.heapify(ready)
    running: list[tuple[float, int, int]] = []  # (end, op, stream)
    free = list(range(max(1, max_streams)))
    now = 0.0
    order: list[int] = []
    stream_of: dict[str, int] = {}
    while len(order) < n:
        while ready and free:
            _, v = heapq.heappop(ready)
            s = free.pop(0)
            order.append(v)
            stream_of[ids[v]] = s
            heapq.heappush(running, (now + times[v], v, s))
        end, v, s = heapq.heappop(running)
        now = end
        finished = [(v, s)]
        while running and running[0][0] <= now:
            _, v2, s2 = heapq.heappop(running)
            finished.append((v2, s2))
        for v, s in finished:
            free.append(s)
            for w in succs[v]:
                missing[w] -= 1
                if not missing[w]:
                    heapq.heappush(ready, (-level[w], w))
        free.sort()
    launch = tuple(ids[v] for v in order)
    used = {s: k for k, s in enumerate(dict.fromkeys(stream_of[op] for op in launch))}
    streams = {op: used[stream_of[op]] for op in launch}
    return StreamSchedule(launch, streams, derive_waits(graph, launch, streams), "list")


def greedy_streams(graph: Graph, order: Sequence[str], cost: CostModel, max_streams: int) -> StreamSchedule:
    """Keep ``order`` as the launch order and give each op the stream on which it can start first
    (ties: the stream of one of its inputs, which needs no wait), on estimated op times."""
    times = op_costs(graph, order, cost).time_ms
    k = max(1, max_streams)
    free_at = [0.0] * k
    last: list[str | None] = [None] * k
    end: dict[str, float] = {}
    streams: dict[str, int] = {}
    for op, t in zip(order, times, strict=True):
        ready = max((end[u] for u in graph.predecessors(op)), default=0.0)
        inputs = set(graph.predecessors(op))
        s = min(range(k), key=lambda j: (max(ready, free_at[j]), last[j] not in inputs, j))
        start = max(ready, free_at[s])
        end[op] = free_at[s] = start + t
        last[s] = op
        streams[op] = s
    used = {s: i for i, s in enumerate(dict.fromkeys(streams[op] for op in order))}
    streams = {op: used[streams[op]] for op in order}
    return StreamSchedule(tuple(order), streams, derive_waits(graph, order, streams), "greedy streams")


def memory_list_schedule(
    graph: Graph, cost: CostModel, max_streams: int, limit_bytes: int, facts: CountedStorages
) -> StreamSchedule | None:
    """List scheduling that admits an op only when the launch-order position bound stays within
    ``limit_bytes``: first with waits for its inputs only, else also waiting for every op finished
    by then (on the estimated timeline). None when it gets stuck (nothing running, nothing fits)."""
    ids = graph.node_ids
    n = len(ids)
    times = op_costs(graph, ids, cost).time_ms
    preds, succs = graph.pred_positions(), graph.succ_positions()
    level = [0.0] * n
    for v in range(n - 1, -1, -1):
        level[v] = times[v] + max((level[w] for w in succs[v]), default=0.0)
    k = max(1, max_streams)
    state = PositionBound(facts, k)
    missing = [len(p) for p in preds]
    ready = sorted((v for v in range(n) if not missing[v]), key=lambda v: -level[v])
    running: list[tuple[float, int, int]] = []
    free = list(range(k))
    last_done: dict[int, str] = {}  # stream -> its latest finished op
    now = 0.0
    order: list[str] = []
    streams: dict[str, int] = {}
    waits: list[Wait] = []
    while len(order) < n:
        started = True
        while started and ready and free:
            started = False
            for v in ready:
                placed = _admit_now(state, graph, v, free, streams, last_done, limit_bytes)
                if placed is None:
                    continue
                s, ws = placed
                op = ids[v]
                order.append(op)
                streams[op] = s
                waits.extend(Wait(u, op) for u in ws)
                free.remove(s)
                ready.remove(v)
                heapq.heappush(running, (now + times[v], v, s))
                started = True
                break
        if not running:
            return None  # nothing runs and nothing fits: this order cannot meet the budget
        now, v, s = heapq.heappop(running)
        done = [(v, s)]
        while running and running[0][0] <= now:
            _, v2, s2 = heapq.heappop(running)
            done.append((v2, s2))
        for v, s in done:
            free.append(s)
            last_done[s] = ids[v]
            for w in succs[v]:
                missing[w] -= 1
                if not missing[w]:
                    ready.append(w)
        ready.sort(key=lambda v: -level[v])
        free.sort()
    return StreamSchedule(tuple(order), streams, tuple(waits), "memory list")


def _admit_now(
    state: PositionBound,
    graph: Graph,
    v: int,
    free: list[int],
    streams: dict[str, int],
    last_done: dict[int, str],
    limit_bytes: int,
) -> tuple[int, list[str]] | None:
    """A free stream and the waits that let op v start now within the budget (None: it cannot)."""
    ids = graph.node_ids
    inputs = [ids[p] for p in graph.pred_positions()[v]]
    own = [streams[u] for u in inputs if streams[u] in free and last_done.get(streams[u]) == u]
    s = own[0] if own else free[0]
    data = [u for u in inputs if streams[u] != s]
    for ws in (data, list(dict.fromkeys(data + [u for t, u in last_done.items() if t != s]))):
        before = state.clock_before(s, ws)
        value = state.probe(ids[v], s, before, enough=limit_bytes)
        if value <= limit_bytes:
            state.place(ids[v], s, before, bound=value)
            return s, ws
    return None
