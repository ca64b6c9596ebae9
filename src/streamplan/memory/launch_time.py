"""Memory at host launch time: what the caching allocator holds while the host runs ahead.

PyTorch's caching allocator hands a tensor its block when the host *launches* the op that
makes it, and takes the block back when the host drops the last reference, right after
launching the last user (the host-order replay, ``docs/memory.md``). The host never waits
for the device unless told to, so it can be far ahead: a block the device has not even
started to fill is already allocated. A block used on streams other than the one it was
allocated on is, with ``record_stream``, not reusable when the host frees it: it is *held*
until the work those streams had queued at the free has finished (an event recorded at
the free completes). So what the allocator holds at a launch,

    held bytes = bytes allocated (host order) + bytes freed but held by ``record_stream``,

depends on how far the device lags. Two figures:

- **on the simulated timeline**: a held block comes back at the simulated end of the ops
  its events follow, each launch at its simulated host time (host waits included);
- **worst case over every timing**: the only thing that bounds the lag is the schedule's
  host waits (the host blocks on an event before a launch). At launch i the device must
  have finished what the host waited for up to i, and what precedes that; nothing else.
  The timing where the device finishes exactly that (*maximal run-ahead*) is realisable,
  and held bytes only grow at allocations, so it is the worst case at every launch at
  once: the figure is exact. With no host waits nothing comes back before the end
  (*unbounded run-ahead*): every held block stays held.

Without ``record_stream`` (the schedule orders reuse with event waits, checked by the
verifier) a free returns the block at once and held bytes are the host-order figure.
Held bytes count exact sizes; the ``torch-cuda`` replay under the same timings
(``allocators.replay(..., run_ahead=True)``) adds rounding, pools and segments.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from streamplan.cost.timeline import Timeline
from streamplan.errors import ScheduleError
from streamplan.ir.frozen import freeze
from streamplan.ir.includes import Includes
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.liveness import Liveness

RUN_AHEAD, SIMULATED = "run-ahead", "simulated"
MIB = 1 << 20


class HostKnowledge:
    """From which launch on the host knows an op has finished (host waits only)."""

    def __init__(self, live: Liveness, schedule: StreamSchedule):
        hb = live.hb
        self.slot, self.index = hb.slot, hb.index
        host = schedule.host_waits_before()
        clock = [0] * hb.num_slots
        self._at: list[int] = []  # launch indices where the host's knowledge grows
        self._known: list[list[int]] = [[] for _ in range(hb.num_slots)]  # per slot, at each of those
        for i, op in enumerate(schedule.launch_order):
            waited = host.get(op)
            if not waited:
                continue
            for u in waited:
                clock = [max(a, b) for a, b in zip(clock, hb.after[u], strict=True)]
            self._at.append(i)
            for t in range(hb.num_slots):
                self._known[t].append(clock[t])

    def first_launch(self, op: str) -> float:
        """The first launch before which the host has waited for ``op`` (or something after it
        on the device); ``inf`` when it never does."""
        known = self._known[self.slot[op]]
        k = bisect.bisect_left(known, self.index[op])
        return float(self._at[k]) if k < len(known) else math.inf


@dataclass(frozen=True)
class HeldPeak:
    """The most bytes the allocator holds at one launch under one timing.

    ``allocated_bytes`` were allocated and not yet freed by the host at the peak,
    ``held_bytes`` freed but held back by ``record_stream`` (``held``: those storages);
    ``peak_bytes`` is their sum. ``timing`` is ``run-ahead`` (the worst case over every
    timing the host waits allow) or ``simulated``.
    """

    timing: str
    peak_bytes: int
    allocated_bytes: int
    held_bytes: int
    peak_launch_index: int
    peak_op: str
    held: tuple[str, ...]
    allocated: tuple[str, ...]
    includes: Includes

    def to_dict(self) -> dict:
        return {
            "timing": self.timing,
            "peak_bytes": self.peak_bytes,
            "allocated_bytes": self.allocated_bytes,
            "held_bytes": self.held_bytes,
            "peak_launch_index": self.peak_launch_index,
            "peak_op": self.peak_op,
            "held": list(self.held),
            "includes": self.includes.describe(),
        }

    def __str__(self) -> str:
        return (
            f"held at launch ({self.timing}) {self.peak_bytes / MIB:.3f} MiB at {self.peak_op or '-'}: "
            f"{self.allocated_bytes / MIB:.3f} allocated + {self.held_bytes / MIB:.3f} held by record_stream"
        )


def cross_stream_frees(live: Liveness, schedule: StreamSchedule) -> dict[str, tuple[str, ...]]:
    """For each storage whose free ``record_stream`` holds back, the ops its events follow:
    the last op launched (up to its free) on each other stream that used it."""
    if not schedule.record_stream:
        return {}
    streams = schedule.streams
    lt = live.lifetimes
    freed_at: dict[int, list[int]] = {}
    for k, (life, death) in enumerate(zip(live.lives, lt.death, strict=True)):
        if life.creator is not None and not life.persistent:
            freed_at.setdefault(death, []).append(k)
    out: dict[str, tuple[str, ...]] = {}
    last_on: dict[int, str] = {}
    for i, op in enumerate(schedule.launch_order):
        last_on[streams[op]] = op
        for k in freed_at.get(i, ()):
            life = live.lives[k]
            home = streams[life.creator]
            others = sorted({streams[u] for u in life.users} - {home})
            if others:
                out[life.storage] = tuple(last_on[s] for s in others)
    return out


def held_peak(live: Liveness, schedule: StreamSchedule, *, timeline: Timeline | None = None) -> HeldPeak:
    """Held bytes at their peak: on ``timeline`` when given, else the worst case over every
    timing the host waits allow (maximal run-ahead; see the module docstring)."""
    waits_on = cross_stream_frees(live, schedule)
    if timeline is None:
        host = HostKnowledge(live, schedule)

        def ready(ops: tuple[str, ...]) -> float:
            return max(host.first_launch(u) for u in ops)

        clock = [float(i) for i in range(len(schedule.launch_order))]
        timing = RUN_AHEAD
    else:
        spans = timeline.by_op()
        missing = [op for op in schedule.launch_order if op not in spans]
        if missing:
            raise ScheduleError(
                f"the timeline has no span for {missing[0]}",
                hint="simulate this schedule and pass its timeline",
            )

        def ready(ops: tuple[str, ...]) -> float:
            return max(spans[u].end_ms for u in ops)

        clock = [spans[op].launch_ms for op in schedule.launch_order]
        timing = SIMULATED
    return _replay(live, schedule, waits_on, ready, clock, timing)


def _replay(
    live: Liveness,
    schedule: StreamSchedule,
    waits_on: dict[str, tuple[str, ...]],
    ready: Callable[[tuple[str, ...]], float],
    clock: list[float],
    timing: str,
    stop_at: int | None = None,
) -> HeldPeak:
    """Allocate at launch, free after the last user's launch, hold cross-stream frees until
    ``ready`` (in ``clock``'s units); measure after each launch's allocations."""
    lt = live.lifetimes
    n = len(schedule.launch_order)
    allocs: list[list[int]] = [[] for _ in range(n)]
    frees: list[list[int]] = [[] for _ in range(n)]
    allocated = 0
    for k, (life, birth, death) in enumerate(zip(live.lives, lt.birth, lt.death, strict=True)):
        if life.creator is None:
            allocated += life.nbytes
            continue
        allocs[birth].append(k)
        if not life.persistent:
            frees[death].append(k)
    held = 0
    pending: list[tuple[float, int]] = []
    best, best_at = allocated, -1
    for i in range(n):
        while pending and pending[0][0] <= clock[i]:
            held -= live.lives[heapq.heappop(pending)[1]].nbytes
        for k in allocs[i]:
            allocated += live.lives[k].nbytes
        if stop_at == i:
            return _at_peak(live, schedule, i, pending, allocated, held, timing)
        if allocated + held > best:
            best, best_at = allocated + held, i
        for k in frees[i]:
            life = live.lives[k]
            allocated -= life.nbytes
            ops = waits_on.get(life.storage)
            if ops is not None:
                t = ready(ops)
                if t > clock[i]:  # not done by now: held back until its events complete
                    held += life.nbytes
                    heapq.heappush(pending, (t, k))
    if stop_at is None and best_at >= 0:
        return _replay(live, schedule, waits_on, ready, clock, timing, stop_at=best_at)
    resident = tuple(life.storage for life in live.lives if life.creator is None)
    return HeldPeak(timing, best, best, 0, -1, "", (), resident, live.includes)


def _at_peak(live, schedule, i, pending, allocated, held, timing) -> HeldPeak:
    """The peak's storages: allocated (born, not freed by launch i) and held back."""
    lt = live.lifetimes
    names = tuple(
        life.storage
        for life, birth, death in zip(live.lives, lt.birth, lt.death, strict=True)
        if birth <= i and (life.persistent or death >= i)
    )
    held_names = tuple(live.lives[k].storage for _, k in sorted(pending))
    return HeldPeak(
        timing,
        allocated + held,
        allocated,
        held,
        i,
        schedule.launch_order[i],
        held_names,
        names,
        live.includes,
    )


@dataclass(frozen=True)
class LaunchTimeMemory:
    """The figures of memory at host launch time for one schedule (module docstring).

    ``worst`` is the exact worst case of held bytes over every timing the host waits allow;
    ``simulated`` the same along the simulated timeline (None without one);
    ``torch_cuda_worst`` the ``torch-cuda`` replay under maximal run-ahead
    (``allocated_peak_bytes``, ``reserved_peak_bytes``, ``held_peak_bytes``). ``host_waits``
    and ``record_stream`` say what bounds the run-ahead; ``communicates`` whether the
    program has collectives or host waits (the programs where this is the question).
    """

    worst: HeldPeak
    simulated: HeldPeak | None
    torch_cuda_worst: Mapping[str, int] | None
    host_waits: int
    record_stream: bool
    communicates: bool

    def __post_init__(self) -> None:
        if self.torch_cuda_worst is not None:  # read-only, so the figures are a hashable value
            object.__setattr__(self, "torch_cuda_worst", freeze(self.torch_cuda_worst))

    def to_dict(self) -> dict:
        return {
            "held_worst_case": self.worst.to_dict(),
            "held_simulated": None if self.simulated is None else self.simulated.to_dict(),
            "torch_cuda_run_ahead": None if self.torch_cuda_worst is None else dict(self.torch_cuda_worst),
            "host_waits": self.host_waits,
            "record_stream": self.record_stream,
        }

    def lines(self) -> list[str]:
        bound = (
            f"{self.host_waits} host waits bound the run-ahead"
            if self.host_waits
            else "no host waits: unbounded run-ahead"
        )
        frees = "record_stream holds cross-stream frees" if self.record_stream else "frees ordered by waits"
        out = [f"  at host launch ({bound}; {frees}):"]
        w = self.worst
        out.append(
            f"    held, worst case   {w.peak_bytes / MIB:10.3f} MiB  ({w.allocated_bytes / MIB:.3f} allocated + "
            f"{w.held_bytes / MIB:.3f} held, at {w.peak_op or '-'}; exact)"
        )
        if self.simulated is not None:
            sim = self.simulated
            out.append(
                f"    held, simulated    {sim.peak_bytes / MIB:10.3f} MiB  ({sim.allocated_bytes / MIB:.3f} "
                f"allocated + {sim.held_bytes / MIB:.3f} held, at {sim.peak_op or '-'})"
            )
        if self.torch_cuda_worst is not None:
            t = self.torch_cuda_worst
            out.append(
                f"    torch-cuda, worst  {t['allocated_peak_bytes'] / MIB:10.3f} MiB allocated, "
                f"{t['reserved_peak_bytes'] / MIB:.3f} MiB reserved (maximal run-ahead)"
            )
        return out
