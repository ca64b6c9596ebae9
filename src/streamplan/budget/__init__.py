"""Prescribing schedules under a memory budget: the ``budget`` policy, its solvers, the Pareto front.

- ``policy.schedule_budget`` — the ``budget`` policy (registered in ``schedule/registry.py``);
- ``search.BudgetSearch`` — the scalable search (fixed policies and guarded variants);
- ``guard.guard_schedule`` — a base schedule made to fit a budget by admission waits;
- ``exact.exact_budget_schedule`` — the CP-SAT formulation for small graphs;
- ``pareto.pareto_front`` — budget schedules from the floor to the fastest, with the fixed policies;
- ``figures`` — the budgeted figure of a schedule as the memory analyses compute it.

This package sits after ``memory`` in the layering: it needs the worst-case analysis.
"""

from streamplan.budget.exact import ExactResult, exact_budget_schedule
from streamplan.budget.figures import FigureCheck, Floor, budget_figure, memory_floor, sequential_figure_bytes
from streamplan.budget.guard import guard_schedule
from streamplan.budget.policy import schedule_budget
from streamplan.budget.search import BudgetSearch, Candidate

__all__ = [
    "BudgetSearch",
    "Candidate",
    "ExactResult",
    "FigureCheck",
    "Floor",
    "budget_figure",
    "exact_budget_schedule",
    "guard_schedule",
    "memory_floor",
    "schedule_budget",
    "sequential_figure_bytes",
]
