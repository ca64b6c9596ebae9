"""Scheduling and simulating policies on a graph: one ``PolicyRun`` each, and ``compare``."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from streamplan.cost.simulate import simulate
from streamplan.cost.timeline import Timeline
from streamplan.errors import StreamplanError
from streamplan.fusion.plan import fusion_mode, graph_for_schedule, schedule_with_fusion
from streamplan.fusion.transform import FusionResult, kernel_count
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
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
        return fusion_mode(self.schedule)

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

    ``fusion`` is how ops were fused into ``kernels`` (``none``: every op is its own);
    ``speedup`` is over the ``sequential`` row of the same fusion (None without one);
    ``error`` is set (and the figures are empty) when the policy failed on this graph.
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

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "policy": self.policy,
            "fusion": self.fusion,
            "kernels": self.kernels,
            "streams": self.streams,
            "events": self.events,
            "waits": self.waits,
            "makespan_ms": self.makespan_ms,
            "speedup": self.speedup,
            "search_time_s": self.search_time_s,
            "memory": None if self.memory is None else self.memory.to_dict(),
        }
        if self.error:
            d["error"] = self.error
        return d


def compare_policies(
    graph: Graph,
    policies: Sequence[str],
    ctx: ScheduleContext | None = None,
    *,
    memory: bool = True,
    includes: MemoryOptions = MemoryOptions(),
    fusions: Sequence[str] | None = None,
) -> list[PolicyRow]:
    """Schedule, verify, simulate (and analyse memory) for each policy, the baseline first,
    under each fusion mode of ``fusions`` (default: ``ctx.fusion`` alone), mode by mode.

    A policy that fails on this graph (a search that cannot handle it, say) gives a row
    with ``error`` set instead of aborting the whole comparison.
    """
    ctx = ctx or DEFAULT_CONTEXT
    rows: list[PolicyRow] = []
    ordered = (
        list(dict.fromkeys([BASELINE_POLICY, *policies])) if BASELINE_POLICY in policies else list(policies)
    )
    for mode in fusions or [ctx.fusion]:
        baseline_ms: float | None = None
        for policy in ordered:
            row = _policy_row(graph, policy, ctx.replace(fusion=mode), memory, includes, baseline_ms)
            if policy == BASELINE_POLICY and row.makespan_ms is not None:
                baseline_ms = row.makespan_ms
            rows.append(row)
    return rows


def _policy_row(
    graph: Graph,
    policy: str,
    ctx: ScheduleContext,
    memory: bool,
    includes: MemoryOptions,
    baseline_ms: float | None,
) -> PolicyRow:
    t0 = time.perf_counter()
    try:
        run = run_policy(graph, policy, ctx)
    except StreamplanError as e:
        return PolicyRow(
            policy=policy,
            fusion=ctx.fusion,
            search_time_s=time.perf_counter() - t0,
            error=e.short().splitlines()[0],
        )
    sched, timeline, g = run.schedule, run.timeline, run.scheduled_graph(graph)
    report = None
    if memory:
        ctx.progress(f"{policy}: memory figures", None, None)
        report = analyze_memory(
            g,
            sched,
            timeline=timeline,
            include_inputs=includes.include_inputs,
            include_params=includes.include_params,
        )
    if policy == BASELINE_POLICY:
        baseline_ms = timeline.makespan_ms
    speedup = (baseline_ms / timeline.makespan_ms) if baseline_ms and timeline.makespan_ms > 0 else None
    return PolicyRow(
        policy=policy,
        fusion=ctx.fusion,
        kernels=kernel_count(g),
        fused=run.fusion is not None,
        streams=sched.num_streams,
        events=sched.num_events,
        waits=sched.num_waits,
        makespan_ms=timeline.makespan_ms,
        speedup=speedup,
        search_time_s=float(sched.meta.get("search_time_s", time.perf_counter() - t0)),
        memory=report,
    )


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
        g = run.scheduled_graph(graph)
        out.append(
            MemoryCurve(
                run, simulated_memory(g, run.schedule, run.timeline), worst_case_peak(g, run.schedule)
            )
        )
    return out
