"""Why a schedule's memory peaks where it does (the ``explain`` command's result)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from streamplan.app.analysis import PolicyRun, run_policy
from streamplan.app.display import Shown
from streamplan.app.fusion_note import FusionNote, fusion_note
from streamplan.cost.bound import LatencyBound, latency_bound
from streamplan.cost.opcost import AnalyticCostModel
from streamplan.cost.overlap import CommOverlap, comm_overlap
from streamplan.cost.simulate import critical_path_ms, simulate
from streamplan.fusion.plan import FusedSchedule, schedule_same_kernels
from streamplan.ir.analysis import max_parallelism
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.breakdown import MemoryBreakdown, memory_breakdown
from streamplan.memory.comm_explain import CommPeakNote, comm_peak_note
from streamplan.memory.explain import PeakComparison, PeakExplanation, compare_peaks, explain_peak
from streamplan.memory.host_order import host_order_peak_bytes
from streamplan.memory.liveness import liveness
from streamplan.memory.report import MemoryReport, analyze_memory
from streamplan.memory.simulated import simulated_memory
from streamplan.memory.worst_case import worst_case_peak
from streamplan.schedule.context import DEFAULT_CONTEXT, ScheduleContext
from streamplan.schedule.registry import BASELINE_POLICY
from streamplan.schedule.verify import verify_schedule

LITTLE_GAIN = 1.15  # "no schedule beats sequential by more than a few percent" below this bound


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
class GraphsAlternative:
    """The same schedules simulated as one CUDA graph on the same device profile."""

    sequential_ms: float
    policy_ms: float
    bound_ms: float

    def to_dict(self) -> dict[str, float]:
        return {"sequential_ms": self.sequential_ms, "policy_ms": self.policy_ms, "bound_ms": self.bound_ms}


@dataclass(frozen=True)
class LatencyNote:
    """Why a schedule is (or is not) faster than sequential, with the numbers behind it.

    ``bound`` holds for every schedule under the context's cost model, so
    ``max_speedup`` (sequential over the bound) is the most any schedule can gain.
    """

    device: str
    cuda_graphs: bool
    policy: str
    sequential_ms: float
    policy_ms: float
    events: int
    bound: LatencyBound
    launch_per_kernel_ms: float
    max_width: int
    width_exact: bool
    critical_path_ms: float  # longest dependency chain of op times alone (no launches)
    graphs: GraphsAlternative | None  # with CUDA graphs, when not simulated with them already
    speedup_error: float | None = None  # the profile's typical relative error of a speedup
    latency_error: float | None = None  # ... and of a latency (None: unknown, or op times measured)

    @property
    def speedup_uncertainty(self) -> float | None:
        """± on ``speedup`` (one typical error), when the profile knows how wrong it tends to be."""
        return None if self.speedup_error is None else self.speedup * self.speedup_error

    @property
    def verdict(self) -> str:
        """``gain`` or ``loss`` when the uncertainty cannot flip it, else ``may be a loss`` /
        ``may be a gain`` (``gain``/``loss`` when the profile gives no uncertainty)."""
        s, u = self.speedup, self.speedup_uncertainty or 0.0
        if s >= 1.0:
            return "may be a loss" if s - u < 1.0 else "gain"
        return "may be a gain" if s + u > 1.0 else "loss"

    @property
    def max_speedup(self) -> float:
        return self.sequential_ms / self.bound.bound_ms if self.bound.bound_ms > 0 else 1.0

    @property
    def speedup(self) -> float:
        return self.sequential_ms / self.policy_ms if self.policy_ms > 0 else 1.0

    @property
    def launch_bound(self) -> bool:
        """The host's launches take most of what one stream spends on the device."""
        return not self.cuda_graphs and self.bound.launch_total_ms >= 0.8 * self.bound.kernel_ms

    @property
    def little_to_gain(self) -> bool:
        """No schedule can beat sequential by more than a few percent (or none found does)."""
        return self.max_speedup < LITTLE_GAIN or self.speedup < 1.0 + (LITTLE_GAIN - 1.0) / 3

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "cuda_graphs": self.cuda_graphs,
            "policy": self.policy,
            "sequential_ms": self.sequential_ms,
            "policy_ms": self.policy_ms,
            "speedup": self.speedup,
            "bound": self.bound.to_dict(),
            "max_speedup": self.max_speedup,
            "launch_bound": self.launch_bound,
            "launch_per_kernel_ms": self.launch_per_kernel_ms,
            "max_parallel_ops": self.max_width,
            "critical_path_ms": self.critical_path_ms,
            "critical_path_fraction": self.critical_path_ms / self.bound.kernel_ms
            if self.bound.kernel_ms
            else 1.0,
            "little_to_gain": self.little_to_gain,
            "speedup_uncertainty": self.speedup_uncertainty,
            "latency_error": self.latency_error,
            "verdict": self.verdict,
            "with_cuda_graphs": None if self.graphs is None else self.graphs.to_dict(),
        }


