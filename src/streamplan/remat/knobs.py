"""Rematerialization as one more knob of a parallel plan.

``budget.knobs.prescribe`` evaluates every setting of a plan's knobs (prefetch depth,
in-flight limit, reshard, ``record_stream``, buckets) and keeps the fastest whose worst-case
allocator peak fits the budget. A faster setting that is over the budget may still be the
better answer once some activations are recomputed: recomputation costs compute, a slower
setting costs exposed communication. ``prescribe_with_remat`` finds out.

Which settings are tried: those that could beat the choice: any when nothing fits or the
choice fits only by returning cached memory to the device (``budget.knobs``: the choice
prefers settings that need not), else those faster than the choice that are over the
budget or have to return memory; in turn the fastest and the least held (recomputation
lowers what is held, and the allocator needs at least that), at most ``tries`` per round. A round aims to fit at all
when nothing does, then to fit without returning cached memory. Each is given to the
rematerialization search (``remat.search``, jointly with the ``overlap`` schedule and that
setting's knobs), and the rewritten rank program is evaluated exactly like every other
setting (``budget.knobs.evaluate``): its own simulated step, recomputations included, and
its own allocator peak decide.

Two figures meet here. A setting fits when the torch-cuda allocator, replayed under
maximal run-ahead (allocations at host launch, frees held by ``record_stream``) with the
budget as its device memory, never runs out; the search bounds the device worst case over
every timing, in exact sizes. The search cannot plan on the first. To fit without returning cached
memory, the allocator's reserved bytes must stay within the budget: the search is given
the budget less what the cache adds to the device figure on the setting without remat, and
lowered by the excess when the rewritten program is still over. To fit at all (by returning
the cache), there is no such measure (under a cap the allocator is not monotone: it can fit
a smaller capacity and not a larger one), so the search starts just under the budget and,
when the rewritten program still does not fit, asks for less by what the device memory it
runs in (``budget.knobs.needed_bytes``) exceeds the budget, at least ``STEP`` of the target.
At most ``ROUNDS`` rounds either way.
The answer is therefore always checked on the budget's own figure; what is not guaranteed
is that the search found the fastest remat plan for that figure (it found the fastest for
the target it was given).
"""

from __future__ import annotations

import dataclasses
import time

from streamplan.budget.knobs import (
    MIB,
    KnobPlan,
    KnobPoint,
    evaluate,
    knob_context,
    knob_settings,
    needed_bytes,
    prescribe,
)
from streamplan.errors import BudgetError
from streamplan.ir.graph import Graph
from streamplan.ir.includes import EVERYTHING
from streamplan.memory.worst_case import worst_case_peak
from streamplan.parallel import ParallelPlan, rank_program
from streamplan.progress import ProgressFn, no_progress
from streamplan.remat.budget import peak_floor
from streamplan.remat.search import search
from streamplan.schedule.context import DEFAULT_CONTEXT, ScheduleContext
from streamplan.schedule.registry import make_schedule

DEFAULT_TRIES = 3
ROUNDS = 4
STEP = 0.06  # how much lower each round asks for, when the allocator gives no measure of what is missing


def prescribe_with_remat(
    step: Graph,
    plan: ParallelPlan | str,
    *,
    budget_bytes: int | None = None,
    ctx: ScheduleContext | None = None,
    tries: int = DEFAULT_TRIES,
    progress: ProgressFn = no_progress,
) -> KnobPlan:
    """``budget.knobs.prescribe``, then rematerialization on up to ``tries`` settings per round
    that could beat the choice (module docstring): first to fit at all when nothing does, then
    to fit without returning cached memory when the choice has to. Without a budget, or with
    ``tries=0``, it is ``prescribe`` itself."""
    ctx = ctx or DEFAULT_CONTEXT
    plan = ParallelPlan.parse(plan)
    if tries < 0:
        raise BudgetError(f"the number of settings to try rematerialization on is at least 0, got {tries}")
    t0 = time.perf_counter()
    grid = prescribe(step, plan, budget_bytes=budget_bytes, ctx=ctx, progress=progress)
    if budget_bytes is None or tries == 0:
        return grid
    by_plan = {p.describe(): p for p in knob_settings(plan)}
    programs: dict[str, Graph] = {}
    tried: dict[str, int] = {}  # setting -> the class its recomputations reached (2: none fitted)
    for _ in range(2):  # at most: a round to fit at all, then one to fit without returning the cache
        goal = remat_goal(grid)
        candidates = remat_candidates(grid, tries, tried)
        if not candidates:
            break
        found = []
        for k, point in enumerate(candidates):
            progress("knobs: rematerialization on the settings that do not fit", k, len(candidates))
            setting = by_plan[point.plan]
            if point.plan not in programs:
                programs[point.plan] = rank_program(step, setting)
            remat = remat_setting(programs[point.plan], setting, point, budget_bytes, ctx, goal)
            tried[point.plan] = 2 if remat is None else remat.fit_class
            if remat is not None:
                found.append(remat)
        grid = grid.with_points(tuple(found), time.perf_counter() - t0, len(tried))
        if goal == 0:
            break
    return grid


