"""Why a schedule's memory peaks where it does (the ``explain`` command's result)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from streamplan.app.analysis import PolicyRun, run_policy
from streamplan.app.fusion_note import FusionNote, fusion_note
from streamplan.fusion.plan import FusedSchedule, schedule_same_kernels
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.explain import PeakComparison, PeakExplanation, compare_peaks, explain_peak
from streamplan.memory.host_order import host_order_peak_bytes
from streamplan.memory.liveness import liveness
from streamplan.memory.report import analyze_memory
from streamplan.memory.simulated import simulated_memory
from streamplan.memory.worst_case import worst_case_peak
from streamplan.schedule.context import DEFAULT_CONTEXT, ScheduleContext


@dataclass(frozen=True)
class SimulatedNote:
    """Where the simulated peak falls between the host-order and worst-case figures, and why."""

    simulated_peak_bytes: int
    peak_ms: float
    bound: str  # "launch-bound" or "kernel-bound"
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "simulated_peak_bytes": self.simulated_peak_bytes,
            "peak_ms": self.peak_ms,
            "bound": self.bound,
            "text": self.text,
        }


@dataclass(frozen=True)
class ExplainResult:
    """The peaks of one schedule explained (``explanation``), or compared with another's
    (``comparison``, whose ``other`` explains the chosen schedule), plus notes."""

    run: PolicyRun
    explanation: PeakExplanation | PeakComparison
    simulated: SimulatedNote
    serial_peak_note: str | None
    fusion: FusionNote | None = None  # when ops were fused before scheduling

    def to_dict(self) -> dict[str, Any]:
        d = self.explanation.to_dict()
        d["simulated"] = self.simulated.to_dict()
        d["serial_peak_note"] = self.serial_peak_note
        d["fusion_mode"] = self.run.fusion_mode
        if self.fusion is not None:
            d["fusion"] = self.fusion.to_dict()
        return d


def explain_policy(
    graph: Graph, policy: str, ctx: ScheduleContext | None = None, *, vs: str | None = "sequential"
) -> ExplainResult:
    """Explain ``policy``'s peaks on ``graph``; with ``vs``, compare them with that policy's
    schedule of the same kernels. Fused first (``ctx.fusion``), it also says which kernels
    merged parallel branches and what the stream-aware order keeps."""
    ctx = ctx or DEFAULT_CONTEXT
    run = run_policy(graph, policy, ctx)
    base = None
    if vs and vs != policy:
        planned = FusedSchedule(run.scheduled_graph(graph), run.schedule, run.fusion)
        base = schedule_same_kernels(graph, planned, vs, ctx)
    result = explain_run(graph, run, ctx, vs_schedule=base)
    return dataclasses.replace(result, fusion=fusion_note(graph, run, ctx))


def explain_run(
    graph: Graph,
    run: PolicyRun,
    ctx: ScheduleContext | None = None,
    *,
    vs_schedule: StreamSchedule | None = None,
) -> ExplainResult:
    """``explain_policy`` for a schedule in hand (a saved one, say)."""
    ctx = ctx or DEFAULT_CONTEXT
    ctx.progress("explaining the peaks", None, None)
    graph = run.scheduled_graph(graph)  # the kernels, when the run was fused
    s = run.schedule
    if vs_schedule is not None:
        result: PeakExplanation | PeakComparison = compare_peaks(graph, vs_schedule, s)
    else:
        result = explain_peak(graph, s, report=analyze_memory(graph, s, timeline=run.timeline))
    return ExplainResult(
        run=run,
        explanation=result,
        simulated=simulated_note(graph, run, ctx.cost.device_name),
        serial_peak_note=serial_peak_note(graph, s),
    )


def serial_peak_note(graph: Graph, schedule: StreamSchedule) -> str | None:
    """Say so when the worst-case peak happens where nothing can run concurrently: then no
    stream policy can change it (the first explanation in the seed discussion)."""
    live = liveness(graph, schedule)
    wc = worst_case_peak(graph, schedule, live=live)
    if not wc.running or schedule.num_streams < 2:
        return None
    others = schedule.launch_order
    if any(live.hb.concurrent(u, v) for u in wc.running for v in others if v != u):
        return None
    return (
        f"note: the peak occurs while {', '.join(wc.running)} runs, and no op may run concurrently with "
        f"{'it' if len(wc.running) == 1 else 'them'}: the parallel parts of {graph.name} are not where memory "
        "peaks, so no stream policy changes this peak (only a better order, a smaller batch or "
        "rematerialization can)."
    )


def simulated_note(graph: Graph, run: PolicyRun, device: str) -> SimulatedNote:
    """Where the simulated peak falls, which ops overlap there, and whether launches or kernels
    dominate the predicted timeline (which decides how close it gets to the worst case)."""
    schedule, timeline = run.schedule, run.timeline
    mem = simulated_memory(graph, schedule, timeline)
    worst = worst_case_peak(graph, schedule)
    host = host_order_peak_bytes(graph, schedule)
    busy = sum(timeline.stream_busy_ms.values())
    launch_ms = max((sp.launch_ms for sp in timeline.spans), default=0.0)
    kernels_ms = max(timeline.stream_busy_ms.values(), default=0.0)
    bound = "launch-bound" if launch_ms >= kernels_ms else "kernel-bound"
    running = ", ".join(mem.running_at_peak) or "nothing"
    if schedule.num_streams < 2:
        where = "one stream: nothing overlaps, so every figure agrees"
    elif mem.peak_bytes >= worst.upper_bytes:
        where = f"this timing reaches the worst case: {running} overlap at the peak"
    elif mem.peak_bytes <= host:
        where = (
            "in this timing the branches do not overlap where memory peaks, so it stays at the "
            "host-order figure; slower kernels or faster launches would raise it"
        )
    else:
        where = f"between the host-order and worst-case figures ({running} overlap at the peak)"
    why = (
        "the host issues launches no faster than the kernels run, so streams often sit idle and "
        "branches overlap only briefly"
        if bound == "launch-bound"
        else "kernels take longer than launching them, so queued branches run side by side"
    )
    text = (
        f"simulated on {device}: peak {mem.peak_bytes / (1 << 20):.3f} MiB at {mem.peak_ms:.4f} ms; {where}. "
        f"The timeline is {bound} (last launch at {launch_ms:.4f} ms, busiest stream {kernels_ms:.4f} ms, "
        f"total kernel time {busy:.4f} ms): {why}."
    )
    return SimulatedNote(mem.peak_bytes, mem.peak_ms, bound, text)
