"""Check that a ``StreamSchedule`` is valid for its graph, independently of the policies.

Valid means: the schedule is structurally sound (``ir.schedule.structure_problems``:
every graph op launched exactly once, streams are ints >= 0, every wait and host wait
waits on an op launched earlier, since an event not yet recorded never fires); every
dependency u -> v is ordered by happens-before (same stream with u launched first, or a
chain of waits, host waits and stream orders: a host wait for u before launching w puts
u before every op launched from w on); and, when the schedule frees cross-stream tensors
without ``record_stream``, every such free is safe: the next op on the stream that
allocated the tensor (the only stream the caching allocator hands its block to again)
must follow every use of it on other streams. Happens-before is tracked with one vector
clock per stream, so the check is linear in ops x streams. Deliberately does not use
``schedule/events.py`` or ``StreamSchedule.ordering_waits``: the verifier must not share
code with what it checks.
"""

from __future__ import annotations

from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule, schedule_error, structure_problems


def verify_schedule(graph: Graph, schedule: StreamSchedule) -> None:
    """Raise ``ScheduleError`` naming the first problems when ``schedule`` is invalid for ``graph``."""
    problems = schedule_problems(graph, schedule)
    if problems:
        raise schedule_error(problems, graph, schedule)


def schedule_problems(graph: Graph, schedule: StreamSchedule) -> list[str]:
    """Every problem of ``schedule`` for ``graph``, one message each (empty when valid)."""
    problems = structure_problems(graph, schedule)
    problems.extend(_check_order(graph, schedule))
    return problems


def _launched_before(schedule: StreamSchedule, launch_index: dict[str, int], waits) -> dict[str, list[str]]:
    """For each op, the earlier-launched ops that ``waits`` make it wait for."""
    out: dict[str, list[str]] = {}
    for w in waits:  # waits on unknown or later launches are structural problems
        if w.after in launch_index and w.before in launch_index:
            if launch_index[w.after] < launch_index[w.before]:
                out.setdefault(w.before, []).append(w.after)
    return out


def _check_order(graph: Graph, schedule: StreamSchedule) -> list[str]:
    """Replay the launch order with vector clocks; report bad waits and unordered dependencies."""
    problems: list[str] = []
    streams = schedule.streams
    launch_index: dict[str, int] = {}
    for i, op in enumerate(schedule.launch_order):
        launch_index.setdefault(op, i)
    waits_before = _launched_before(schedule, launch_index, schedule.waits)
    host_before = _launched_before(schedule, launch_index, schedule.host_waits)
    event_ops = {u for us in (*waits_before.values(), *host_before.values()) for u in us}
    keep_all = not schedule.record_stream  # the free-safety check needs every op's clock
    slot: dict[int, int] = {}
    for op in launch_index:
        s = streams.get(op)
        if isinstance(s, int) and s not in slot:
            slot[s] = len(slot)
    k = len(slot)
    clock = [[0] * k for _ in range(k)]  # clock[s][t]: ops of stream t known done before s's next op
    host = [0] * k  # ops of each stream the host has waited for: everything launched later follows them
    count = [0] * k
    op_slot_index: dict[str, tuple[int, int]] = {}  # op -> (stream slot, 1-based index on it)
    op_clock: dict[str, list[int]] = {}  # only ops that some wait refers to
    done: set[str] = set()
    for i, v in enumerate(schedule.launch_order):
        if v in done or launch_index.get(v) != i or not isinstance(streams.get(v), int):
            continue
        done.add(v)
        s = slot[streams[v]]
        for u in host_before.get(v, ()):
            uc = op_clock.get(u)
            if uc is not None:
                host = [max(a, b) for a, b in zip(host, uc, strict=True)]
        cur = clock[s]
        for t in range(k):
            if host[t] > cur[t]:
                cur[t] = host[t]
        for u in waits_before.get(v, ()):
            uc = op_clock.get(u)
            if uc is not None:
                for t in range(k):
                    if uc[t] > cur[t]:
                        cur[t] = uc[t]
        if graph.has_node(v):
            for u in graph.predecessors(v):
                problem = _unordered(u, v, s, cur, op_slot_index, launch_index, streams)
                if problem:
                    problems.append(problem)
        count[s] += 1
        cur[s] = count[s]
        op_slot_index[v] = (s, count[s])
        if v in event_ops or keep_all:
            op_clock[v] = list(cur)
    if keep_all and not problems:
        problems.extend(_unsafe_frees(graph, schedule, launch_index, op_slot_index, op_clock))
    return problems


def _unsafe_frees(graph, schedule, launch_index, op_slot_index, op_clock) -> list[str]:
    """Cross-stream frees without ``record_stream`` whose block may be reused too early."""
    streams = schedule.streams
    users: dict[str, list[str]] = {}
    for n in graph.nodes:
        for vid in dict.fromkeys((*n.outputs, *n.inputs, *n.mutates)):
            users.setdefault(graph.values[vid].storage, []).append(n.id)
    outputs = {graph.storage_of(v) for v in graph.outputs}
    by_stream: dict[int, list[int]] = {}
    for i, op in enumerate(schedule.launch_order):
        by_stream.setdefault(streams[op], []).append(i)
    problems = []
    for sid, ops in users.items():
        creator = graph.producer(sid)
        if creator is None or sid in outputs or graph.values[sid].kind != "activation":
            continue
        home = streams[creator]
        elsewhere = [u for u in ops if streams[u] != home]
        if not elsewhere:
            continue
        freed_at = max(launch_index[u] for u in ops)
        later = [i for i in by_stream[home] if i > freed_at]
        if not later:
            continue
        nxt = schedule.launch_order[later[0]]
        for u in elsewhere:
            t, idx = op_slot_index[u]
            if op_clock[nxt][t] < idx:
                problems.append(
                    f"{sid} is freed without record_stream, but {nxt}, the next op on stream {home} "
                    f"(which may reuse its block), does not wait for its use by {u} on stream "
                    f"{streams[u]}; add a wait or keep record_stream"
                )
                break
    return problems


def _unordered(u, v, s, cur, op_slot_index, launch_index, streams) -> str | None:
    if u not in launch_index or not isinstance(streams.get(u), int):
        return None  # reported as never launched, or as having no valid stream
    if u not in op_slot_index:
        if streams.get(u) == streams.get(v):
            return (
                f"{u} -> {v} are not ordered: {v} is launched before {u} on stream {streams[v]}, "
                f"so it runs before its input is ready; launch {u} first"
            )
        return (
            f"{u} -> {v} are not ordered: {v} (stream {streams.get(v)}) is launched before {u} "
            f"(stream {streams.get(u)}); launch {u} first and add a wait"
        )
    t, idx = op_slot_index[u]
    if t == s or cur[t] >= idx:
        return None
    return (
        f"{u} -> {v} are not ordered: {v} on stream {streams[v]} may run before {u} finishes "
        f"on stream {streams[u]}; add a wait"
    )
