"""Live bytes over time along a timeline (``docs/memory.md``, figure 3).

A storage is allocated when its creator starts and freed when the last of its users
ends (outputs and resident storages never). Spans are half-open ``[start, end)``:
at one instant, ops that end there free first, then ops that start there allocate,
so ops ordered back to back are never counted as overlapping. A zero-length op
starts and ends in launch order after the positive-length ops ending at that instant.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamplan.cost.timeline import Timeline
from streamplan.errors import ScheduleError
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.liveness import Includes, Liveness, liveness


@dataclass(frozen=True)
class SimulatedMemory:
    """Peak and live bytes over a timeline; ``samples`` are (time_ms, live_bytes) steps."""

    peak_bytes: int
    peak_ms: float
    samples: tuple[tuple[float, int], ...]
    live_at_peak: tuple[str, ...]  # storages live at the peak
    running_at_peak: tuple[str, ...]  # ops started and not finished at the peak
    includes: Includes

    def to_dict(self) -> dict:
        return {
            "simulated_peak_bytes": self.peak_bytes,
            "peak_ms": self.peak_ms,
            "live_at_peak": list(self.live_at_peak),
            "running_at_peak": list(self.running_at_peak),
            "includes": self.includes.describe(),
        }

    def __str__(self) -> str:
        return (
            f"simulated peak {self.peak_bytes / (1 << 20):.3f} MiB at {self.peak_ms:.4f} ms "
            f"({self.includes.describe()}; live: {', '.join(self.live_at_peak)})"
        )


@dataclass(frozen=True, slots=True)
class _Step:
    """Sweep result: the peak and the sets at the peak."""

    peak_bytes: int
    peak_time: float
    samples: tuple[tuple[float, int], ...]
    live: tuple[str, ...]
    finished: tuple[str, ...]
    running: tuple[str, ...]


def sweep_live_bytes(
    live: Liveness, order: list[str], start: dict[str, float], end: dict[str, float]
) -> _Step:
    """Live bytes along explicit op start/end times; ``order`` breaks ties (launch order)."""
    rank = {op: i for i, op in enumerate(order)}
    created: dict[str, list] = {}
    uses: dict[str, list] = {}
    remaining: dict[str, int] = {}
    cur = 0
    for life in live.lives:
        if life.creator is None:
            cur += life.nbytes
            continue
        created.setdefault(life.creator, []).append(life)
        if not life.persistent:
            remaining[life.storage] = len(life.users)
            for u in life.users:
                uses.setdefault(u, []).append(life)
    events = []
    for op in order:
        s, e = start[op], end[op]
        r = rank[op]
        events.append((s, 1, r, 0, op))
        events.append((e, 0 if e > s else 1, r, 1, op))
    events.sort()
    peak, peak_t, peak_at = cur, 0.0, -1
    samples = []
    for k, (t, _, _, is_end, op) in enumerate(events):
        if is_end:
            for life in uses.get(op, ()):
                remaining[life.storage] -= 1
                if remaining[life.storage] == 0:
                    cur -= life.nbytes
        else:
            cur += sum(life.nbytes for life in created.get(op, ()))
            if cur > peak or peak_at < 0:
                peak, peak_t, peak_at = cur, t, k
        samples.append((t, cur))
    lv, fin, run = _state_after(events[: peak_at + 1], created, uses, live)
    resident = tuple(life.storage for life in live.lives if life.creator is None)
    return _Step(peak, peak_t, tuple(samples), resident + tuple(lv), fin, run)


def _state_after(events: list, created: dict, uses: dict, live: Liveness):
    """Storages live, ops finished and ops running after replaying ``events``."""
    remaining = {life.storage: len(life.users) for life in live.lives if not life.persistent}
    alive: dict[str, int] = {}
    finished: list[str] = []
    running: dict[str, None] = {}
    for _, _, _, is_end, op in events:
        if is_end:
            running.pop(op, None)
            finished.append(op)
            for life in uses.get(op, ()):
                remaining[life.storage] -= 1
                if remaining[life.storage] == 0:
                    alive.pop(life.storage, None)
        else:
            running[op] = None
            for life in created.get(op, ()):
                alive[life.storage] = life.nbytes
    return alive, tuple(finished), tuple(running)


def simulated_memory(
    graph: Graph,
    schedule: StreamSchedule,
    timeline: Timeline,
    *,
    include_inputs: bool = False,
    include_params: bool = False,
    live: Liveness | None = None,
) -> SimulatedMemory:
    """Live bytes along ``timeline`` (e.g. from ``streamplan.cost.simulate.simulate``)."""
    if live is None:
        live = liveness(graph, schedule, include_inputs=include_inputs, include_params=include_params)
    spans = timeline.by_op()
    missing = [op for op in schedule.launch_order if op not in spans]
    if missing:
        raise ScheduleError(
            f"timeline has no span for {len(missing)} ops (e.g. {missing[0]})",
            hint="simulate the same schedule the memory is analysed for",
        )
    order = list(schedule.launch_order)
    step = sweep_live_bytes(
        live, order, {op: spans[op].start_ms for op in order}, {op: spans[op].end_ms for op in order}
    )
    return SimulatedMemory(
        step.peak_bytes, step.peak_time, step.samples, step.live, step.running, live.includes
    )


def simulated_peak_bytes(
    graph: Graph,
    schedule: StreamSchedule,
    timeline: Timeline,
    *,
    include_inputs: bool = False,
    include_params: bool = False,
) -> int:
    """Peak live bytes along ``timeline``."""
    return simulated_memory(
        graph, schedule, timeline, include_inputs=include_inputs, include_params=include_params
    ).peak_bytes
