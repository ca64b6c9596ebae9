"""Check that a ``StreamSchedule`` is valid for its graph, independently of the policies.

Valid means: the schedule is structurally sound (``ir.schedule.structure_problems``:
every graph op launched exactly once, streams are ints >= 0, every wait waits on
an op launched earlier, since an event not yet recorded never fires); and every dependency
u -> v is ordered by happens-before (same stream with u launched first, or a chain
of waits and stream orders). Happens-before is tracked with one vector clock per
stream, so the check is linear in ops x streams. Deliberately does not use
``schedule/events.py``: the verifier must not share code with what it checks.
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


def _check_order(graph: Graph, schedule: StreamSchedule) -> list[str]:
    """Replay the launch order with vector clocks; report bad waits and unordered dependencies."""
    problems: list[str] = []
    streams = schedule.streams
    launch_index: dict[str, int] = {}
    for i, op in enumerate(schedule.launch_order):
        launch_index.setdefault(op, i)
    waits_before: dict[str, list[str]] = {}
    for w in schedule.waits:  # waits on unknown or later launches are structural problems
        if w.after in launch_index and w.before in launch_index:
            if launch_index[w.after] < launch_index[w.before]:
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
