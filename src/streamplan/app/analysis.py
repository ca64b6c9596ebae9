"""Scheduling and simulating policies on a graph: one ``PolicyRun`` each, and ``compare``."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from streamplan.cost.bound import latency_bound
from streamplan.cost.simulate import simulate
from streamplan.cost.timeline import Timeline
from streamplan.errors import StreamplanError
from streamplan.fusion.plan import graph_for_schedule, schedule_with_fusion
from streamplan.fusion.transform import FusionResult, kernel_count
from streamplan.ir.graph import Graph
from streamplan.ir.includes import ACTIVATIONS, Includes
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.breakdown import MemoryBreakdown, memory_breakdown
from streamplan.memory.report import MemoryReport, analyze_memory
from streamplan.memory.simulated import SimulatedMemory, simulated_memory
from streamplan.memory.worst_case import WorstCasePeak, worst_case_peak
from streamplan.schedule.context import DEFAULT_CONTEXT, ScheduleContext
from streamplan.schedule.registry import BASELINE_POLICY
from streamplan.schedule.verify import verify_schedule


@dataclass(frozen=True)
class PolicyRun:
    """A verified schedule and its simulated timeline under one context's cost model.

    ``graph`` is the graph the schedule runs: the kernels when it was fused (``fusion``
    says how), else the model's graph as captured.
    """

    schedule: StreamSchedule
    timeline: Timeline
    graph: Graph | None = None
    fusion: FusionResult | None = None

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
    return PolicyRun(schedule, simulate(planned.graph, schedule, ctx.cost), planned.graph, planned.fusion)


@dataclass(frozen=True)
class PolicyRow:
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


def compare_policies(
    graph: Graph,
    policies: Sequence[str],
    ctx: ScheduleContext | None = None,
    *,
    memory: bool = True,
    includes: Includes = ACTIVATIONS,
    schedules: Sequence[tuple[str, StreamSchedule]] = (),
    fusions: Sequence[str] | None = None,
) -> list[PolicyRow]:
    """Schedule, verify, simulate (and analyse memory) for each policy, the baseline first,
    under each fusion mode of ``fusions`` (default: ``ctx.fusion`` alone), mode by mode;
    then one row per saved schedule in ``schedules`` (``(label, schedule)`` pairs).

    A policy that fails on this graph (a search that cannot handle it, say) gives a row
    with ``error`` set instead of aborting the whole comparison. Every row carries the
    latency bound (``cost.bound.latency_bound``): no schedule of the graph is faster.
    """
    ctx = ctx or DEFAULT_CONTEXT
    bound_ms = latency_bound(graph, ctx.cost).bound_ms
    rows: list[PolicyRow] = []
    ordered = (
        list(dict.fromkeys([BASELINE_POLICY, *policies])) if BASELINE_POLICY in policies else list(policies)
    )
    for mode in fusions or [ctx.fusion]:
        mctx = ctx.replace(fusion=mode)
        baseline_ms = None
        for policy in ordered:
            t0 = time.perf_counter()
            try:
                run = run_policy(graph, policy, mctx)
            except StreamplanError as e:
                rows.append(
                    PolicyRow(
                        policy=policy,
                        fusion=mode,
                        search_time_s=time.perf_counter() - t0,
                        error=e.short().splitlines()[0],
                        bound_ms=bound_ms,
                    )
                )
                continue
            if policy == BASELINE_POLICY:
                baseline_ms = run.timeline.makespan_ms
            rows.append(
                _row(
                    graph,
                    policy,
                    run,
                    mctx,
                    memory,
                    includes,
                    baseline_ms,
                    time.perf_counter() - t0,
                    bound_ms,
                )
            )
        if mode == ctx.fusion:
            saved_baseline_ms = baseline_ms
    for label, schedule in schedules:
        t0 = time.perf_counter()
        run = run_schedule(graph, schedule, ctx)
        rows.append(
            _row(
                graph,
                label,
                run,
                ctx,
                memory,
                includes,
                saved_baseline_ms,
                time.perf_counter() - t0,
                bound_ms,
            )
        )
    return rows


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
    """One policy's run with its live memory over simulated time and its worst-case peak."""

    run: PolicyRun
    memory: SimulatedMemory
    worst_case: WorstCasePeak


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
