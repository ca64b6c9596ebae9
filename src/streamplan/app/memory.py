"""Every memory figure of one schedule, with the allocator replays (the ``memory`` command's result)."""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streamplan.app.analysis import PolicyRun
from streamplan.app.context import MeasuredCoverage
from streamplan.app.display import Shown, curve_image
from streamplan.cost.measured import MeasuredCostModel
from streamplan.ir.frozen import freeze
from streamplan.ir.graph import Graph
from streamplan.ir.includes import ACTIVATIONS, Includes
from streamplan.memory.allocators import MODELS, OpMemory, replay
from streamplan.memory.allocators.report import AllocatorReport
from streamplan.memory.breakdown import MemoryBreakdown, memory_breakdown
from streamplan.memory.liveness import liveness
from streamplan.memory.report import MemoryReport, analyze_memory
from streamplan.schedule.context import DEFAULT_CONTEXT, ScheduleContext


@dataclass(frozen=True)
class MemoryAnalysis(Shown):
    """One schedule's memory report, its host-order replays through every allocator model,
    and (with a measured table) how much of the simulation the table covered. For a training
    step, ``breakdown`` splits memory into parameters, gradients, optimizer state, saved
    activations and the rest, in total and at each peak."""

    run: PolicyRun
    report: MemoryReport
    allocators: Mapping[str, AllocatorReport]
    measured: MeasuredCoverage | None
    op_memory: bool  # the torch-cuda replay includes measured op scratch and stream workspaces
    device: str
    breakdown: MemoryBreakdown | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "allocators", freeze(self.allocators))

    def __str__(self) -> str:
        lines = list(self.report.lines())
        lines += [f"  {r}" for r in self.allocators.values()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        text = f"<pre>{html.escape(str(self))}</pre>"
        sim = self.report.simulated
        if sim is None:
            return text
        title = f"{self.report.graph} under {self.report.policy}: live memory over simulated time"
        return text + curve_image(
            [(self.report.policy, sim.samples, self.report.worst_case.upper_bytes)], title=title
        )

    def to_dict(self) -> dict[str, Any]:
        d = self.report.to_dict()
        d["device"] = self.device
        d["makespan_ms"] = self.run.makespan_ms
        d["fusion"] = self.run.fusion_mode
        if self.measured is not None:
            d["measured"] = {**self.measured.to_dict(), "op_memory": self.op_memory}
        d["host_order_trace"] = self.report.host_order.to_dict()
        d["allocators"] = {m: r.to_dict(trace=False) for m, r in self.allocators.items()}
        if self.breakdown is not None:
            d["train"] = True
            d["memory_breakdown"] = self.breakdown.to_dict()
        return d


def analyze_run_memory(
    graph: Graph,
    run: PolicyRun,
    ctx: ScheduleContext | None = None,
    *,
    includes: Includes = ACTIVATIONS,
    device_memory_bytes: int | None = None,
) -> MemoryAnalysis:
    """Every memory figure of ``run``'s schedule (on its kernels when it was fused); with a
    measured table in ``ctx.cost``, its op scratch and stream workspaces go into the
    ``torch-cuda`` replay."""
    ctx = ctx or DEFAULT_CONTEXT
    graph = run.scheduled_graph(graph)  # the kernels, when the run was fused
    cost = ctx.cost
    op_memory = OpMemory.from_table(graph, cost.table) if isinstance(cost, MeasuredCostModel) else None
    ctx.progress("memory figures", None, None)
    live = liveness(graph, run.schedule, includes=includes)
    allocators = {}
    for m in MODELS:
        ctx.progress(f"allocator replay: {m}", None, None)
        allocators[m] = replay(
            graph,
            run.schedule,
            m,
            timeline=run.timeline,
            includes=includes,
            device_memory_bytes=device_memory_bytes if m == "torch-cuda" else None,
            op_memory=op_memory if m == "torch-cuda" else None,
            live=live,
        )
    report = analyze_memory(
        graph,
        run.schedule,
        timeline=run.timeline,
        includes=includes,
        device_memory_bytes=device_memory_bytes,
        op_memory=op_memory,
        time_limit_s=ctx.time_limit_s,
        progress=ctx.progress,
        live=live,
        torch_cuda=allocators.get("torch-cuda"),  # the replay above: it is not run twice
    )
    return MemoryAnalysis(
        run=run,
        report=report,
        allocators=allocators,
        measured=MeasuredCoverage.of(cost, graph),
        op_memory=op_memory is not None and not op_memory.empty,
        device=cost.device_name,
        breakdown=memory_breakdown(graph, run.schedule, report=report) if graph.is_training else None,
    )
