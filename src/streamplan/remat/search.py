"""Rematerialization jointly with stream scheduling, under a budget on the real peak.

The budget bounds the **worst-case peak over every timing of the final multi-stream
schedule**, as ``memory.worst_case`` proves it (its upper bound) — never a solver's
own estimate. The cost is the simulated makespan of that schedule.

A solver plans on one *reference order* (host-order peak, which is exact on one
stream). The search:

1. schedules the graph with the policy (the baseline) and measures it;
2. builds a ladder of solver targets between the floor no plan can go below and each
   reference order's own peak (``levels`` rungs, independent of the budget);
3. makes the *candidates*: for each rung at or under the budget and each *lane* — a
   stream cap (joint mode: the given one and its halvings down to one, since
   concurrency, not only lifetimes, sets a multi-stream worst case) and a reference
   order (the policy's launch order under that cap, the graph's one-stream order, and
   for a training step the updates-early order) — the solver's plan on that order
   (``solvers.Ladder``: the scalable solver plans a whole ladder in one descent); in
   joint mode with ``rounds`` > 1 a plan is also rewritten and scheduled, and the
   solver plans again on that schedule's launch order: remat changes what runs in
   parallel, the schedule changes what the plan should drop;
4. evaluates them in order of a lower bound on their makespan (``remat.bound``,
   computed from the plan alone): rewrites the graph, schedules it with the policy
   (``make_schedule``, so any policy plugs in), simulates it and, when it could be the
   answer, proves its worst case; it stops at the first candidate whose bound is
   slower than the answer in hand — none of the rest can beat it;
5. answers with the fastest candidate whose worst case fits (ties: lower peak, less
   added compute); the baseline and the plain graph under each smaller stream cap are
   candidates too.

Monotone by construction: the candidates of a budget are those of every rung at or
below it (made whatever the budget), and the evaluation finds the best of them
exactly, so a larger budget sees a superset and can only answer faster (or as fast
with a peak no higher); the peak reported is the analysis of the answer's own
schedule, so it never exceeds the budget. ``search_time_limit_s`` stops the
evaluation early (``RematSearch.complete`` is then False and the guarantee is off).

This module drives the search (steps 1, 2 and 5, and the error when nothing fits);
``remat.evaluation`` makes and evaluates the candidates (steps 3 and 4).
"""

from __future__ import annotations

import time

from streamplan.budget.cached import CachedCost
from streamplan.cost.simulate import gc_paused
from streamplan.errors import BudgetError
from streamplan.ir.graph import Graph
from streamplan.ir.includes import Includes
from streamplan.remat.budget import PeakFloor, fmt_mib, peak_floor
from streamplan.remat.candidates import PlanCandidate, RematSearch
from streamplan.remat.evaluation import Search
from streamplan.remat.solvers import DEFAULT_SOLVER, solver_info
from streamplan.schedule.context import DEFAULT_CONTEXT, MemoryBudget, ScheduleContext
from streamplan.schedule.registry import policy_info

DEFAULT_LEVELS = 12
DEFAULT_ROUNDS = 2
ROUNDS_MAX_OPS = 4000  # above this, rounds default to 1: each extra round schedules every plan
ROUNDS_MAX_OPS_SEARCHING = 400  # the same for a policy that searches per schedule (budget)


def search(
    graph: Graph,
    budget: str | int | float,
    *,
    policy: str = "asap",
    solver: str = DEFAULT_SOLVER,
    ctx: ScheduleContext | None = None,
    includes: Includes = Includes(),
    levels: int = DEFAULT_LEVELS,
    rounds: int | None = None,
    joint: bool = True,
    policy_time_limit_s: float | None = None,
    search_time_limit_s: float | None = None,
) -> RematSearch:
    """The fastest plan (and schedule) whose worst-case peak fits ``budget``.

    ``budget``: bytes, text such as ``"2GiB"``, or a factor of the baseline's worst-case
    peak (``"0.4x"``). ``joint=False`` plans on the one-stream order only and schedules
    the result once ("remat for one stream, then schedule"). ``rounds``: alternations of
    planning and scheduling (default ``DEFAULT_ROUNDS``; 1 above ``ROUNDS_MAX_OPS`` ops, or
    ``ROUNDS_MAX_OPS_SEARCHING`` with a policy that searches per schedule, ``budget``).
    ``policy_time_limit_s`` bounds each scheduling of a candidate (a searching policy such
    as ``budget`` runs once per candidate; default: the context's time limit);
    ``ctx.time_limit_s`` each solve and each worst-case analysis. ``search_time_limit_s``
    (default: none) stops the search after that long with the best plan in hand. Raises
    ``BudgetError`` (with the smallest peak found and why no plan goes lower) when nothing
    fits.
    """
    with gc_paused():
        return _search(
            graph, budget, policy, solver, ctx or DEFAULT_CONTEXT, includes, levels, rounds, joint,
            policy_time_limit_s, search_time_limit_s,
        )  # fmt: skip


