"""Schedules under a memory budget and the latency/memory front (the ``pareto`` command's result).

``pareto_front(graph, ctx)`` returns a typed ``ParetoFront`` (budget points and fixed
policies); ``run_budget(graph, budget, ctx)`` schedules with the ``budget`` policy and
simulates it. The search itself lives in ``streamplan.budget``.
"""

from __future__ import annotations

from streamplan.app.analysis import PolicyRun, run_policy
from streamplan.budget.pareto import DEFAULT_POINTS, FixedPoint, FrontPoint, ParetoFront
from streamplan.budget.pareto import pareto_front as _pareto_front
from streamplan.ir.graph import Graph
from streamplan.schedule.context import DEFAULT_CONTEXT, MemoryBudget, ScheduleContext

__all__ = ["FixedPoint", "FrontPoint", "ParetoFront", "pareto_front", "run_budget"]


def pareto_front(
    graph: Graph,
    ctx: ScheduleContext | None = None,
    *,
    points: int = DEFAULT_POINTS,
    budget: MemoryBudget | None = None,
) -> ParetoFront:
    """Budget schedules from the memory floor to the fastest, with every fixed policy for reference.

    ``budget`` only says which figure is budgeted and what it counts (its limit is ignored)."""
    return _pareto_front(graph, ctx or DEFAULT_CONTEXT, points=points, budget=budget)


def run_budget(
    graph: Graph, budget: MemoryBudget | str | None, ctx: ScheduleContext | None = None
) -> PolicyRun:
    """The ``budget`` policy's schedule under ``budget`` (a ``MemoryBudget`` or text such as
    ``"12MiB"`` or ``"1.2x"``; None: the fastest found), verified and simulated."""
    ctx = ctx or DEFAULT_CONTEXT
    if isinstance(budget, str):
        budget = MemoryBudget.parse(budget)
    return run_policy(graph, "budget", ctx.replace(budget=budget))
