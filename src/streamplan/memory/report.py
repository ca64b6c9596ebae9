"""``analyze_memory``: every memory figure of one schedule in one frozen report (``docs/memory.md``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streamplan.cost.timeline import Timeline
from streamplan.ir.graph import Graph
from streamplan.ir.includes import ACTIVATIONS, Includes
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.arena import ArenaPlan, plan_arena
from streamplan.memory.host_order import HostOrderTrace, trace_from_liveness
from streamplan.memory.launch_time import LaunchTimeMemory, held_peak
from streamplan.memory.liveness import Liveness, liveness
from streamplan.memory.simulated import SimulatedMemory, simulated_memory
from streamplan.memory.worst_case import DEFAULT_TIME_LIMIT_S, WorstCasePeak, worst_case_peak
from streamplan.progress import ProgressFn, no_progress

if TYPE_CHECKING:
    from streamplan.memory.allocators.op_memory import OpMemory
    from streamplan.memory.allocators.report import AllocatorReport

MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class AllocatorPeaks:
    """What the ``torch-cuda`` replay predicts: ``max_memory_allocated`` and ``max_memory_reserved``."""

    allocated_peak_bytes: int
    reserved_peak_bytes: int

    def to_dict(self) -> dict[str, int]:
        return {
            "allocated_peak_bytes": self.allocated_peak_bytes,
            "reserved_peak_bytes": self.reserved_peak_bytes,
        }


@dataclass(frozen=True)
class MemoryReport:
    """Host-order, worst-case, simulated, allocator and static-arena figures of one schedule.

    All figures are bytes and count what ``includes`` says (activations always).
    ``torch_cuda`` is None when the allocator models are unavailable.
    """

    graph: str
    policy: str
    host_order: HostOrderTrace
    worst_case: WorstCasePeak
    simulated: SimulatedMemory | None
    arena: ArenaPlan
    torch_cuda: AllocatorPeaks | None
    includes: Includes
    device_memory_bytes: int | None = None
    launch_time: LaunchTimeMemory | None = None  # held at host launch (run-ahead, record_stream)

    @property
    def host_order_peak_bytes(self) -> int:
        return self.host_order.peak_bytes

    @property
    def simulated_peak_bytes(self) -> int | None:
        return None if self.simulated is None else self.simulated.peak_bytes

    def to_dict(self) -> dict[str, Any]:
        wc = self.worst_case
        return {
            "graph": self.graph,
            "policy": self.policy,
            "host_order_peak_bytes": self.host_order.peak_bytes,
            "worst_case_peak_bytes": {"lower": wc.lower_bytes, "upper": wc.upper_bytes, "exact": wc.exact},
            "simulated_peak_bytes": self.simulated_peak_bytes,
            "torch_cuda": None if self.torch_cuda is None else self.torch_cuda.to_dict(),
            "arena_bytes": self.arena.arena_bytes,
            "arena_lower_bound_bytes": self.arena.lower_bound_bytes,
            "arena_lower_bound_exact": self.arena.lower_bound_exact,
            "device_memory_bytes": self.device_memory_bytes,
            "includes": self.includes.to_dict(),
            **({"launch_time": self.launch_time.to_dict()} if self.launch_time is not None else {}),
        }

    def lines(self) -> list[str]:
        wc = self.worst_case
        if wc.exact:
            worst = f"{wc.lower_bytes / MIB:10.3f} MiB  (exact, {wc.method})"
        else:
            worst = (
                f"[{wc.lower_bytes / MIB:.3f}, {wc.upper_bytes / MIB:.3f}] MiB  (proven bounds, {wc.method})"
            )
        sim = "-" if self.simulated is None else f"{self.simulated.peak_bytes / MIB:10.3f} MiB"
        out = [
            f"memory of {self.graph} under {self.policy} ({self.includes.describe()}):",
            f"  host-order peak      {self.host_order.peak_bytes / MIB:10.3f} MiB",
            f"  worst-case peak      {worst}",
            f"  simulated peak       {sim}",
        ]
        if not wc.exact:
            out.insert(
                3,
                "                       (an interval: some timing reaches the first figure and none can "
                "exceed the second; the solver stopped before closing the gap, a longer time limit can)",
            )
        if self.torch_cuda is not None:
            out.append(
                f"  torch-cuda allocated {self.torch_cuda.allocated_peak_bytes / MIB:10.3f} MiB,"
                f" reserved {self.torch_cuda.reserved_peak_bytes / MIB:.3f} MiB"
            )
        if self.launch_time is not None and self.launch_time.communicates:
            out += self.launch_time.lines()
        bound = "" if self.arena.lower_bound_exact else " (proven bound)"
        out.append(
            f"  static arena         {self.arena.arena_bytes / MIB:10.3f} MiB"
            f"  (lower bound {self.arena.lower_bound_bytes / MIB:.3f} MiB{bound})"
        )
        if self.device_memory_bytes is not None and wc.upper_bytes > self.device_memory_bytes:
            out.append(
                f"  warning: some timing may need more than the device's "
                f"{self.device_memory_bytes / MIB:.1f} MiB"
            )
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def analyze_memory(
    graph: Graph,
    schedule: StreamSchedule,
    *,
    timeline: Timeline | None = None,
    includes: Includes = ACTIVATIONS,
    device_memory_bytes: int | None = None,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    op_memory: OpMemory | None = None,
    progress: ProgressFn = no_progress,
    live: Liveness | None = None,
    torch_cuda: AllocatorReport | None = None,
) -> MemoryReport:
    """Every memory figure of ``schedule`` (simulated only with a ``timeline``).

    ``op_memory`` (measured op scratch and stream workspaces) goes into the
    ``torch-cuda`` replay only: the other figures count the graph's tensors.
    ``progress`` hears of each figure as it starts (the worst case also of its search).
    ``live`` reuses a liveness already computed for these ``includes``; ``torch_cuda`` a
    ``torch-cuda`` replay already made of this schedule (its peaks are the report's).
    """
    progress("liveness", None, None)
    if live is None or live.includes != includes:
        live = liveness(graph, schedule, includes=includes)
    progress("host-order peak", None, None)
    host = trace_from_liveness(live, schedule)
    progress("static arena", None, None)
    arena = plan_arena(graph, schedule, live=live)
    # Every instant's live set is pairwise co-live, so the arena bound caps the worst case.
    cap = arena.lower_bound_bytes if arena.lower_bound_exact else arena.arena_bytes
    progress("worst-case peak", None, None)
    worst = worst_case_peak(
        graph, schedule, live=live, upper_bound_bytes=cap, time_limit_s=time_limit_s, progress=progress
    )
    if not arena.lower_bound_exact and worst.lower_bytes > arena.lower_bound_bytes:
        arena = dataclasses.replace(arena, lower_bound_bytes=worst.lower_bytes, bound_storages=worst.live)
    sim = None
    if timeline is not None:
        progress("simulated peak", None, None)
        sim = simulated_memory(graph, schedule, timeline, live=live)
    if torch_cuda is None:
        progress("torch-cuda replay", None, None)
        peaks = _torch_cuda(graph, schedule, timeline, live, device_memory_bytes, op_memory)
    else:
        peaks = AllocatorPeaks(torch_cuda.allocated_peak_bytes, torch_cuda.reserved_peak_bytes)
    progress("memory at host launch", None, None)
    launch = launch_time_memory(graph, schedule, timeline, live, op_memory)
    return MemoryReport(
        graph.name,
        schedule.policy,
        host,
        worst,
        sim,
        arena,
        peaks,
        live.includes,
        device_memory_bytes,
        launch,
    )


def launch_time_memory(
    graph: Graph,
    schedule: StreamSchedule,
    timeline: Timeline | None,
    live: Liveness,
    op_memory: OpMemory | None = None,
) -> LaunchTimeMemory:
    """Held bytes at host launch: worst case over timings, along ``timeline``, and the
    ``torch-cuda`` replay under maximal run-ahead (``memory.launch_time``)."""
    from streamplan.ir.collectives import is_collective
    from streamplan.memory.allocators import replay

    rep = replay(
        graph,
        schedule,
        model="torch-cuda",
        includes=live.includes,
        op_memory=op_memory,
        live=live,
        run_ahead=True,
    )
    return LaunchTimeMemory(
        worst=held_peak(live, schedule),
        simulated=None if timeline is None else held_peak(live, schedule, timeline=timeline),
        torch_cuda_worst={
            "allocated_peak_bytes": rep.allocated_peak_bytes,
            "reserved_peak_bytes": rep.reserved_peak_bytes,
            "held_peak_bytes": rep.held_peak_bytes,
        },
        host_waits=len(schedule.host_waits),
        record_stream=schedule.record_stream,
        communicates=bool(schedule.host_waits) or any(is_collective(n) for n in graph.nodes),
    )


def _torch_cuda(
    graph: Graph,
    schedule: StreamSchedule,
    timeline: Timeline | None,
    live: Liveness,
    device_memory_bytes: int | None,
    op_memory: OpMemory | None,
) -> AllocatorPeaks | None:
    try:
        from streamplan.memory.allocators import replay
    except ImportError:
        return None
    rep = replay(
        graph,
        schedule,
        model="torch-cuda",
        timeline=timeline,
        includes=live.includes,
        device_memory_bytes=device_memory_bytes,
        op_memory=op_memory,
        live=live,
    )
    return AllocatorPeaks(rep.allocated_peak_bytes, rep.reserved_peak_bytes)