def _search(
    graph: Graph,
    budget: str | int | float,
    policy: str,
    solver: str,
    ctx: ScheduleContext,
    includes: Includes,
    levels: int,
    rounds: int | None,
    joint: bool,
    policy_time_limit_s: float | None,
    search_time_limit_s: float | None,
) -> RematSearch:
    solver_info(solver)
    # every op's cost once: the candidates share most of their ops (and a recomputation's id
    # always names a copy of the same op), and a 10k-op step is simulated many times
    ctx = ctx.replace(cost=CachedCost(ctx.cost))
    if rounds is None:
        searching = policy_info(policy).budgeted  # it searches once per scheduled plan
        rounds = (
            DEFAULT_ROUNDS
            if len(graph.nodes) <= (ROUNDS_MAX_OPS_SEARCHING if searching else ROUNDS_MAX_OPS)
            else 1
        )
    if levels < 1 or rounds < 1:
        raise BudgetError("levels and rounds must be at least 1")
    t0 = time.perf_counter()
    s = Search(graph, policy, solver, ctx, includes)
    if search_time_limit_s is not None:
        s.deadline = t0 + search_time_limit_s
    if policy_time_limit_s is not None:
        s.policy_ctx = ctx.replace(time_limit_s=min(ctx.time_limit_s, policy_time_limit_s))
    base = s.baseline()
    budget_bytes = MemoryBudget.parse(budget).limit_for(base.peak_bytes)
    s.budget = budget_bytes
    s.consider(base, ())
    floor = peak_floor(graph, includes)
    lanes = s.lanes(joint)
    # the checkpointing policies' own peaks are rungs too (of every ladder they fall in), so a
    # budget at such a peak meets that plan and what the solver finds there
    extra = {s.starts(lane).peak_bytes for lane in lanes if lane.start is not None}
    for lane in lanes:
        s.ladder(lane, floor.bytes, levels, extra)
    rungs = sorted({lv for lane in lanes for lv in s.ladders[lane.key].rungs})
    eligible = [lv for lv in rungs if lv <= budget_bytes]
    work = s.make_candidates(lanes, eligible, rounds if joint else 1)
    s.evaluate_all(work)
    if s.best is None:  # say how low a plan does get: the lowest rung above the budget that works
        for lv in [lv for lv in rungs if lv > budget_bytes]:
            if s.out_of_time():
                break
            before = s.smallest
            s.evaluate_all(s.make_candidates(lanes, [lv], 1), prove_all=True)
            if s.smallest is not before:
                break
        raise _below_floor(budget_bytes, floor, s, base)
    best, _ = s.best
    return RematSearch(
        budget_bytes=budget_bytes,
        chosen=best,
        baseline=base,
        floor=floor,
        levels=tuple(rungs),
        solver=solver,
        policy=policy,
        joint=joint,
        candidates=s.candidates,
        analyses=s.analyses,
        search_time_s=time.perf_counter() - t0,
        includes=includes,
        evaluated=s.evaluated,
        complete=not s.stopped,
    )


def _below_floor(budget_bytes: int, floor: PeakFloor, s: Search, base: PlanCandidate) -> BudgetError:
    smallest = s.smallest or base
    found = f"the smallest worst-case peak found is {fmt_mib(smallest.peak_bytes)}"
    if smallest is not base:
        n = smallest.recomputed_ops
        found += f" ({n} recomputation{'s' if n != 1 else ''}, {s.policy})"
    else:
        found += f" (no rematerialization, {s.policy})"
    if s.stopped:
        found += " before the search's time limit stopped it"
    return BudgetError(
        f"no plan fits a budget of {fmt_mib(budget_bytes)}: {found}; "
        f"no plan can go below {fmt_mib(floor.bytes)}: {floor.reason()}",
        hint=f"choose a budget of at least {fmt_mib(smallest.peak_bytes)}",
    )
