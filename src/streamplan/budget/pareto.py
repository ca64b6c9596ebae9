"""The latency/memory trade-off: budget schedules from the floor to the fastest, beside the fixed policies.

Budgets run from the memory-optimal one-stream order's figure (the floor: no schedule
goes below it) up to the largest figure of the fixed policies, on an even grid plus
every fixed policy's own figure. They are solved in increasing order and each point
starts from the previous point's schedule (it fits every larger budget), so makespan
never increases with the budget; a fixed policy is a candidate at its own figure, so
no fixed policy is both faster and smaller than the front. Every point's figure is
the memory analysis's (the proven upper end when it is an interval).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from streamplan.budget.figures import FigureCheck, budget_figure, sequential_figure_bytes
from streamplan.budget.search import BudgetSearch, Candidate
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.schedule.context import MemoryBudget, ScheduleContext
from streamplan.schedule.registry import BASELINE_POLICY

DEFAULT_POINTS = 8
MIB = 1 << 20
POINT_CHECK_S = 2.0  # worst-case analysis per point (the search's proof already holds)


@dataclass(frozen=True)
class FrontPoint:
    """The fastest schedule found within ``budget_bytes``, and its figure as the analysis proves it."""

    budget_bytes: int
    makespan_ms: float
    worst_case_peak_bytes: int  # the budgeted figure's proven upper end (the arena size for "arena")
    worst_case_exact: bool
    streams: int
    source: str
    schedule: StreamSchedule

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget_bytes": self.budget_bytes,
            "makespan_ms": self.makespan_ms,
            "worst_case_peak_bytes": self.worst_case_peak_bytes,
            "worst_case_exact": self.worst_case_exact,
            "streams": self.streams,
            "source": self.source,
        }


@dataclass(frozen=True)
class FixedPoint:
    """A fixed policy's schedule as a reference: its makespan and figure (the proven upper end;
    ``worst_case_lower_bytes`` the realised lower end when the analysis stopped early);
    ``dominated`` when a front point is no slower and surely no larger, and better in one."""

    policy: str
    makespan_ms: float
    worst_case_peak_bytes: int
    worst_case_lower_bytes: int
    worst_case_exact: bool
    streams: int
    dominated: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "makespan_ms": self.makespan_ms,
            "worst_case_peak_bytes": self.worst_case_peak_bytes,
            "worst_case_lower_bytes": self.worst_case_lower_bytes,
            "worst_case_exact": self.worst_case_exact,
            "streams": self.streams,
            "dominated": self.dominated,
        }


@dataclass(frozen=True)
class ParetoFront:
    """Budget points (increasing budgets, non-increasing makespans) and the fixed policies."""

    graph: str
    device: str
    cuda_graphs: bool
    figure: str
    points: tuple[FrontPoint, ...]
    fixed: tuple[FixedPoint, ...]
    floor_bytes: int
    sequential_peak_bytes: int
    sequential_ms: float
    search_time_s: float

    def __str__(self) -> str:
        what = "worst-case peak" if self.figure == "worst_case" else "static arena"
        lines = [f"{self.graph} on {self.device}: the fastest schedule per budget ({what}, MiB)"]
        for p in self.points:
            lines.append(
                f"  budget {p.budget_bytes / MIB:10.2f}  {p.makespan_ms:9.3f} ms  "
                f"{p.worst_case_peak_bytes / MIB:10.2f} MiB  {p.streams} streams  ({p.source})"
            )
        for f in self.fixed:
            mark = "  (dominated)" if f.dominated else ""
            lines.append(
                f"  {f.policy:<17} {f.makespan_ms:9.3f} ms  {f.worst_case_peak_bytes / MIB:10.2f} MiB{mark}"
            )
        return "\n".join(lines)

    def dominates_fixed(self) -> bool:
        """No fixed policy is both faster and smaller than every front point."""
        return all(
            any(
                p.makespan_ms <= f.makespan_ms and p.worst_case_peak_bytes <= f.worst_case_peak_bytes
                for p in self.points
            )
            for f in self.fixed
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.graph,
            "device": self.device,
            "cuda_graphs": self.cuda_graphs,
            "figure": self.figure,
            "floor_bytes": self.floor_bytes,
            "sequential_peak_bytes": self.sequential_peak_bytes,
            "sequential_ms": self.sequential_ms,
            "search_time_s": self.search_time_s,
            "points": [p.to_dict() for p in self.points],
            "fixed": [f.to_dict() for f in self.fixed],
        }


def pareto_front(
    graph: Graph,
    ctx: ScheduleContext,
    *,
    points: int = DEFAULT_POINTS,
    budget: MemoryBudget | None = None,
) -> ParetoFront:
    """The front of ``graph`` under ``ctx``'s cost model. ``budget`` (its limit ignored) says
    which figure is budgeted and what it counts (default: the worst case, activations)."""
    t0 = time.perf_counter()
    kind = budget or ctx.budget or MemoryBudget(limit_bytes=0)
    search = BudgetSearch(graph, ctx, kind)
    fixed_runs = search.fixed_runs()
    checked: list[Candidate] = []
    for k, c in enumerate(fixed_runs):
        ctx.progress("pareto: fixed policies' figures", k, len(fixed_runs))
        chk = budget_figure(graph, c.schedule, kind, time_limit_s=ctx.time_limit_s)
        checked.append(Candidate(c.schedule, c.makespan_ms, c.source, c.bound_bytes, chk))
    floor = search.memory_floor()
    top = max(c.check.upper_bytes for c in checked if c.check is not None)
    budgets = _budgets(
        floor.figure_bytes,
        max(top, floor.figure_bytes),
        [c.check.upper_bytes for c in checked if c.check],
        points,
    )
    front: list[FrontPoint] = []
    incumbent: list[Candidate] = []
    for k, b in enumerate(budgets):
        ctx.progress("pareto: budget points", k, len(budgets))
        deadline = time.perf_counter() + ctx.time_limit_s
        fixed_fit = [c for c in checked if c.check is not None and c.check.upper_bytes <= b]
        best = search.best_under(b, deadline=deadline, incumbents=[*incumbent, *fixed_fit])
        if best is None:
            continue
        chk = (
            best.check
            if best.check is not None
            else budget_figure(graph, best.schedule, kind, time_limit_s=POINT_CHECK_S)
        )
        best = Candidate(best.schedule, best.makespan_ms, best.source, best.bound_bytes, chk)
        incumbent = [best]
        front.append(_point(b, best, chk))
    fixed_points = tuple(_fixed_point(c, front) for c in checked)
    seq = next((c for c in checked if c.source == BASELINE_POLICY), checked[-1])
    return ParetoFront(
        graph=graph.name,
        device=ctx.cost.device_name,
        cuda_graphs=ctx.cuda_graphs,
        figure=kind.figure,
        points=tuple(front),
        fixed=fixed_points,
        floor_bytes=floor.figure_bytes,
        sequential_peak_bytes=sequential_figure_bytes(graph, kind),
        sequential_ms=seq.makespan_ms,
        search_time_s=time.perf_counter() - t0,
    )


def _budgets(floor: int, top: int, fixed: list[int], points: int) -> list[int]:
    """An even grid from the floor to the top, plus every fixed policy's figure in that range."""
    n = max(2, points)
    grid = {floor + (top - floor) * i // (n - 1) for i in range(n)}
    grid.update(f for f in fixed if floor <= f <= top)
    return sorted(grid)


def _point(budget_bytes: int, c: Candidate, chk: FigureCheck) -> FrontPoint:
    return FrontPoint(
        budget_bytes=budget_bytes,
        makespan_ms=c.makespan_ms,
        worst_case_peak_bytes=chk.upper_bytes,
        worst_case_exact=chk.exact,
        streams=c.schedule.num_streams,
        source=c.source,
        schedule=c.schedule,
    )


def _fixed_point(c: Candidate, front: list[FrontPoint]) -> FixedPoint:
    assert c.check is not None
    peak = c.check.lower_bytes  # compared with the front's proven upper ends: dominance for sure
    dominated = any(
        p.makespan_ms <= c.makespan_ms
        and p.worst_case_peak_bytes <= peak
        and (p.makespan_ms < c.makespan_ms or p.worst_case_peak_bytes < peak)
        for p in front
    )
    return FixedPoint(
        c.source,
        c.makespan_ms,
        c.check.upper_bytes,
        c.check.lower_bytes,
        c.check.exact,
        c.schedule.num_streams,
        dominated,
    )