@dataclass(frozen=True)
class ExplainResult(Shown):
    """The peaks of one schedule explained (``explanation``), or compared with another's
    (``comparison``, whose ``other`` explains the chosen schedule), plus notes, and the
    latency part (``latency``): how close any schedule can get, and why. For a training
    step, ``breakdowns`` split each schedule's peaks by category (the compared schedule's first)."""

    run: PolicyRun
    explanation: PeakExplanation | PeakComparison
    simulated: SimulatedNote
    serial_peak_note: str | None
    breakdowns: tuple[MemoryBreakdown, ...] = ()
    latency: LatencyNote | None = None
    fusion: FusionNote | None = None  # when ops were fused before scheduling
    comm: CommPeakNote | None = None  # collective buffers at the peak held at host launch
    overlap: CommOverlap | None = None  # communication hidden behind compute on the timeline

    def __str__(self) -> str:
        lines = list(self.explanation.lines())
        lines.append(self.simulated.text)
        if self.serial_peak_note:
            lines.append(f"note: {self.serial_peak_note}")
        if self.latency is not None:
            lt = self.latency
            lines.append(
                f"latency: {lt.policy} {lt.policy_ms:.3f} ms against sequential {lt.sequential_ms:.3f} ms "
                f"({lt.speedup:.2f}x); no schedule beats {lt.bound.bound_ms:.3f} ms ({lt.max_speedup:.2f}x)"
            )
        return "\n".join(line for line in lines if line)

    def to_dict(self) -> dict[str, Any]:
        d = self.explanation.to_dict()
        d["simulated"] = self.simulated.to_dict()
        d["serial_peak_note"] = self.serial_peak_note
        if self.breakdowns:
            d["memory_breakdown"] = {b.policy: b.to_dict() for b in self.breakdowns}
        d["latency"] = None if self.latency is None else self.latency.to_dict()
        d["fusion_mode"] = self.run.fusion_mode
        if self.fusion is not None:
            d["fusion"] = self.fusion.to_dict()
        if self.comm is not None:
            d["communication"] = {
                **self.comm.to_dict(),
                "overlap": None if self.overlap is None else self.overlap.to_dict(),
            }
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
    report = analyze_memory(
        graph, s, timeline=run.timeline, time_limit_s=ctx.time_limit_s, progress=ctx.progress
    )
    breakdowns: tuple[MemoryBreakdown, ...] = ()
    if vs_schedule is not None:
        # both sides simulated on the same cost model, so both report a simulated peak
        verify_schedule(graph, vs_schedule)
        base_timeline = simulate(graph, vs_schedule, ctx.cost)
        base_report = analyze_memory(
            graph, vs_schedule, timeline=base_timeline, time_limit_s=ctx.time_limit_s, progress=ctx.progress
        )
        result: PeakExplanation | PeakComparison = compare_peaks(
            graph, vs_schedule, s, base_report=base_report, other_report=report
        )
        if graph.is_training:
            breakdowns = (
                memory_breakdown(graph, vs_schedule, report=base_report),
                memory_breakdown(graph, s, report=report),
            )
    else:
        result = explain_peak(graph, s, report=report)
        if graph.is_training:
            breakdowns = (memory_breakdown(graph, s, report=report),)
    comm = None
    if report.launch_time is not None and report.launch_time.communicates:
        comm = comm_peak_note(graph, s, report.launch_time.worst)
    return ExplainResult(
        run=run,
        explanation=result,
        simulated=simulated_note(graph, run, ctx.cost.device_name, report=report),
        serial_peak_note=serial_peak_note(graph, s, report=report),
        breakdowns=breakdowns,
        latency=latency_note(graph, run, ctx),
        comm=comm,
        overlap=comm_overlap(graph, run.timeline) if comm is not None else None,
    )


