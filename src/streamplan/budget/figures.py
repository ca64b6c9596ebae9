"""The budgeted memory figure of a schedule, as the memory analyses compute it.

The guarantee a budget gives is checked here, by the existing analyses and never by
a search's own bookkeeping: the worst-case peak over all timings
(``memory.worst_case.worst_case_peak``; when it returns a proven interval the budget
must hold for its *upper* end), or the static arena (``memory.arena.plan_arena``).
The smallest figure any schedule reaches is that of the memory-optimal one-stream
order (``schedule.memory_order``): every multi-stream schedule allows the timings of
some one-stream order, so none goes below it; only rematerialization does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamplan.errors import BudgetError
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.arena import plan_arena
from streamplan.memory.host_order import host_order_peak_bytes
from streamplan.memory.liveness import liveness
from streamplan.memory.worst_case import worst_case_peak
from streamplan.schedule.context import MemoryBudget
from streamplan.schedule.memory_order import memory_order


@dataclass(frozen=True)
class FigureCheck:
    """A schedule's budgeted figure: ``upper_bytes`` is what is guaranteed (the proven upper end)."""

    figure: str
    lower_bytes: int
    upper_bytes: int
    exact: bool
    method: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "lower_bytes": self.lower_bytes,
            "upper_bytes": self.upper_bytes,
            "exact": self.exact,
            "method": self.method,
        }


def budget_figure(
    graph: Graph, schedule: StreamSchedule, budget: MemoryBudget, *, time_limit_s: float = 10.0
) -> FigureCheck:
    """The budgeted figure of ``schedule`` (worst case over all timings, or the static arena)."""
    inc = budget.includes
    if budget.figure == "arena":
        plan = plan_arena(graph, schedule, includes=inc)
        return FigureCheck("arena", plan.arena_bytes, plan.arena_bytes, True, f"placement ({plan.order})")
    live = liveness(graph, schedule, includes=inc)
    wc = worst_case_peak(graph, schedule, live=live, time_limit_s=time_limit_s)
    return FigureCheck("worst_case", wc.lower_bytes, wc.upper_bytes, wc.exact, wc.method)


def sequential_figure_bytes(graph: Graph, budget: MemoryBudget) -> int:
    """The figure for one stream in graph order (what a factor budget such as ``1.2x`` multiplies)."""
    inc = budget.includes
    seq = StreamSchedule(graph.node_ids, dict.fromkeys(graph.node_ids, 0), (), "sequential")
    if budget.figure == "arena":
        return plan_arena(graph, seq, includes=inc).arena_bytes
    return host_order_peak_bytes(graph, seq, includes=inc)


@dataclass(frozen=True)
class Floor:
    """The smallest figure found for any schedule: the memory-optimal one-stream order's."""

    schedule: StreamSchedule
    figure_bytes: int
    proven: bool  # the order is proven peak-minimal (exact search), not only the best found


def memory_floor(graph: Graph, budget: MemoryBudget) -> Floor:
    """The memory-optimal one-stream schedule and its budgeted figure."""
    mo = memory_order(graph)
    s = StreamSchedule(mo.order, dict.fromkeys(mo.order, 0), (), "memory", {"exact": mo.exact})
    inc = budget.includes
    if budget.figure == "arena":
        plan = plan_arena(graph, s, includes=inc)
        return Floor(s, plan.arena_bytes, mo.exact and plan.arena_bytes <= plan.lower_bound_bytes)
    return Floor(s, host_order_peak_bytes(graph, s, includes=inc), mo.exact)


def below_floor_error(graph: Graph, limit_bytes: int, floor: Floor, budget: MemoryBudget) -> BudgetError:
    """The user error for a budget no schedule meets, naming the smallest achievable figure."""
    mib = 1 << 20
    what = "worst-case peak" if budget.figure == "worst_case" else "static arena"
    how = "the memory-optimal one-stream order" if floor.proven else "the best one-stream order found"
    return BudgetError(
        f"a budget of {limit_bytes / mib:.3f} MiB is below the smallest {what} any schedule reaches: "
        f"{floor.figure_bytes / mib:.3f} MiB ({floor.figure_bytes} bytes, {how})",
        where=graph.name,
        hint=f"raise the budget to at least {floor.figure_bytes / mib:.3f} MiB; below that only "
        "rematerialization (recomputing tensors instead of keeping them) can go",
    )
