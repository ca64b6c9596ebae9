"""Host-order memory: replay allocations and frees in launch order (``docs/memory.md``, figure 1).

This is what a program-order estimator (RAF's EstimateMemory) reports; it cannot see
concurrency. The exact convention:

* resident storages (inputs, params when included) are allocated before the first
  launch (``launch_index`` -1, op ``""``, stream -1) and never freed;
* at launch i the host first allocates every storage op i creates, then frees every
  storage whose last user in launch order is op i (graph outputs are never freed);
* the trace has one entry per launch — live bytes right after that launch's
  allocations, before its frees — and a final entry after the last launch's frees.

Three ReLUs in a chain on 1 MiB give the trace 1, 2, 2, 1 MiB (2, 3, 3, 2 with the
input counted), as RAF's tests expect. The peak is the largest trace entry.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamplan.ir.graph import Graph
from streamplan.ir.includes import ACTIVATIONS, Includes
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.liveness import Liveness, liveness


@dataclass(frozen=True, slots=True)
class Event:
    """One host-order allocation or free (``kind`` "alloc" or "free")."""

    kind: str
    storage: str
    nbytes: int
    op: str
    stream: int
    launch_index: int


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """Live bytes right after ``op`` (launch ``launch_index``) allocated its outputs."""

    launch_index: int
    op: str
    stream: int
    live_bytes: int


@dataclass(frozen=True)
class HostOrderTrace:
    """The host-order trace: one entry per launch, then the live bytes at the end."""

    entries: tuple[TraceEntry, ...]
    final_bytes: int
    peak_bytes: int
    peak_launch_index: int  # -1 for an empty schedule
    includes: Includes

    def trace_bytes(self) -> list[int]:
        """Per-launch live bytes followed by the final entry (RAF's trace)."""
        return [e.live_bytes for e in self.entries] + [self.final_bytes]

    def to_dict(self) -> dict:
        return {
            "host_order_peak_bytes": self.peak_bytes,
            "peak_launch_index": self.peak_launch_index,
            "trace": [
                {"launch_index": e.launch_index, "op": e.op, "stream": e.stream, "live_bytes": e.live_bytes}
                for e in self.entries
            ],
            "final_bytes": self.final_bytes,
            "includes": self.includes.describe(),
        }

    def lines(self, max_launches: int | None = None) -> list[str]:
        """One line per launch; with ``max_launches``, only that many around the peak, and a line
        saying how many launches each side left out."""
        mib = 1 << 20
        out = [f"host-order trace ({self.includes.describe()}), MiB:"]
        entries = list(self.entries)
        lo, hi = 0, len(entries)
        if max_launches is not None and len(entries) > max_launches:
            at = next((i for i, e in enumerate(entries) if e.launch_index == self.peak_launch_index), 0)
            lo = max(0, min(at - max_launches // 2, len(entries) - max_launches))
            hi = lo + max_launches
        if lo:
            out.append(f"  ... {lo} launch{'es' if lo > 1 else ''} before")
        for e in entries[lo:hi]:
            mark = "  <- peak" if e.launch_index == self.peak_launch_index else ""
            out.append(f"  {e.launch_index:5d} @s{e.stream} {e.op:<24} {e.live_bytes / mib:10.3f}{mark}")
        if hi < len(entries):
            out.append(f"  ... {len(entries) - hi} launch{'es' if len(entries) - hi > 1 else ''} after")
        out.append(f"  {'end':>5} {'':27} {self.final_bytes / mib:10.3f}")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def events_from_liveness(live: Liveness, schedule: StreamSchedule) -> list[Event]:
    """Host-order events for an already computed ``Liveness``."""
    lt = live.lifetimes
    created: dict[int, list] = {}  # by launch index
    freed: dict[int, list] = {}
    events: list[Event] = []
    for life, birth, death in zip(live.lives, lt.birth, lt.death, strict=True):
        if life.creator is None:
            events.append(Event("alloc", life.storage, life.nbytes, "", -1, -1))
            continue
        created.setdefault(birth, []).append(life)
        if not life.persistent:
            freed.setdefault(death, []).append(life)
    for i, op in enumerate(schedule.launch_order):
        s = schedule.streams[op]
        for life in created.get(i, ()):
            events.append(Event("alloc", life.storage, life.nbytes, op, s, i))
        for life in freed.get(i, ()):
            events.append(Event("free", life.storage, life.nbytes, op, s, i))
    return events


def host_order_events(
    graph: Graph, schedule: StreamSchedule, *, includes: Includes = ACTIVATIONS
) -> list[Event]:
    """Allocation and free events in host launch order (see the module docstring)."""
    live = liveness(graph, schedule, includes=includes)
    return events_from_liveness(live, schedule)


def trace_from_liveness(live: Liveness, schedule: StreamSchedule) -> HostOrderTrace:
    """The host-order trace for an already computed ``Liveness``."""
    import numpy as np

    lt, uses = live.lifetimes, live.uses
    n = len(schedule.launch_order)
    made = uses.creator >= 0
    freed = made & ~uses.persistent
    allocs = np.zeros(n + 1, dtype=np.int64)
    frees = np.zeros(n + 1, dtype=np.int64)
    np.add.at(allocs, np.array(lt.birth, dtype=np.int64)[made], uses.nbytes[made])
    np.add.at(frees, np.array(lt.death, dtype=np.int64)[freed], uses.nbytes[freed])
    resident = int(uses.nbytes[~made].sum())
    # live bytes at launch i: after its allocations, before its frees
    at_launch = resident + np.cumsum(allocs[:n]) - np.concatenate(([0], np.cumsum(frees[: n - 1])))
    values = at_launch.tolist()
    streams = schedule.streams
    entries = tuple(TraceEntry(i, op, streams[op], values[i]) for i, op in enumerate(schedule.launch_order))
    if n:
        peak_at = int(np.argmax(at_launch))
        peak = values[peak_at]
        final = values[-1] - int(frees[n - 1])
    else:
        peak, peak_at, final = resident, -1, resident
    return HostOrderTrace(entries, final, peak, peak_at, live.includes)


def host_order_trace(
    graph: Graph, schedule: StreamSchedule, *, includes: Includes = ACTIVATIONS
) -> HostOrderTrace:
    """The per-launch host-order trace and its peak."""
    live = liveness(graph, schedule, includes=includes)
    return trace_from_liveness(live, schedule)


def host_order_peak_bytes(graph: Graph, schedule: StreamSchedule, *, includes: Includes = ACTIVATIONS) -> int:
    """Peak of the host-order trace, in bytes."""
    return host_order_trace(graph, schedule, includes=includes).peak_bytes