def remat_goal(grid: KnobPlan) -> int:
    """The class (``KnobPoint.fit_class``) a setting with recomputations must reach to matter: to
    fit at all when nothing does, else to fit without returning cached memory."""
    return 1 if grid.chosen is None else 0


def remat_candidates(grid: KnobPlan, tries: int, tried: dict[str, int]) -> list[KnobPoint]:
    """The settings that could beat the choice once they reach ``remat_goal``, not tried before
    (or tried and brought to fit only by returning the cache, when the goal is to fit without;
    a setting no recomputation made fit is not tried again): every one that does not reach it
    when nothing fits or the choice has to return its cache, else those faster than the
    choice that do not. Taken in turn from two orders: the
    fastest (what is most worth fitting; ties: least held) and the least held (what is
    likeliest to fit: recomputation lowers what is held, and the allocator needs at least
    that; ties: fastest)."""
    chosen, goal = grid.chosen, remat_goal(grid)
    pool = [
        p
        for p in grid.points
        if p.fit_class > goal and not p.recomputed_ops and (p.plan not in tried or goal < tried[p.plan] < 2)
    ]
    if chosen is not None and chosen.fit_class == 0:
        pool = [p for p in pool if p.step_ms < chosen.step_ms]
    fastest = sorted(pool, key=lambda p: (p.step_ms, p.held_bytes))
    leanest = sorted(pool, key=lambda p: (p.held_bytes, p.step_ms))
    out: list[KnobPoint] = []
    for a, b in zip(fastest, leanest, strict=True):
        for p in (a, b):
            if p not in out and len(out) < tries:
                out.append(p)
    return out


def remat_setting(
    program: Graph,
    setting: ParallelPlan,
    point: KnobPoint,
    budget_bytes: int,
    ctx: ScheduleContext,
    goal: int,
) -> KnobPoint | None:
    """``point``'s setting with recomputations that make it fit ``budget_bytes`` in class ``goal``
    (``KnobPoint.fit_class``: 0 without returning cached memory, 1 by returning it), or, when
    none does and ``point`` did not fit at all, one that fits by returning the cache; None when
    the search finds neither (module docstring: the two figures and the rounds)."""
    fits_at_all = None
    if goal == 0 and point.fit_class == 2:
        fits_at_all = _remat_to(program, setting, point, budget_bytes, ctx, 1)
        if fits_at_all is None:
            return None  # if it cannot fit by returning the cache, it cannot fit without
        if fits_at_all.fit_class == 0:
            return fits_at_all
    return _remat_to(program, setting, point, budget_bytes, ctx, goal) or fits_at_all


def _remat_to(
    program: Graph,
    setting: ParallelPlan,
    point: KnobPoint,
    budget_bytes: int,
    ctx: ScheduleContext,
    goal: int,
) -> KnobPoint | None:
    floor = peak_floor(program, EVERYTHING).bytes
    if budget_bytes < floor:  # no recomputation goes below it (the search would only say so, slowly)
        return None
    knobbed = knob_context(setting, ctx)
    schedule = make_schedule(program, "overlap", knobbed)
    device_bytes = worst_case_peak(program, schedule, includes=EVERYTHING, time_limit_s=ctx.time_limit_s)
    if goal == 0:  # the cache must stay within the budget: subtract what it adds to the device figure
        target = budget_bytes - max(point.peak_bytes - device_bytes.upper_bytes, 0)
    else:  # under a cap the allocator's needs are not monotone: start just under the budget
        target = int(min(device_bytes.upper_bytes, budget_bytes) * (1 - STEP))
    for _ in range(ROUNDS):
        if target < floor:
            return None
        try:
            found = search(program, target, policy="overlap", ctx=knobbed, includes=EVERYTHING, rounds=1)
        except BudgetError:
            return None
        chosen = found.chosen
        if chosen.recomputed_ops:
            after = evaluate(chosen.graph, setting, ctx, budget_bytes)
            if after.fit_class <= goal:
                needs = needed_bytes(chosen.graph, setting, ctx)
                return dataclasses.replace(
                    after,
                    recomputed_ops=chosen.recomputed_ops,
                    added_compute_ms=chosen.added_compute_ms,
                    needed_bytes=min(needs, budget_bytes),
                )
            if goal == 0:
                target -= max(after.peak_bytes - budget_bytes, MIB)
            else:  # the device memory the rewritten program runs in says how much is still missing
                missing = needed_bytes(chosen.graph, setting, ctx) - budget_bytes
                target = min(target, chosen.peak_bytes) - max(missing, int(target * STEP))
            continue
        # met by the schedule alone, or fits no better: ask for less than this answer holds
        target = int(min(target, chosen.peak_bytes or target) * (1 - STEP))
    return None
