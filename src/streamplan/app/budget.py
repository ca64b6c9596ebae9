"""Schedules under a memory budget and the latency/memory front (the ``pareto`` command's result).

``pareto_front(graph, ctx)`` returns a typed ``ParetoFront`` (budget points and fixed
policies; shown in a notebook as a table); ``run_budget(graph, budget, ctx)`` schedules with the ``budget`` policy and
simulates it. The search itself lives in ``streamplan.budget``.
"""

from __future__ import annotations

import dataclasses

from streamplan.app.analysis import PolicyRun, run_policy
from streamplan.app.display import Shown, html_table
from streamplan.budget.pareto import DEFAULT_POINTS, FixedPoint, FrontPoint, ParetoFront
from streamplan.budget.pareto import pareto_front as _pareto_front
from streamplan.ir.graph import Graph
from streamplan.schedule.context import DEFAULT_CONTEXT, MemoryBudget, ScheduleContext

__all__ = ["FixedPoint", "FrontPoint", "ParetoFront", "ShownParetoFront", "pareto_front", "run_budget"]

MIB = 1 << 20


@dataclasses.dataclass(frozen=True)
class ShownParetoFront(ParetoFront, Shown):
    """A ``ParetoFront`` that shows itself in a notebook: the front's points, then the fixed
    policies (dominated ones marked), as one table."""

    def _repr_html_(self) -> str:
        what = "worst-case peak" if self.figure == "worst_case" else "static arena"
        header = ["schedule", "budget (MiB)", "makespan (ms)", f"{what} (MiB)", "streams", "note"]
        rows: list[list[object]] = [
            [
                f"front {k + 1}",
                f"{p.budget_bytes / MIB:.2f}",
                f"{p.makespan_ms:.3f}",
                f"{p.worst_case_peak_bytes / MIB:.2f}",
                p.streams,
                p.source,
            ]
            for k, p in enumerate(self.points)
        ]
        rows += [
            [
                f.policy,
                "",
                f"{f.makespan_ms:.3f}",
                f"{f.worst_case_peak_bytes / MIB:.2f}",
                f.streams,
                "dominated by the front" if f.dominated else "",
            ]
            for f in self.fixed
        ]
        caption = f"{self.graph} on {self.device}: the fastest schedule per budget ({what})"
        return html_table(header, rows, caption=caption)


def pareto_front(
    graph: Graph,
    ctx: ScheduleContext | None = None,
    *,
    points: int = DEFAULT_POINTS,
    budget: MemoryBudget | None = None,
) -> ParetoFront:
    """Budget schedules from the memory floor to the fastest, with every fixed policy for reference.

    ``budget`` only says which figure is budgeted and what it counts (its limit is ignored)."""
    front = _pareto_front(graph, ctx or DEFAULT_CONTEXT, points=points, budget=budget)
    return ShownParetoFront(**{f.name: getattr(front, f.name) for f in dataclasses.fields(front)})


def run_budget(
    graph: Graph, budget: MemoryBudget | str | None, ctx: ScheduleContext | None = None
) -> PolicyRun:
    """The ``budget`` policy's schedule under ``budget`` (a ``MemoryBudget`` or text such as
    ``"12MiB"`` or ``"1.2x"``; None: the fastest found), verified and simulated."""
    ctx = ctx or DEFAULT_CONTEXT
    if isinstance(budget, str):
        budget = MemoryBudget.parse(budget)
    return run_policy(graph, "budget", ctx.replace(budget=budget))
