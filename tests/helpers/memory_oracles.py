"""Brute-force oracles and schedule generators for the memory tests (small graphs only)."""

from __future__ import annotations

from hypothesis import strategies as st

from streamplan.cost.timeline import OpSpan, Timeline
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule, Wait
from streamplan.schedule.events import with_derived_waits


def hb_preds(schedule: StreamSchedule) -> dict[str, set[str]]:
    """Direct happens-before predecessors: previous op on the stream, waits, and every op the
    host waited for before launching it or anything launched earlier."""
    preds: dict[str, set[str]] = {op: set() for op in schedule.launch_order}
    last: dict[int, str] = {}
    for op in schedule.launch_order:
        s = schedule.streams[op]
        if s in last:
            preds[op].add(last[s])
        last[s] = op
    for w in schedule.waits:
        preds[w.before].add(w.after)
    host = host_wait_preds(schedule)
    for op in schedule.launch_order:
        preds[op] |= host[op]
    return preds


def host_wait_preds(schedule: StreamSchedule) -> dict[str, set[str]]:
    """For each op, the ops the host has waited for by the time it launches it."""
    by_launch: dict[str, set[str]] = {}
    for w in schedule.host_waits:
        by_launch.setdefault(w.before, set()).add(w.after)
    out, seen = {}, set()
    for op in schedule.launch_order:
        seen |= by_launch.get(op, set())
        out[op] = set(seen)
    return out


def device_preds(schedule: StreamSchedule) -> dict[str, set[str]]:
    """Previous op on the stream and device waits only (what a launched op waits for)."""
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


def brute_force_held_peak(graph: Graph, schedule: StreamSchedule) -> int:
    """Most activation bytes allocated at host launch or held back by ``record_stream``, over
    every timing: the host at launch i (its allocations made), the device having finished
    any set F of launched ops closed under stream order and device waits, the host having
    waited for what its host waits name."""
    order = list(schedule.launch_order)
    at = {op: i for i, op in enumerate(order)}
    dev = device_preds(schedule)
    host = host_wait_preds(schedule)
    streams = schedule.streams
    info = storage_users(graph)
    size = {sid: graph.storages()[sid].nbytes for sid in info}
    held_on: dict[str, frozenset] = {}  # storage -> ops its record_stream events follow
    for sid, (creator, users, is_out) in info.items():
        if is_out or not schedule.record_stream:
            continue
        home = streams[creator]
        freed = max(at[u] for u in users)
        others = {streams[u] for u in users} - {home}
        held_on[sid] = frozenset(
            max((op for op in order[: freed + 1] if streams[op] == s), key=at.__getitem__) for s in others
        )

    def value(i: int, finished: frozenset) -> int:
        total = 0
        for sid, (creator, users, is_out) in info.items():
            if at[creator] > i:
                continue
            freed = max(at[u] for u in users)
            if is_out or freed >= i:
                total += size[sid]  # allocated (a free at launch i comes after its allocations)
            elif held_on.get(sid) and not held_on[sid] <= finished:
                total += size[sid]  # freed by the host, held until other streams catch up
        return total

    best = 0
    start = (0, frozenset())
    seen = {start}
    stack = [start]
    while stack:
        i, f = stack.pop()
        best = max(best, value(i, f))
        nxt = []
        for op in order[: i + 1]:
            if op not in f and dev[op] <= f:
                nxt.append((i, f | {op}))
        if i + 1 < len(order) and host[order[i + 1]] <= f:
            nxt.append((i + 1, f))
        for state in nxt:
            if state not in seen:
                seen.add(state)
                stack.append(state)
    return best


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
def with_host_waits(draw, graph: Graph, schedule: StreamSchedule, max_waits: int = 3) -> StreamSchedule:
    """``schedule`` with a few random host waits (each on an op launched earlier), and
    without ``record_stream`` half the time where the verifier accepts that."""
    from streamplan.schedule.verify import schedule_problems

    order = schedule.launch_order
    pairs = [(u, v) for j, v in enumerate(order) for u in order[:j]]
    picked = draw(st.lists(st.sampled_from(pairs), max_size=max_waits, unique=True)) if pairs else []
    out = schedule.replace(host_waits=tuple(Wait(u, v) for u, v in picked))
    if draw(st.booleans()):
        plain = out.replace(record_stream=False)
        if not schedule_problems(graph, plain):
            return plain
    return out


@st.composite
def timelines_for(draw, schedule: StreamSchedule) -> Timeline:
    """Random positive durations, each op starting once its HB predecessors ended and the host
    launched it; the host launches in order, waiting at host waits for the ops they name."""
    preds = device_preds(schedule)
    host = {}
    for w in schedule.host_waits:
        host.setdefault(w.before, []).append(w.after)
    spans, end = [], {}
    host_t = 0.0
    for op in schedule.launch_order:
        host_t = max([host_t, *(end[u] for u in host.get(op, ()))]) + draw(st.sampled_from((0.0, 0.1, 1.0)))
        start = max([host_t, *(end[p] for p in preds[op])]) + draw(st.sampled_from((0.0, 0.5)))
        end[op] = start + draw(st.sampled_from((0.25, 1.0, 3.0)))
        spans.append(OpSpan(op, schedule.streams[op], host_t, start, end[op]))
    return Timeline(tuple(spans), max(end.values(), default=0.0), {})
