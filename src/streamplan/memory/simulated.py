"""Live bytes over time along a timeline (``docs/memory.md``, figure 3).

A storage is allocated when its creator starts and freed when the last of its users
ends (outputs and resident storages never). Spans are half-open ``[start, end)``:
at one instant, ops that end there free first, then ops that start there allocate,
so ops ordered back to back are never counted as overlapping. A zero-length op
starts and ends in launch order after the positive-length ops ending at that instant.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamplan.cost.timeline import Timeline
from streamplan.errors import ScheduleError
from streamplan.ir.graph import Graph
from streamplan.ir.includes import ACTIVATIONS, Includes
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.liveness import Liveness, liveness


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
    live: Liveness,
    order: list[str],
    start: dict[str, float],
    end: dict[str, float],
    *,
    samples: bool = True,
) -> _Step:
    """Live bytes along explicit op start/end times; ``order`` breaks ties (launch order)."""
    index = live.hb.launch_index
    launch = np.array([index[op] for op in order], dtype=np.int64)
    s = np.array([start[op] for op in order], dtype=np.float64)
    e = np.array([end[op] for op in order], dtype=np.float64)
    return sweep_arrays(live, order, launch, s, e, samples=samples)


def sweep_arrays(
    live: Liveness,
    order: list[str],
    launch: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    *,
    samples: bool = True,
) -> _Step:
    """``sweep_live_bytes`` on arrays: ``order[r]`` has launch index ``launch[r]`` and runs
    from ``start[r]`` to ``end[r]``.

    Events sort by (time, starts after ends, rank, start before end): a zero-length op
    starts and ends in rank order after the ops ending at its instant. A storage is
    allocated at its creator's start event and freed at the last end event of its
    users, so the live bytes after each event are one cumulative sum.
    """
    n = len(order)
    uses = live.uses
    ranks = np.arange(n, dtype=np.int64)
    t = np.concatenate((start, end))
    kind = np.concatenate((np.ones(n, dtype=np.int8), np.where(end > start, 0, 1).astype(np.int8)))
    rank = np.concatenate((ranks, ranks))
    is_end = np.concatenate((np.zeros(n, dtype=np.int8), np.ones(n, dtype=np.int8)))
    perm = np.lexsort((is_end, rank, kind, t))
    pos = np.empty(2 * n, dtype=np.int64)
    pos[perm] = np.arange(2 * n, dtype=np.int64)
    rank_of = np.empty(n, dtype=np.int64)
    rank_of[launch] = ranks
    start_pos, end_pos = pos[:n], pos[n:]

    made = uses.creator >= 0
    alloc_at = np.full(len(made), -1, dtype=np.int64)
    alloc_at[made] = start_pos[rank_of[uses.creator[made]]]
    freeable = made & ~uses.persistent
    owner = np.repeat(np.arange(len(made), dtype=np.int64), np.diff(uses.start))
    free_at = np.full(len(made), -1, dtype=np.int64)
    if len(owner):
        np.maximum.at(free_at, owner, end_pos[rank_of[uses.users]])
    free_at[~freeable] = 2 * n  # never freed
    delta = np.zeros(2 * n + 1, dtype=np.int64)
    np.add.at(delta, alloc_at[made], uses.nbytes[made])
    np.subtract.at(delta, free_at[freeable], uses.nbytes[freeable])
    resident = int(uses.nbytes[~made].sum())
    cum = resident + np.cumsum(delta[: 2 * n])

    sorted_end = is_end[perm]
    starts = np.nonzero(sorted_end == 0)[0]
    t_sorted = t[perm]
    if len(starts):
        k = int(np.argmax(cum[starts]))
        peak_at = int(starts[k])
        peak, peak_t = int(cum[peak_at]), float(t_sorted[peak_at])
    else:
        peak, peak_t, peak_at = resident, 0.0, -1
    sample_list = tuple(zip(t_sorted.tolist(), cum.tolist(), strict=True)) if samples else ()

    rank_sorted = rank[perm][: peak_at + 1]
    ended = sorted_end[: peak_at + 1] == 1
    finished = tuple(order[r] for r in rank_sorted[ended].tolist())
    began = rank_sorted[~ended]
    running = tuple(order[r] for r in began[end_pos[began] > peak_at].tolist())
    alive = np.nonzero(made & (alloc_at <= peak_at) & (alloc_at >= 0) & (free_at > peak_at))[0]
    alive = alive[np.argsort(alloc_at[alive], kind="stable")]
    lives = live.lives
    live_names = tuple(lives[i].storage for i in np.nonzero(~made)[0].tolist()) + tuple(
        lives[i].storage for i in alive.tolist()
    )
    return _Step(peak, peak_t, sample_list, live_names, finished, running)


def simulated_memory(
    graph: Graph,
    schedule: StreamSchedule,
    timeline: Timeline,
    *,
    includes: Includes = ACTIVATIONS,
    live: Liveness | None = None,
) -> SimulatedMemory:
    """Live bytes along ``timeline`` (e.g. from ``streamplan.cost.simulate.simulate``)."""
    if live is None:
        live = liveness(graph, schedule, includes=includes)
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
    includes: Includes = ACTIVATIONS,
) -> int:
    """Peak live bytes along ``timeline``."""
    return simulated_memory(graph, schedule, timeline, includes=includes).peak_bytes
