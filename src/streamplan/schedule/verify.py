"""Check that a ``StreamSchedule`` is valid for its graph (DESIGN §3), independently of the policies.

Valid means: every graph op is launched exactly once and nothing else is; streams
are ints >= 0; every wait names launched ops and waits only on an op launched
earlier (an event not yet recorded can never fire: deadlock); and every dependency
u -> v is ordered by happens-before (same stream with u launched first, or a chain
of waits and stream orders). Happens-before is tracked with one vector clock per
stream, so the check is linear in ops x streams. Deliberately does not use
``schedule/events.py``: the verifier must not share code with what it checks.
"""

from __future__ import annotations

from streamplan.errors import ScheduleError
from streamplan.ir.graph import Graph
from streamplan.schedule.schedule import StreamSchedule

MAX_REPORTED = 20


def verify_schedule(graph: Graph, schedule: StreamSchedule) -> None:
    """Raise ``ScheduleError`` naming the first problems when ``schedule`` is invalid for ``graph``."""
    problems = check_schedule(graph, schedule)
    if problems:
        shown = problems[:MAX_REPORTED]
        more = f" (and {len(problems) - len(shown)} more)" if len(problems) > len(shown) else ""
        raise ScheduleError(
            "; ".join(shown) + more,
            where=f"schedule {schedule.policy} of {graph.name}",
            hint="regenerate it with `streamplan schedule`, or add the missing waits",
        )


def check_schedule(graph: Graph, schedule: StreamSchedule) -> list[str]:
    """Every problem of ``schedule`` for ``graph``, one message each (empty when valid)."""
    problems = _check_structure(graph, schedule)
    problems.extend(_check_order(graph, schedule))
    return problems


def _check_structure(graph: Graph, schedule: StreamSchedule) -> list[str]:
    problems: list[str] = []
    seen: set[str] = set()
    for op in schedule.launch_order:
        if not graph.has_node(op):
            problems.append(f"{op} is launched but is not an op of the graph")
        elif op in seen:
            problems.append(f"{op} is launched more than once")
        seen.add(op)
    missing = [op for op in graph.node_ids if op not in seen]
    if missing:
        head = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
        problems.append(f"{len(missing)} op(s) never launched: {head}")
    for op in graph.node_ids:
        if op in seen and op not in schedule.streams:
            problems.append(f"{op} has no stream")
    for op, s in schedule.streams.items():
        if not isinstance(s, int) or isinstance(s, bool) or s < 0:
            problems.append(f"{op} is on stream {s!r}; streams are ints >= 0")
        elif op not in seen:
            problems.append(f"{op} has a stream but is never launched")
    return problems


def _check_order(graph: Graph, schedule: StreamSchedule) -> list[str]:
    """Replay the launch order with vector clocks; report bad waits and unordered dependencies."""
    problems: list[str] = []
    streams = schedule.streams
    launch_index: dict[str, int] = {}
    for i, op in enumerate(schedule.launch_order):
        launch_index.setdefault(op, i)
    waits_before: dict[str, list[str]] = {}
    for w in schedule.waits:
        for end in (w.after, w.before):
            if end not in launch_index:
                problems.append(f"wait {w.after} -> {w.before} refers to {end}, which is not launched")
        if w.after in launch_index and w.before in launch_index:
            if launch_index[w.after] > launch_index[w.before]:
                problems.append(
                    f"{w.before} waits for {w.after}, which is launched later: its event is not "
                    f"recorded yet when {w.before} is launched (deadlock)"
                )
            else:
                waits_before.setdefault(w.before, []).append(w.after)
    event_ops = {u for us in waits_before.values() for u in us}
    slot: dict[int, int] = {}
    for op in launch_index:
        s = streams.get(op)
        if isinstance(s, int) and s not in slot:
            slot[s] = len(slot)
    k = len(slot)
    clock = [[0] * k for _ in range(k)]  # clock[s][t]: ops of stream t known done before s's next op
    count = [0] * k
    op_slot_index: dict[str, tuple[int, int]] = {}  # op -> (stream slot, 1-based index on it)
    op_clock: dict[str, list[int]] = {}  # only ops that some wait refers to
    done: set[str] = set()
    for i, v in enumerate(schedule.launch_order):
        if v in done or launch_index.get(v) != i or not isinstance(streams.get(v), int):
            continue
        done.add(v)
        s = slot[streams[v]]
        cur = clock[s]
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
        if v in event_ops:
            op_clock[v] = list(cur)
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
