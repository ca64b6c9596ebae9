"""Brute-force oracles and schedule generators for the memory tests (small graphs only)."""

from __future__ import annotations

from hypothesis import strategies as st

from streamplan.cost.timeline import OpSpan, Timeline
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.schedule.events import with_derived_waits


def hb_preds(schedule: StreamSchedule) -> dict[str, set[str]]:
    """Direct happens-before predecessors: previous op on the stream, and waits."""
    preds: dict[str, set[str]] = {op: set() for op in schedule.launch_order}
    last: dict[int, str] = {}
    for op in schedule.launch_order:
        s = schedule.streams[op]
        if s in last:
            preds[op].add(last[s])
        last[s] = op
    for w in schedule.waits:
        preds[w.before].add(w.after)
    return preds


def storage_users(graph: Graph) -> dict[str, tuple[str | None, set[str], bool]]:
    """Activation storage -> (creator, every op touching it, is output)."""
    outs = {graph.storage_of(v) for v in graph.outputs}
    info: dict[str, tuple[str | None, set[str], bool]] = {}
    for sid, st_ in graph.storages().items():
        if st_.kind == "activation":
            info[sid] = (graph.producer(sid), set(), sid in outs)
    for n in graph.nodes:
        for v in (*n.inputs, *n.outputs, *n.mutates):
            sid = graph.storage_of(v)
            if sid in info:
                info[sid][1].add(n.id)
    return info


def live_bytes(graph: Graph, info, finished: frozenset, started: frozenset) -> int:
    total = 0
    for sid, (creator, users, is_out) in info.items():
        if creator in started and (is_out or not users <= finished):
            total += graph.storages()[sid].nbytes
    return total


def brute_force_worst_case(graph: Graph, schedule: StreamSchedule) -> int:
    """Max live bytes over every interleaving of op starts/ends consistent with HB."""
    preds = hb_preds(schedule)
    info = storage_users(graph)
    ops = list(schedule.launch_order)
    seen: set[tuple[frozenset, frozenset]] = set()
    best = 0
    stack = [(frozenset(), frozenset())]
    while stack:
        f, d = stack.pop()
        if (f, d) in seen:
            continue
        seen.add((f, d))
        best = max(best, live_bytes(graph, info, f, d))
        for op in ops:
            if op not in d and preds[op] <= f:
                stack.append((f, d | {op}))
            elif op in d and op not in f:
                stack.append((f | {op}, d))
    return best


def brute_force_arena_bound(graph: Graph, schedule: StreamSchedule) -> int:
    """Heaviest set of activation storages that pairwise may coexist (all subsets)."""
    preds = hb_preds(schedule)
    closure: dict[str, set[str]] = {}
    for op in schedule.launch_order:
        acc: set[str] = set()
        for p in preds[op]:
            acc |= {p} | closure[p]
        closure[op] = acc
    info = storage_users(graph)
    names = list(info)

    def dies_before(a: str, b: str) -> bool:
        ca, ua, oa = info[a]
        return not oa and all(u in closure[info[b][0]] for u in ua)

    size = {s: graph.storages()[s].nbytes for s in names}
    best = 0
    for mask in range(1 << len(names)):
        pick = [names[i] for i in range(len(names)) if mask >> i & 1]
        if all(
            not dies_before(a, b) and not dies_before(b, a) for i, a in enumerate(pick) for b in pick[i + 1 :]
        ):
            best = max(best, sum(size[s] for s in pick))
    return best


@st.composite
def schedules_for(draw, graph: Graph, max_streams: int = 3) -> StreamSchedule:
    """A random valid schedule: a random topological launch order and random streams."""
    remaining = {n.id: set(graph.predecessors(n.id)) for n in graph.nodes}
    order: list[str] = []
    while remaining:
        ready = sorted(op for op, ps in remaining.items() if not ps)
        op = ready[draw(st.integers(0, len(ready) - 1))]
        order.append(op)
        del remaining[op]
        for ps in remaining.values():
            ps.discard(op)
    streams = {op: draw(st.integers(0, max_streams - 1)) for op in order}
    return with_derived_waits(graph, order, streams, "random")


@st.composite
def timelines_for(draw, schedule: StreamSchedule) -> Timeline:
    """Random positive durations, each op starting once its HB predecessors ended."""
    preds = hb_preds(schedule)
    spans, end = [], {}
    for i, op in enumerate(schedule.launch_order):
        start = max((end[p] for p in preds[op]), default=0.0) + draw(st.sampled_from((0.0, 0.5)))
        end[op] = start + draw(st.sampled_from((0.25, 1.0, 3.0)))
        spans.append(OpSpan(op, schedule.streams[op], float(i), start, end[op]))
    return Timeline(tuple(spans), max(end.values(), default=0.0), {})
