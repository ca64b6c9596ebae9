"""``budget``: the fastest schedule whose memory figure fits a budget (``docs/schedules.md``).

With ``ctx.budget`` (a ``MemoryBudget``: bytes, or a factor of the sequential peak; by
default of the worst-case peak over all timings) the schedule returned is verified and
its figure, computed by the memory analysis, is within the budget. Without a budget it
is the fastest schedule found, never slower in simulation than the best fixed policy
on the same context.

Options (``BudgetOptions``):

- ``solver``: ``"auto"`` (default: the exact formulation up to ``exact_max_ops`` ops,
  the scalable search above), ``"search"`` or ``"exact"``;
- ``exact_max_ops``: where ``auto`` switches (default 24);
- ``fixed``: the fixed policies the search starts from (comma-separated; default all of
  them, ``ios`` only up to a few hundred ops when a budget is given).

A budget below the memory-optimal one-stream order's figure is a ``BudgetError`` that
names the smallest achievable figure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from streamplan.budget.exact import exact_budget_schedule
from streamplan.budget.figures import below_floor_error, budget_figure, sequential_figure_bytes
from streamplan.budget.search import FIXED_POLICIES, BudgetSearch, Candidate
from streamplan.cost.simulate import simulate
from streamplan.errors import BudgetError, ScheduleError
from streamplan.fusion.plan import fuses_after_scheduling
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.schedule.context import DEFAULT_CONTEXT, MemoryBudget, ScheduleContext
from streamplan.schedule.options import whole

SOLVERS = ("auto", "search", "exact")
EXACT_MAX_OPS = 24
FINAL_CHECK_S = 1.0  # time for the worst-case analysis of the winner
SEARCH_SHARE = 0.6  # of the context's time limit, for the search's optional steps


@dataclass(frozen=True)
class BudgetOptions:
    """The ``budget`` policy's tunables (see the module docstring)."""

    solver: str = "auto"
    exact_max_ops: int = EXACT_MAX_OPS
    fixed: str | None = None  # comma-separated fixed policies the search starts from (None: all)

    def __post_init__(self) -> None:
        if self.solver not in SOLVERS:
            raise ScheduleError(
                f"unknown budget solver {self.solver!r}", hint=f"use one of {', '.join(SOLVERS)}"
            )
        object.__setattr__(self, "exact_max_ops", whole("exact_max_ops", self.exact_max_ops, least=0))


def schedule_budget(graph: Graph, ctx: ScheduleContext = DEFAULT_CONTEXT) -> StreamSchedule:
    """The fastest schedule found whose budgeted figure (``ctx.budget``) fits; without a budget,
    the fastest schedule found."""
    t0 = time.perf_counter()
    opts = ctx.options_as(BudgetOptions)
    solver = opts.solver
    kind = ctx.budget or MemoryBudget(limit_bytes=0)
    search = BudgetSearch(graph, ctx, kind, fixed=fixed_policies(ctx))
    if ctx.budget is None:
        best = search.fastest(deadline=t0 + SEARCH_SHARE * ctx.time_limit_s)
        return _result(best, graph, ctx, None, None, best.source, t0)
    if fuses_after_scheduling(ctx.fusion):
        # Fusing after scheduling changes the kernels whose figure the budget bounded: a kernel
        # allocates every output when it starts, so the fused schedule can exceed the budget.
        raise BudgetError(
            "a memory budget holds for the kernels that were scheduled, and fusing along the "
            "streams afterwards can raise the peak above it",
            where=graph.name,
            hint="fuse before scheduling (the budget then bounds the fused kernels), or do not fuse",
        )
    limit = ctx.budget.limit_for(sequential_figure_bytes(graph, ctx.budget))
    floor = search.memory_floor()
    if limit < floor.figure_bytes:
        raise below_floor_error(graph, limit, floor, ctx.budget)
    exact_max = opts.exact_max_ops
    use_exact = solver == "exact" or (solver == "auto" and len(graph.nodes) <= exact_max)
    if use_exact and ctx.budget.figure != "worst_case":
        if solver == "exact":
            raise BudgetError(
                "the exact solver bounds the worst-case peak only", hint="use the search for the arena figure"
            )
        use_exact = False
    deadline = t0 + SEARCH_SHARE * ctx.time_limit_s  # the rest: the final check, the exact solver's result
    extra: dict[str, Any] = {}
    best: Candidate | None = None
    name = "search"
    if use_exact:
        ctx.progress("budget: exact solver", None, None)
        ex = exact_budget_schedule(graph, ctx, limit, time_limit_s=ctx.time_limit_s)
        extra = ex.meta()
        best, name = (
            Candidate(ex.schedule, simulate(graph, ex.schedule, ctx.cost).makespan_ms, "exact"),
            "exact",
        )
    if solver != "exact":
        # The exact model leaves out launch and event costs; in "auto" the search's schedule
        # wins when the simulator (which has them) finds it faster.
        found = search.best_under(limit, deadline=deadline)
        if found is not None and (best is None or found.makespan_ms < best.makespan_ms):
            best, name = found, "search"
    if best is None:  # the floor fits, so the one-stream memory order always does
        raise BudgetError(f"no schedule found within {limit} bytes", where=graph.name)
    return _result(best, graph, ctx, limit, name, best.source, t0, extra)


def fixed_policies(ctx: ScheduleContext) -> tuple[str, ...]:
    """The fixed policies the search starts from (the ``fixed`` option, checked)."""
    text = ctx.options_as(BudgetOptions).fixed
    if text is None:
        return FIXED_POLICIES
    names = tuple(p.strip() for p in str(text).split(",") if p.strip())
    unknown = [p for p in names if p not in FIXED_POLICIES]
    if unknown or not names:
        raise ScheduleError(
            f"budget option fixed={text!r} names no fixed policy"
            if not names
            else f"budget option fixed names {', '.join(unknown)}, not a fixed policy",
            hint=f"choose among {', '.join(FIXED_POLICIES)}",
        )
    return names


def _result(
    best: Candidate,
    graph: Graph,
    ctx: ScheduleContext,
    limit: int | None,
    solver: str | None,
    source: str,
    t0: float,
    extra: dict[str, Any] | None = None,
) -> StreamSchedule:
    """The winner, checked by the memory analysis (never only by the search's bookkeeping)."""
    meta: dict[str, Any] = {
        "budget_bytes": limit,
        "budget_figure": ctx.budget.figure if ctx.budget else None,
        "solver": solver,
        "source": source,
        "predicted_ms": best.makespan_ms,
        "cuda_graphs": ctx.cuda_graphs,
    }
    if ctx.budget is not None and limit is not None:
        # the winner's bound already holds; the analysis reports the figure (exact where it can
        # finish quickly, else its proven interval, whose upper end the budget must cover)
        check = best.check or budget_figure(
            graph, best.schedule, ctx.budget, time_limit_s=min(ctx.time_limit_s, FINAL_CHECK_S)
        )
        if check.upper_bytes > limit:
            raise BudgetError(
                f"the chosen schedule's {check.figure} upper bound {check.upper_bytes} exceeds the budget {limit}",
                where=graph.name,
                hint="this is a bug in the budget search; the memory policy's one-stream order fits",
            )
        meta.update(figure_bytes=check.upper_bytes, figure_check=check.to_dict())
    meta.update(extra or {})
    return StreamSchedule(
        best.schedule.launch_order, best.schedule.streams, best.schedule.waits, "budget", meta
    )
