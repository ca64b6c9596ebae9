"""Everything the HTML report shows about a model, as typed data (the ``report`` command).

One ``PolicyReport`` per policy: its row of the comparison table, the memory curves
(host order over launches, simulated over time), the stream timeline with each op's
details, its peaks explained against the baseline, and (training steps) its memory by
role. Beside the policies, the latency/memory Pareto front of budgeted schedules
(``budget.pareto``). With fusion, each policy's figures are those of the kernels it runs.
``report/html.py`` renders a ``ModelReport``; more sections go in as new fields here and
new sections there.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from streamplan.app.analysis import PolicyRow, PolicyRun, run_policy
from streamplan.app.display import Shown
from streamplan.app.explain import ExplainResult, explain_run
from streamplan.budget.pareto import DEFAULT_POINTS, ParetoFront, pareto_front
from streamplan.cost.opcost import CostModel
from streamplan.errors import StreamplanError
from streamplan.fusion.plan import FusedSchedule, schedule_same_kernels
from streamplan.fusion.transform import kernel_count
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import Fusion, StreamSchedule
from streamplan.ir.training import training_step
from streamplan.memory.breakdown import MemoryBreakdown, memory_breakdown
from streamplan.memory.report import MemoryReport, analyze_memory
from streamplan.progress import ProgressFn, no_progress
from streamplan.schedule.context import MemoryBudget, ScheduleContext
from streamplan.schedule.registry import BASELINE_POLICY
from streamplan.schedule.settings import Settings


@dataclass(frozen=True, slots=True)
class TimelineOp:
    """One op on the simulated timeline, with what a reader hovers for."""

    op: str
    kind: str  # the ATen op, e.g. "aten.conv2d.default"
    stream: int
    launch_ms: float
    start_ms: float
    end_ms: float
    output_bytes: int  # new storage the op creates (views and in-place writes: 0)
    flops: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "kind": self.kind,
            "stream": self.stream,
            "launch_ms": self.launch_ms,
            "start_ms": self.start_ms,
            "end_ms": self.end_ms,
            "output_bytes": self.output_bytes,
            "flops": self.flops,
        }


@dataclass(frozen=True)
class PolicyReport:
    """One policy in the report: its table row, memory curves, timeline and explanation."""

    row: PolicyRow
    run: PolicyRun | None  # None when the policy failed (``row.error`` says why)
    host_order_bytes: tuple[int, ...]  # live bytes after each launch's allocations, then at the end
    simulated_samples: tuple[tuple[float, int], ...]  # (ms, live bytes) steps on the simulated timeline
    timeline: tuple[TimelineOp, ...]
    explanation: ExplainResult | None

    @property
    def policy(self) -> str:
        return self.row.policy

    def to_dict(self) -> dict[str, Any]:
        return {
            "row": self.row.to_dict(),
            "host_order_bytes": list(self.host_order_bytes),
            "simulated_samples": [list(s) for s in self.simulated_samples],
            "timeline": [t.to_dict() for t in self.timeline],
            "explanation": None if self.explanation is None else self.explanation.to_dict(),
        }


@dataclass(frozen=True)
class ModelReport(Shown):
    """The model, where it was costed, one ``PolicyReport`` per policy (baseline first), and
    the Pareto front (None when not asked for, or when the search failed: ``pareto_error``)."""

    model: str
    graph: Graph
    device: str
    includes: str
    policies: tuple[PolicyReport, ...]
    fusion: str = "none"
    pareto: ParetoFront | None = None
    pareto_error: str | None = None

    def __str__(self) -> str:
        lines = [f"report of {self.model} on {self.device} ({self.includes}; fusion {self.fusion}):"]
        for p in self.policies:
            r = p.row
            if r.error:
                lines.append(f"  {r.policy:<12} failed: {r.error}")
            else:
                peak = r.memory.worst_case.upper_bytes / (1 << 20) if r.memory is not None else float("nan")
                lines.append(
                    f"  {r.policy:<12} {r.streams:>2} streams  {r.makespan_ms:9.3f} ms  {peak:10.2f} MiB"
                )
        if self.pareto is not None:
            lines.append(f"  Pareto front: {len(self.pareto.points)} budgets")
        return "\n".join(lines)

    @property
    def training(self) -> str | None:
        """``loss, optimizer`` of a training step (None for inference)."""
        step = training_step(self.graph)
        return None if step is None else f"{step.loss_fn}; optimizer {step.optimizer}"

    def to_dict(self) -> dict[str, Any]:
        g = self.graph
        return {
            "model": self.model,
            "graph": g.name,
            "ops": len(g.nodes),
            "param_count": g.param_count(),
            "activation_bytes": g.activation_bytes(),
            "device": self.device,
            "memory_includes": self.includes,
            "training": self.training,
            "fusion": self.fusion,
            "policies": [p.to_dict() for p in self.policies],
            "pareto": None if self.pareto is None else self.pareto.to_dict(),
            "pareto_error": self.pareto_error,
        }


def timeline_ops(graph: Graph, run: PolicyRun) -> tuple[TimelineOp, ...]:
    """The simulated spans of ``run`` with each op's kind, new bytes and FLOPs."""
    out = []
    for span in run.timeline.spans:
        node = graph.node(span.op)
        new_bytes = sum(graph.values[v].nbytes for v in node.outputs if not graph.values[v].is_alias)
        out.append(
            TimelineOp(
                span.op,
                node.op,
                span.stream,
                span.launch_ms,
                span.start_ms,
                span.end_ms,
                new_bytes,
                node.flops,
            )
        )
    return tuple(out)


