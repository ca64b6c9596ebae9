"""Scheduling and simulating policies on a graph: one ``PolicyRun`` each, and ``compare``."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from streamplan.app.display import Shown, curve_image
from streamplan.cost.bound import latency_bound
from streamplan.cost.simulate import simulate
from streamplan.cost.timeline import Timeline
from streamplan.errors import StreamplanError
from streamplan.fusion.plan import graph_for_schedule, schedule_with_fusion
from streamplan.fusion.transform import FusionResult, kernel_count
from streamplan.ir.graph import Graph
from streamplan.ir.includes import ACTIVATIONS, Includes
from streamplan.ir.schedule import Fusion, StreamSchedule
from streamplan.memory.breakdown import MemoryBreakdown, memory_breakdown
from streamplan.memory.report import MemoryReport, analyze_memory
from streamplan.memory.simulated import SimulatedMemory, simulated_memory
from streamplan.memory.worst_case import WorstCasePeak, worst_case_peak
from streamplan.schedule.context import DEFAULT_CONTEXT, ScheduleContext
from streamplan.schedule.registry import BASELINE_POLICY
from streamplan.schedule.verify import verify_schedule

MIB = 1 << 20


@dataclass(frozen=True)
class PolicyRun(Shown):
    """A verified schedule and its simulated timeline under one context's cost model.

    ``graph`` is the graph the schedule runs: the kernels when it was fused (``fusion``
    says how), else the model's graph as captured. ``saved`` marks a schedule in hand (a
    saved file) rather than one a policy just made.
    """

    schedule: StreamSchedule
    timeline: Timeline
    graph: Graph | None = None
    fusion: FusionResult | None = None
    saved: bool = False

    def __str__(self) -> str:
        s = self.schedule
        fused = f", fusion {self.fusion_mode}" if self.fusion is not None else ""
        return (
            f"{s.policy}: {len(s.launch_order)} ops on {s.num_streams} streams, {s.num_events} events{fused}; "
            f"simulated {self.makespan_ms:.3f} ms on {self.timeline.device or 'the device'}"
        )

    def to_dict(self) -> dict[str, Any]:
        s = self.schedule
        return {
            "policy": s.policy,
            "fusion": self.fusion_mode,
            "streams": s.num_streams,
            "events": s.num_events,
            "makespan_ms": self.makespan_ms,
            "saved": self.saved,
            "schedule": s.to_dict(),
        }

    @property
    def policy(self) -> str:
        return self.schedule.policy

    @property
    def makespan_ms(self) -> float:
        return self.timeline.makespan_ms

    @property
    def fusion_mode(self) -> str:
        return self.schedule.fusion_mode.value

    def scheduled_graph(self, source: Graph) -> Graph:
        """The graph the schedule runs (``source`` itself when the run does not say)."""
        return self.graph if self.graph is not None else source


def run_policy(graph: Graph, policy: str, ctx: ScheduleContext | None = None) -> PolicyRun:
    """Schedule ``graph`` with ``policy`` (verified), fused as ``ctx.fusion`` says, and
    simulate it on ``ctx.cost``."""
    ctx = ctx or DEFAULT_CONTEXT
    ctx.progress(f"{policy}: scheduling", None, None)
    planned = schedule_with_fusion(graph, policy, ctx)
    ctx.progress(f"{policy}: simulating", None, None)
    timeline = simulate(planned.graph, planned.schedule, ctx.cost)
    return PolicyRun(planned.schedule, timeline, planned.graph, planned.fusion)


def run_schedule(graph: Graph, schedule: StreamSchedule, ctx: ScheduleContext | None = None) -> PolicyRun:
    """A given (saved) schedule, verified against ``graph`` (or the kernels its fusion record
    rebuilds from it) and simulated on ``ctx.cost``."""
    ctx = ctx or DEFAULT_CONTEXT
    planned = graph_for_schedule(graph, schedule)
    verify_schedule(planned.graph, schedule)
    timeline = simulate(planned.graph, schedule, ctx.cost)
    return PolicyRun(schedule, timeline, planned.graph, planned.fusion, saved=True)


@dataclass(frozen=True)
class PolicyRow(Shown):
    """What one policy does to a graph: streams, events, simulated latency, memory figures.

    ``fusion`` is how ops were fused into ``kernels`` (``none``: every op is its own);
    ``speedup`` is over the ``sequential`` row of the same fusion (None without one);
    ``error`` is set (and the figures are empty) when the policy failed on this graph.
    ``breakdown`` (training steps only) splits each peak into parameters, gradients,
    optimizer state, saved activations and the rest.
    """

    policy: str
    fusion: str = "none"
    kernels: int = 0
    fused: bool = False  # the schedule runs fused kernels
    streams: int = 0
    events: int = 0
    waits: int = 0
    makespan_ms: float | None = None
    speedup: float | None = None
    search_time_s: float = 0.0
    memory: MemoryReport | None = None
    error: str | None = None
    breakdown: MemoryBreakdown | None = None
    bound_ms: float | None = None  # no schedule of this graph is faster, under the same cost model

    def __str__(self) -> str:
        if self.error:
            return f"{self.policy} ({self.fusion}): failed: {self.error}"
        speed = f" ({self.speedup:.2f}x)" if self.speedup else ""
        peak = (
            ""
            if self.memory is None
            else f", worst-case peak {self.memory.worst_case.upper_bytes / MIB:.2f} MiB"
        )
        return (
            f"{self.policy} ({self.fusion}): {self.streams} streams, {self.makespan_ms:.3f} ms{speed}{peak}"
        )

    @property
    def bound_ratio(self) -> float | None:
        """Makespan over the latency bound (1.0: as fast as any schedule can be)."""
        if self.makespan_ms is None or not self.bound_ms:
            return None
        return self.makespan_ms / self.bound_ms

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "policy": self.policy,
            "fusion": self.fusion,
            "kernels": self.kernels,
            "streams": self.streams,
            "events": self.events,
            "waits": self.waits,
            "makespan_ms": self.makespan_ms,
            "bound_ms": self.bound_ms,
            "bound_ratio": self.bound_ratio,
            "speedup": self.speedup,
            "search_time_s": self.search_time_s,
            "memory": None if self.memory is None else self.memory.to_dict(),
        }
        if self.error:
            d["error"] = self.error
        if self.breakdown is not None:
            d["memory_breakdown"] = self.breakdown.to_dict()
        return d


Runner = Callable[[str, Fusion], PolicyRun]


def compare_policies(
    graph: Graph,
    policies: Sequence[str],
    ctx: ScheduleContext | None = None,
    *,
    memory: bool = True,
    includes: Includes = ACTIVATIONS,
    schedules: Sequence[tuple[str, StreamSchedule]] = (),
    fusions: Sequence[str] | None = None,
    runner: Runner | None = None,
) -> list[PolicyRow]:
    """Schedule, verify, simulate (and analyse memory) for each policy, the baseline first,
    under each fusion mode of ``fusions`` (default: ``ctx.fusion`` alone), mode by mode;
    then one row per saved schedule in ``schedules`` (``(label, schedule)`` pairs), each
    run as its own fusion record says.

    A policy that fails on this graph (a search that cannot handle it, say) gives a row
    with ``error`` set instead of aborting the whole comparison. Every row carries the
    latency bound (``cost.bound.latency_bound``): no schedule of the graph is faster.
    A row's speedup is over the baseline of the same fusion mode (for a saved schedule, of
    the mode it was made with), when the baseline is among ``policies``. ``runner(policy,
    mode)`` makes a policy's run (default: ``run_policy`` under ``ctx`` with that mode; a
    ``Session`` passes its own, which caches runs and gives each policy its options).
    """
    ctx = ctx or DEFAULT_CONTEXT
    modes = [Fusion.parse(m) for m in (fusions or [ctx.fusion])]
    run_one: Runner = runner or (lambda policy, mode: run_policy(graph, policy, ctx.replace(fusion=mode)))
    bound_ms = latency_bound(graph, ctx.cost).bound_ms
    rows: list[PolicyRow] = []
    with_baseline = BASELINE_POLICY in policies
    ordered = list(dict.fromkeys([BASELINE_POLICY, *policies])) if with_baseline else list(policies)
    baselines: dict[Fusion, float | None] = {}
    for mode in modes:
        mctx = ctx.replace(fusion=mode)
        baselines[mode] = None
        for policy in ordered:
            t0 = time.perf_counter()
            try:
                run = run_one(policy, mode)
            except StreamplanError as e:
                error = e.short().splitlines()[0]
                rows.append(
                    PolicyRow(
                        policy, mode, search_time_s=time.perf_counter() - t0, error=error, bound_ms=bound_ms
                    )
                )
                continue
            if policy == BASELINE_POLICY:
                baselines[mode] = run.timeline.makespan_ms
            elapsed = time.perf_counter() - t0
            rows.append(_row(graph, policy, run, mctx, memory, includes, baselines[mode], elapsed, bound_ms))
    for label, schedule in schedules:
        t0 = time.perf_counter()
        mode = schedule.fusion_mode
        if with_baseline and mode not in baselines:  # the baseline of the kernels the schedule runs
            baselines[mode] = _makespan_or_none(run_one, mode)
        run = run_schedule(graph, schedule, ctx)
        elapsed = time.perf_counter() - t0
        rows.append(_row(graph, label, run, ctx, memory, includes, baselines.get(mode), elapsed, bound_ms))
    return rows


def _makespan_or_none(run_one: Runner, mode: Fusion) -> float | None:
    try:
        return run_one(BASELINE_POLICY, mode).timeline.makespan_ms
    except StreamplanError:
        return None


def _row(
    graph: Graph,
    label: str,
    run: PolicyRun,
    ctx: ScheduleContext,
    memory: bool,
    includes: Includes,
    baseline_ms: float | None,
    elapsed_s: float,
    bound_ms: float | None,
) -> PolicyRow:
    sched, timeline, g = run.schedule, run.timeline, run.scheduled_graph(graph)
    if g is not graph:  # fused kernels: the bound of their graph (fewer launches)
        bound_ms = latency_bound(g, ctx.cost).bound_ms
    report = breakdown = None
    if memory:
        ctx.progress(f"{label}: memory figures", None, None)
        report = analyze_memory(
            g,
            sched,
            timeline=timeline,
            includes=includes,
            time_limit_s=ctx.time_limit_s,
            progress=_prefixed(ctx, label),
        )
        if g.is_training:
            breakdown = memory_breakdown(g, sched, report=report)
    speedup = (baseline_ms / timeline.makespan_ms) if baseline_ms and timeline.makespan_ms > 0 else None
    return PolicyRow(
        policy=label,
        fusion=run.fusion_mode,
        kernels=kernel_count(g),
        fused=run.fusion is not None,
        streams=sched.num_streams,
        events=sched.num_events,
        waits=sched.num_waits,
        makespan_ms=timeline.makespan_ms,
        speedup=speedup,
        search_time_s=_seconds(sched.meta.get("search_time_s"), elapsed_s),
        memory=report,
        breakdown=breakdown,
        bound_ms=bound_ms,
    )


def _seconds(recorded: Any, elapsed_s: float) -> float:
    """The search time a schedule records, if it is a number (a saved file may say anything)."""
    if isinstance(recorded, (int, float)) and not isinstance(recorded, bool) and math.isfinite(recorded):
        return float(recorded)
    return elapsed_s


def _prefixed(ctx: ScheduleContext, label: str):
    """The context's progress callback with each step named after ``label``."""

    def report(step: str, done: int | None = None, total: int | None = None) -> None:
        ctx.progress(f"{label}: {step}", done, total)

    return report


