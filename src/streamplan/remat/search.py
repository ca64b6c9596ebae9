"""Rematerialization jointly with stream scheduling, under a budget on the real peak.

The budget bounds the **worst-case peak over every timing of the final multi-stream
schedule**, as ``memory.worst_case`` proves it (its upper bound) — never a solver's
own estimate. The cost is the simulated makespan of that schedule.

A solver plans on one *reference order* (host-order peak, which is exact on one
stream). The search:

1. schedules the graph with the policy (the baseline) and measures it;
2. builds a ladder of solver targets between the floor no plan can go below and the
   reference order's own peak (``levels`` rungs, independent of the budget);
3. for each rung at or under the budget and each *lane* — a stream cap (joint mode:
   the given one and its halvings down to one, since concurrency, not only lifetimes,
   sets a multi-stream worst case) and a reference order (the policy's launch order
   under that cap, and the graph's one-stream order) — solves, rewrites the graph,
   schedules the result with the policy (``make_schedule``, so any policy plugs in),
   simulates it and, when it could be the answer, proves its worst case; in joint mode
   it then plans again on the new schedule's launch order, and so on for ``rounds``
   rounds or until the order repeats: remat changes what runs in parallel, the
   schedule changes what the plan should drop;
4. answers with the fastest candidate whose worst case fits (ties: lower peak, less
   added compute); the baseline and the plain graph under each smaller stream cap are
   candidates too.

Monotone by construction: the candidates of a budget are those of every rung at or
below it, so a larger budget sees a superset of them and can only answer faster (or
as fast with a peak no higher); and the peak reported is the analysis of the
answer's own schedule, so it never exceeds the budget.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from streamplan.cost.simulate import simulate
from streamplan.cost.timeline import Timeline
from streamplan.errors import BudgetError, StreamplanError
from streamplan.ir.graph import Graph
from streamplan.ir.includes import Includes
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.worst_case import WorstCasePeak, worst_case_peak
from streamplan.remat.budget import PeakFloor, fmt_mib, peak_floor
from streamplan.remat.orders import updates_early
from streamplan.remat.problem import RematProblem
from streamplan.remat.rewrite import recomputations, rewrite
from streamplan.remat.solution import SolverResult
from streamplan.remat.solvers import DEFAULT_SOLVER, solve, solver_info
from streamplan.schedule.context import DEFAULT_CONTEXT, MemoryBudget, ScheduleContext
from streamplan.schedule.registry import make_schedule

DEFAULT_LEVELS = 12
DEFAULT_ROUNDS = 2
POLICY_ORDER = "policy order"
ONE_STREAM_ORDER = "one-stream order"
UPDATES_EARLY_ORDER = "updates-early order"


@dataclass(frozen=True)
class PlanCandidate:
    """One rewritten graph, its schedule under the policy, and what they cost.

    ``worst_case`` is None when the candidate was slower than an answer already found
    (its peak could not change the answer, so it was not proven). ``level_bytes`` is the
    solver target it came from (None for the baseline), ``reference`` the order the
    solver planned on and ``round`` the alternation round.
    """

    graph: Graph
    schedule: StreamSchedule
    timeline: Timeline
    worst_case: WorstCasePeak | None
    added_compute_ms: float
    recomputed_ops: int
    level_bytes: int | None = None
    reference: str = "baseline"
    round: int = 0
    solve: SolverResult | None = field(default=None, compare=False)
    max_streams: int = 0  # the stream cap the policy ran under

    @property
    def makespan_ms(self) -> float:
        return self.timeline.makespan_ms

    @property
    def peak_bytes(self) -> int | None:
        return None if self.worst_case is None else self.worst_case.upper_bytes

    def rank(self, tie: tuple) -> tuple:
        """Sort key: faster, then lower worst case, then less added compute, then ``tie``."""
        return (self.makespan_ms, self.peak_bytes, self.added_compute_ms, tie)


@dataclass(frozen=True)
class RematSearch:
    """The answer (``chosen``), the baseline, the floor, and how much searching it took."""

    budget_bytes: int
    chosen: PlanCandidate
    baseline: PlanCandidate
    floor: PeakFloor
    levels: tuple[int, ...]
    solver: str
    policy: str
    joint: bool
    candidates: int
    analyses: int
    search_time_s: float
    includes: Includes


def search(
    graph: Graph,
    budget: str | int | float,
    *,
    policy: str = "asap",
    solver: str = DEFAULT_SOLVER,
    ctx: ScheduleContext | None = None,
    includes: Includes = Includes(),
    levels: int = DEFAULT_LEVELS,
    rounds: int = DEFAULT_ROUNDS,
    joint: bool = True,
    policy_time_limit_s: float | None = None,
) -> RematSearch:
    """The fastest plan (and schedule) whose worst-case peak fits ``budget``.

    ``budget``: bytes, text such as ``"2GiB"``, or a factor of the baseline's worst-case
    peak (``"0.4x"``). ``joint=False`` plans on the one-stream order only and schedules
    the result once ("remat for one stream, then schedule"). ``policy_time_limit_s`` bounds
    each scheduling of a candidate (a searching policy such as ``budget`` runs once per
    candidate; default: the context's time limit). Raises ``BudgetError``
    (with the smallest peak found and why no plan goes lower) when nothing fits.
    """
    ctx = ctx or DEFAULT_CONTEXT
    solver_info(solver)
    if levels < 1 or rounds < 1:
        raise BudgetError("levels and rounds must be at least 1")
    t0 = time.perf_counter()
    s = _Search(graph, policy, solver, ctx, includes)
    if policy_time_limit_s is not None:
        s.policy_ctx = ctx.replace(time_limit_s=min(ctx.time_limit_s, policy_time_limit_s))
    base = s.baseline()
    budget_bytes = MemoryBudget.parse(budget).limit_for(base.peak_bytes)
    s.budget = budget_bytes
    s.consider(base, ())
    floor = peak_floor(graph, includes)
    # lanes: (stream cap, reference order name, order); joint mode also tries fewer streams
    lanes: list[tuple[int, str, tuple[str, ...]]] = []
    early = updates_early(graph)  # a training step: each optimizer update right after its gradient
    for cap in stream_caps(ctx.max_streams) if joint else (ctx.max_streams,):
        plain = base if cap == ctx.max_streams else s.plain(cap)  # fewer streams, no recomputation
        refs = [(ONE_STREAM_ORDER, graph.node_ids)]
        if early is not None:
            refs.append((UPDATES_EARLY_ORDER, early))
        if joint and plain.schedule.launch_order != graph.node_ids:
            refs.insert(0, (POLICY_ORDER, plain.schedule.launch_order))
        lanes.extend(
            (cap, name, order) for name, order in refs if (cap, order) not in {(c, o) for c, _, o in lanes}
        )
    ladders = [_ladder(s.problem(order), floor.bytes, levels) for _, _, order in lanes]
    rungs = sorted({lv for ladder in ladders for lv in ladder})
    eligible = [lv for lv in rungs if lv <= budget_bytes]
    for lv in sorted(eligible, reverse=True):  # the fastest plans come first: fewer proofs after
        ctx.progress(f"remat: target {fmt_mib(lv)}", None, None)
        for i, (cap, name, order) in enumerate(lanes):
            if lv in ladders[i]:
                s.chain(lv, cap, name, i, order, rounds if joint else 1)
    if s.best is None:  # say how low a plan does get: the lowest rung above the budget that works
        for lv in [lv for lv in rungs if lv > budget_bytes]:
            before = s.smallest
            for i, (cap, name, order) in enumerate(lanes):
                if lv in ladders[i]:
                    s.chain(lv, cap, name, i, order, 1)
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
    )


def stream_caps(max_streams: int) -> tuple[int, ...]:
    """The stream caps the joint search tries: the given one, then halvings down to one."""
    caps, c = [], max_streams
    while c >= 1:
        caps.append(c)
        c //= 2
    return tuple(dict.fromkeys(caps))


def _ladder(problem: RematProblem, floor_bytes: int, levels: int) -> list[int]:
    """Solver targets from the floor up to (not including) the reference order's own peak."""
    top = problem.baseline_peak_bytes()
    if top <= floor_bytes:
        return []
    return sorted({floor_bytes + (top - floor_bytes) * i // levels for i in range(levels)})


def project(launch_order: tuple[str, ...], graph: Graph) -> tuple[str, ...]:
    """The original ops of ``graph`` in the order a rewritten graph's schedule launches them."""
    return tuple(op for op in launch_order if graph.has_node(op))


class _Search:
    def __init__(self, graph: Graph, policy: str, solver: str, ctx: ScheduleContext, includes: Includes):
        self.graph = graph
        self.policy = policy
        self.solver = solver
        self.ctx = ctx
        self.includes = includes
        self.policy_ctx = ctx  # what candidates are scheduled under (a shorter time limit, maybe)
        self.budget: int | None = None  # set once the baseline has scaled a factor budget
        self.base: PlanCandidate | None = None
        self.best: tuple[PlanCandidate, tuple] | None = None
        self.smallest: PlanCandidate | None = None  # the lowest proven peak seen (for the error)
        self.schedules: dict[tuple, StreamSchedule | None] = {}
        self.runs: dict[tuple, list] = {}  # (graph, schedule) -> [timeline, worst case, added ms, ops]
        self.problems: dict[tuple[str, ...], RematProblem] = {}
        self.candidates = 0
        self.analyses = 0

    def problem(self, order: tuple[str, ...]) -> RematProblem:
        if order not in self.problems:
            self.problems[order] = RematProblem.build(self.graph, order, self.ctx.cost, self.includes)
        return self.problems[order]

    def worst_case(self, graph: Graph, schedule: StreamSchedule) -> WorstCasePeak:
        self.analyses += 1
        return worst_case_peak(
            graph,
            schedule,
            includes=self.includes,
            time_limit_s=self.ctx.time_limit_s,
            seed=self.ctx.seed,
        )

    def baseline(self) -> PlanCandidate:
        sched = make_schedule(self.graph, self.policy, self.ctx)
        timeline = simulate(self.graph, sched, self.ctx.cost)
        wc = self.worst_case(self.graph, sched)
        base = PlanCandidate(self.graph, sched, timeline, wc, 0.0, 0, max_streams=self.ctx.max_streams)
        self._note_smallest(base)
        self.base = base
        return base

    def plain(self, cap: int) -> PlanCandidate:
        """The graph as it is, scheduled under a smaller stream cap: a candidate too."""
        sched = make_schedule(self.graph, self.policy, self.ctx.replace(max_streams=cap))
        if self.base is not None and sched == self.base.schedule:
            return self.base  # the cap changed nothing
        timeline = simulate(self.graph, sched, self.ctx.cost)
        self.candidates += 1
        wc = None
        if self.best is None or timeline.makespan_ms <= self.best[0].makespan_ms:
            wc = self.worst_case(self.graph, sched)
        cand = PlanCandidate(
            self.graph, sched, timeline, wc, 0.0, 0, reference="fewer streams", max_streams=cap
        )
        self._note_smallest(cand)
        self.consider(cand, (0, cap))
        return cand

    def consider(self, cand: PlanCandidate, tie: tuple) -> None:
        if cand.worst_case is None or self.budget is None or cand.peak_bytes > self.budget:
            return
        if self.best is None or cand.rank(tie) < self.best[0].rank(self.best[1]):
            self.best = (cand, tie)

    def _note_smallest(self, cand: PlanCandidate) -> None:
        if cand.worst_case is not None and (
            self.smallest is None or cand.peak_bytes < self.smallest.peak_bytes
        ):
            self.smallest = cand

    def chain(self, level: int, cap: int, name: str, lane: int, order: tuple[str, ...], rounds: int) -> None:
        """Plan at ``level`` on ``order``, schedule under ``cap`` streams, and (joint mode) plan
        again on the new schedule's order."""
        for rnd in range(rounds):
            problem = self.problem(order)
            result = solve(
                self.solver, problem, level, time_limit_s=self.ctx.time_limit_s, seed=self.ctx.seed
            )
            if not result.found:
                return
            cand = self.evaluate(rewrite(problem, result.sequence), level, cap, name, rnd, result)
            if cand is None:
                return
            self.consider(cand, (-level, lane, rnd))
            nxt = project(cand.schedule.launch_order, self.graph)
            if nxt == order:
                return
            order = nxt

    def evaluate(
        self, graph: Graph, level: int, cap: int, name: str, rnd: int, result: SolverResult
    ) -> PlanCandidate | None:
        """Schedule, simulate and (when it could be the answer) prove a rewritten graph.

        Results are cached by graph and schedule, so a plan met again (at another target,
        or from another order) costs nothing and every chain runs the same whatever was
        searched before it: the candidates of a target never depend on the budget.
        """
        gkey = tuple((n.id, n.inputs, n.after) for n in graph.nodes)
        budget = MemoryBudget(level, includes=self.includes)
        skey = (gkey, level, cap)
        if skey not in self.schedules:
            try:
                ctx = self.policy_ctx.replace(budget=budget, max_streams=cap)
                self.schedules[skey] = make_schedule(graph, self.policy, ctx)
            except StreamplanError:
                self.schedules[skey] = None  # a policy that cannot schedule this graph under the level
        sched = self.schedules[skey]
        if sched is None:
            return None
        key = (gkey, sched)
        if key not in self.runs:
            self.candidates += 1
            recomputed = recomputations(graph)
            added = sum(self.ctx.cost.op_time_ms(graph, n) for n in recomputed)
            self.runs[key] = [simulate(graph, sched, self.ctx.cost), None, added, len(recomputed)]
        run = self.runs[key]
        timeline = run[0]
        if run[1] is None and (self.best is None or timeline.makespan_ms <= self.best[0].makespan_ms):
            run[1] = self.worst_case(graph, sched)  # it could be the answer: prove its peak
        cand = PlanCandidate(graph, sched, timeline, run[1], run[2], run[3], level, name, rnd, result, cap)
        self._note_smallest(cand)
        return cand


def _below_floor(budget_bytes: int, floor: PeakFloor, s: _Search, base: PlanCandidate) -> BudgetError:
    smallest = s.smallest or base
    found = f"the smallest worst-case peak found is {fmt_mib(smallest.peak_bytes)}"
    if smallest is not base:
        n = smallest.recomputed_ops
        found += f" ({n} recomputation{'s' if n != 1 else ''}, {s.policy})"
    else:
        found += f" (no rematerialization, {s.policy})"
    return BudgetError(
        f"no plan fits a budget of {fmt_mib(budget_bytes)}: {found}; "
        f"no plan can go below {fmt_mib(floor.bytes)}: {floor.reason()}",
        hint=f"choose a budget of at least {fmt_mib(smallest.peak_bytes)}",
    )