def report_model(
    graph: Graph,
    policies: Sequence[str],
    settings: Settings | None = None,
    *,
    cost: CostModel | None = None,
    progress: ProgressFn = no_progress,
    model: str | None = None,
    explain: bool = True,
    pareto_points: int = DEFAULT_POINTS,
) -> ModelReport:
    """Schedule, simulate and analyse ``graph`` under each policy (the baseline first, when
    asked for) under ``settings`` (fused as they say, memory counting their ``includes``);
    explain each policy's peaks against the baseline's; and find the Pareto front of budgeted
    schedules on ``pareto_points`` budgets (0: none; each budget's search takes up to the
    settings' time limit). ``cost``: the settings' cost model when the caller has it."""
    settings = settings if settings is not None else Settings()
    includes = settings.includes
    cost = cost if cost is not None else settings.cost_model()
    ctx = settings.context(cost=cost, progress=progress)
    ordered = (
        list(dict.fromkeys([BASELINE_POLICY, *policies])) if BASELINE_POLICY in policies else list(policies)
    )
    reports: list[PolicyReport] = []
    baseline: PolicyRun | None = None
    for policy in ordered:
        t0 = time.perf_counter()
        try:
            run = run_policy(graph, policy, settings.context(policy, cost=cost, progress=progress))
        except StreamplanError as e:
            row = PolicyRow(
                policy=policy, search_time_s=time.perf_counter() - t0, error=e.short().splitlines()[0]
            )
            reports.append(PolicyReport(row, None, (), (), (), None))
            continue
        if policy == BASELINE_POLICY:
            baseline = run
        g = run.scheduled_graph(graph)  # the kernels, when fused
        ctx.progress(f"{policy}: memory figures", None, None)
        memory = analyze_memory(
            g,
            run.schedule,
            timeline=run.timeline,
            includes=includes,
            time_limit_s=ctx.time_limit_s,
        )
        explanation = None
        if explain:
            vs = _baseline_of(graph, run, baseline, ctx)
            explanation = explain_run(graph, run, ctx, vs_schedule=vs)
        breakdown = memory_breakdown(g, run.schedule, report=memory) if g.is_training else None
        reports.append(
            PolicyReport(
                row=_row(run, memory, baseline, g, breakdown),
                run=run,
                host_order_bytes=tuple(memory.host_order.trace_bytes()),
                simulated_samples=memory.simulated.samples if memory.simulated is not None else (),
                timeline=timeline_ops(g, run),
                explanation=explanation,
            )
        )
    front, front_error = None, None
    if pareto_points > 0:
        ctx.progress("pareto front", None, None)
        budget = MemoryBudget(limit_bytes=0, includes=includes)
        try:  # of the ops as captured: the budget search schedules ops, not kernels
            pctx = settings.replace(fusion=Fusion.NONE).context("budget", cost=cost, progress=progress)
            front = pareto_front(graph, pctx, points=pareto_points, budget=budget)
        except StreamplanError as e:
            front_error = e.short().splitlines()[0]
    return ModelReport(
        model or graph.name,
        graph,
        ctx.cost.device_name,
        includes.brief(),
        tuple(reports),
        fusion=ctx.fusion,
        pareto=front,
        pareto_error=front_error,
    )


def _baseline_of(
    graph: Graph, run: PolicyRun, baseline: PolicyRun | None, ctx: ScheduleContext
) -> StreamSchedule | None:
    """The baseline's schedule of the graph ``run`` runs (its own kernels when fused along
    its streams), to explain ``run``'s peaks against; None for the baseline itself."""
    if baseline is None or baseline is run:
        return None
    if run.fusion is None or run.scheduled_graph(graph) is baseline.scheduled_graph(graph):
        return baseline.schedule
    planned = FusedSchedule(run.scheduled_graph(graph), run.schedule, run.fusion)
    return schedule_same_kernels(graph, planned, BASELINE_POLICY, ctx)


def _row(
    run: PolicyRun,
    memory: MemoryReport,
    baseline: PolicyRun | None,
    graph: Graph,
    breakdown: MemoryBreakdown | None,
) -> PolicyRow:
    s = run.schedule
    base_ms = baseline.makespan_ms if baseline is not None else None
    return PolicyRow(
        policy=s.policy,
        fusion=run.fusion_mode,
        kernels=kernel_count(graph),
        fused=run.fusion is not None,
        breakdown=breakdown,
        streams=s.num_streams,
        events=s.num_events,
        waits=s.num_waits,
        makespan_ms=run.makespan_ms,
        speedup=base_ms / run.makespan_ms if base_ms and run.makespan_ms > 0 else None,
        search_time_s=float(s.meta.get("search_time_s", 0.0)),
        memory=memory,
    )
