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
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.breakdown import MemoryBreakdown, memory_breakdown
from streamplan.memory.report import MemoryReport, analyze_memory
from streamplan.memory.simulated import SimulatedMemory, simulated_memory
from streamplan.memory.worst_case import WorstCasePeak, worst_case_peak
from streamplan.schedule.context import DEFAULT_CONTEXT, ScheduleContext
from streamplan.schedule.registry import BASELINE_POLICY, make_schedule
from streamplan.schedule.verify import verify_schedule


@dataclass(frozen=True)
class PolicyRun:
    """A verified schedule and its simulated timeline under one context's cost model."""

    schedule: StreamSchedule
    timeline: Timeline

    @property
    def policy(self) -> str:
        return self.schedule.policy

    @property
    def makespan_ms(self) -> float:
        return self.timeline.makespan_ms


def run_policy(graph: Graph, policy: str, ctx: ScheduleContext | None = None) -> PolicyRun:
    """Schedule ``graph`` with ``policy`` (verified) and simulate it on ``ctx.cost``."""
    ctx = ctx or DEFAULT_CONTEXT
    ctx.progress(f"{policy}: scheduling", None, None)
    schedule = make_schedule(graph, policy, ctx)
    ctx.progress(f"{policy}: simulating", None, None)
    return PolicyRun(schedule, simulate(graph, schedule, ctx.cost))


def run_schedule(graph: Graph, schedule: StreamSchedule, ctx: ScheduleContext | None = None) -> PolicyRun:
    """A given (saved) schedule, verified against ``graph`` and simulated on ``ctx.cost``."""
    ctx = ctx or DEFAULT_CONTEXT
    verify_schedule(graph, schedule)
    return PolicyRun(schedule, simulate(graph, schedule, ctx.cost))


@dataclass(frozen=True)
class MemoryOptions:
    """Which storages the memory figures count besides activations."""

    include_inputs: bool = False
    include_params: bool = False

    def describe(self) -> str:
        return (
            "activations"
            + (" + inputs" if self.include_inputs else "")
            + (" + params" if self.include_params else "")
        )


@dataclass(frozen=True)
class PolicyRow:
    """What one policy does to a graph: streams, events, simulated latency, memory figures.

    ``speedup`` is over the ``sequential`` row (None without one); ``error`` is set (and
    the figures are empty) when the policy failed on this graph. ``breakdown`` (training
    steps only) splits each peak into parameters, gradients, optimizer state, saved
    activations and the rest.
    """

    policy: str
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
    includes: MemoryOptions = MemoryOptions(),
    schedules: Sequence[tuple[str, StreamSchedule]] = (),
) -> list[PolicyRow]:
    """Schedule, verify, simulate (and analyse memory) for each policy, the baseline first,
    then one row per saved schedule in ``schedules`` (``(label, schedule)`` pairs).

    A policy that fails on this graph (a search that cannot handle it, say) gives a row
    with ``error`` set instead of aborting the whole comparison. Every row carries the
    latency bound (``cost.bound.latency_bound``): no schedule of the graph is faster.
    """
    ctx = ctx or DEFAULT_CONTEXT
    bound_ms = latency_bound(graph, ctx.cost).bound_ms
    rows: list[PolicyRow] = []
    baseline_ms: float | None = None
    ordered = (
        list(dict.fromkeys([BASELINE_POLICY, *policies])) if BASELINE_POLICY in policies else list(policies)
    )
    for policy in ordered:
        t0 = time.perf_counter()
        try:
            run = run_policy(graph, policy, ctx)
        except StreamplanError as e:
            rows.append(
                PolicyRow(
                    policy=policy,
                    search_time_s=time.perf_counter() - t0,
                    error=e.short().splitlines()[0],
                    bound_ms=bound_ms,
                )
            )
            continue
        if policy == BASELINE_POLICY:
            baseline_ms = run.timeline.makespan_ms
        rows.append(
            _row(graph, policy, run, ctx, memory, includes, baseline_ms, time.perf_counter() - t0, bound_ms)
        )
    for label, schedule in schedules:
        t0 = time.perf_counter()
        run = run_schedule(graph, schedule, ctx)
        rows.append(
            _row(graph, label, run, ctx, memory, includes, baseline_ms, time.perf_counter() - t0, bound_ms)
        )
    return rows


def _row(
    graph: Graph,
    label: str,
    run: PolicyRun,
    ctx: ScheduleContext,
    memory: bool,
    includes: MemoryOptions,
    baseline_ms: float | None,
    elapsed_s: float,
    bound_ms: float | None,
) -> PolicyRow:
    sched, timeline = run.schedule, run.timeline
    report = breakdown = None
    if memory:
        ctx.progress(f"{label}: memory figures", None, None)
        report = analyze_memory(
            graph,
            sched,
            timeline=timeline,
            include_inputs=includes.include_inputs,
            include_params=includes.include_params,
            time_limit_s=ctx.time_limit_s,
            progress=_prefixed(ctx, label),
        )
        if graph.is_training:
            breakdown = memory_breakdown(graph, sched, report=report)
    speedup = (baseline_ms / timeline.makespan_ms) if baseline_ms and timeline.makespan_ms > 0 else None
    return PolicyRow(
        policy=label,
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
    return [memory_curve(graph, run_policy(graph, p, ctx), ctx) for p in policies]


def memory_curve(graph: Graph, run: PolicyRun, ctx: ScheduleContext | None = None) -> MemoryCurve:
    """``run``'s live memory over its simulated timeline, and its worst-case peak."""
    ctx = ctx or DEFAULT_CONTEXT
    ctx.progress(f"{run.policy}: worst-case peak", None, None)
    return MemoryCurve(
        run,
        simulated_memory(graph, run.schedule, run.timeline),
        worst_case_peak(
            graph, run.schedule, time_limit_s=ctx.time_limit_s, progress=_prefixed(ctx, run.policy)
        ),
    )