@dataclass(frozen=True)
class MemoryCurve:
    """One policy's run with its live memory over simulated time and its worst-case peak
    (in a notebook, drawn as an inline image)."""

    run: PolicyRun
    memory: SimulatedMemory
    worst_case: WorstCasePeak

    def __str__(self) -> str:
        wc = self.worst_case
        worst = (
            f"{wc.upper_bytes / MIB:.2f}"
            if wc.exact
            else f"[{wc.lower_bytes / MIB:.2f}, {wc.upper_bytes / MIB:.2f}]"
        )
        return (
            f"{self.run.policy}: simulated peak {self.memory.peak_bytes / MIB:.2f} MiB at "
            f"{self.memory.peak_ms:.3f} ms of {self.run.makespan_ms:.3f} ms; worst case {worst} MiB"
        )

    def _repr_html_(self) -> str:
        samples = self.memory.samples
        return curve_image([(self.run.policy, samples, self.worst_case.upper_bytes)], title=str(self))

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.run.policy,
            "makespan_ms": self.run.makespan_ms,
            "simulated": self.memory.to_dict(),
            "worst_case": self.worst_case.to_dict(),
        }


def memory_curves(
    graph: Graph, policies: Sequence[str], ctx: ScheduleContext | None = None
) -> list[MemoryCurve]:
    """A ``MemoryCurve`` per policy (what ``streamplan plot`` draws)."""
    out = []
    for p in policies:
        run = run_policy(graph, p, ctx)
        out.append(memory_curve(graph, run, ctx))
    return out


def memory_curve(graph: Graph, run: PolicyRun, ctx: ScheduleContext | None = None) -> MemoryCurve:
    """``run``'s live memory over its simulated timeline, and its worst-case peak (on the
    graph the schedule runs: the kernels when it was fused)."""
    ctx = ctx or DEFAULT_CONTEXT
    ctx.progress(f"{run.policy}: worst-case peak", None, None)
    g = run.scheduled_graph(graph)
    return MemoryCurve(
        run,
        simulated_memory(g, run.schedule, run.timeline),
        worst_case_peak(g, run.schedule, time_limit_s=ctx.time_limit_s, progress=_prefixed(ctx, run.policy)),
    )