def latency_note(graph: Graph, run: PolicyRun, ctx: ScheduleContext) -> LatencyNote:
    """The latency part of ``explain``: the bound any schedule obeys, where it comes from
    (host launches, the dependency chain, the device's capacity), the graph's parallelism,
    and what CUDA graphs would change on the same profile."""
    ctx.progress("explaining the latency", None, None)
    cost = ctx.cost
    # ``graph`` is what the run schedules (the kernels, when fused): no second fusion here
    seq = run_policy(graph, BASELINE_POLICY, ctx.replace(fusion="none"))
    bound = latency_bound(graph, cost)
    width = max_parallelism(graph)
    kernels = max(1, bound.kernels)
    graphs = None
    if not ctx.cuda_graphs and isinstance(cost, AnalyticCostModel) and cost.device.has_cuda_graphs:
        with_graphs = AnalyticCostModel(cost.device, cuda_graphs=True)
        graphs = GraphsAlternative(
            sequential_ms=simulate(graph, seq.schedule, with_graphs).makespan_ms,
            policy_ms=simulate(graph, run.schedule, with_graphs).makespan_ms,
            bound_ms=latency_bound(graph, with_graphs).bound_ms,
        )
    return LatencyNote(
        device=cost.device_name,
        cuda_graphs=ctx.cuda_graphs,
        policy=run.policy,
        sequential_ms=seq.makespan_ms,
        policy_ms=run.makespan_ms,
        events=run.schedule.num_events,
        bound=bound,
        launch_per_kernel_ms=(bound.launch_total_ms / kernels) if not ctx.cuda_graphs else 0.0,
        max_width=width.width,
        width_exact=width.exact,
        critical_path_ms=critical_path_ms(graph, cost),
        graphs=graphs,
        speedup_error=cost.speedup_error,
        latency_error=cost.latency_error,
    )


def serial_peak_note(
    graph: Graph, schedule: StreamSchedule, *, report: MemoryReport | None = None
) -> str | None:
    """Say so when the worst-case peak happens where nothing can run concurrently: then no
    stream policy can change it (the first explanation in the seed discussion)."""
    live = liveness(graph, schedule)
    wc = report.worst_case if report is not None else worst_case_peak(graph, schedule, live=live)
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


def simulated_note(
    graph: Graph, run: PolicyRun, device: str, *, report: MemoryReport | None = None
) -> SimulatedNote:
    """Where the simulated peak falls, which ops overlap there, and whether launches or kernels
    dominate the predicted timeline (which decides how close it gets to the worst case)."""
    schedule, timeline = run.schedule, run.timeline
    mem = report.simulated if report is not None and report.simulated is not None else None
    mem = mem or simulated_memory(graph, schedule, timeline)
    worst = report.worst_case if report is not None else worst_case_peak(graph, schedule)
    host = report.host_order_peak_bytes if report is not None else host_order_peak_bytes(graph, schedule)
    busy = sum(timeline.stream_busy_ms.values())
    launch_ms = max((sp.launch_ms for sp in timeline.spans), default=0.0)
    kernels_ms = max(timeline.stream_busy_ms.values(), default=0.0)
    bound = "launch-bound" if launch_ms >= kernels_ms else "kernel-bound"
    ops = mem.running_at_peak
    running = (
        "nothing runs at the peak"
        if not ops
        else f"{ops[0]} runs alone at the peak"
        if len(ops) == 1
        else f"{', '.join(ops)} overlap at the peak"
    )
    if schedule.num_streams < 2:
        where = "one stream: nothing overlaps, so every figure agrees"
    elif mem.peak_bytes >= worst.upper_bytes:
        where = f"this timing reaches the worst case: {running}"
    elif mem.peak_bytes <= host:
        where = (
            "in this timing the branches do not overlap where memory peaks, so it "
            + ("equals" if mem.peak_bytes == host else "stays below")
            + " the host-order figure; slower kernels or faster launches would raise it"
        )
    else:
        where = f"between the host-order and worst-case figures ({running})"
    if schedule.num_streams < 2:  # one queue: nothing runs side by side whatever the pace
        why = (
            "the host issues launches no faster than the kernels run, so the stream often sits idle"
            if bound == "launch-bound"
            else "kernels take longer than launching them, so launches queue up on the one stream"
        )
    elif bound == "launch-bound":
        why = (
            "the host issues launches no faster than the kernels run, so streams often sit idle and "
            "branches overlap only briefly"
        )
    else:
        why = "kernels take longer than launching them, so queued branches run side by side"
    text = (
        f"simulated on {device}: peak {mem.peak_bytes / (1 << 20):.3f} MiB at {mem.peak_ms:.4f} ms; {where}. "
        f"The timeline is {bound} (last launch at {launch_ms:.4f} ms, busiest stream {kernels_ms:.4f} ms, "
        f"total kernel time {busy:.4f} ms): {why}."
    )
    return SimulatedNote(mem.peak_bytes, mem.peak_ms, bound, text)
