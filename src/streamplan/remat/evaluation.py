"""The candidates of a rematerialization search and their evaluation (``remat.search`` drives them).

``Search`` holds one search's state: the *lanes* (a stream cap and a reference order, and
whether plans come from the solver or from a checkpointing policy), each lane's ladder of
solver targets, the candidates the rungs make (``Work``: a plan with its makespan bound),
and their evaluation in order of that bound: rewrite, schedule with the policy, simulate,
and prove the worst case of those that could be the answer, keeping the fastest that fits.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import time
from dataclasses import dataclass

from streamplan.cost.simulate import simulate
from streamplan.cost.timeline import Timeline
from streamplan.errors import StreamplanError
from streamplan.ir.graph import Graph
from streamplan.ir.includes import PARAM_KINDS, Includes
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.worst_case import STOPPED_METHOD, WorstCasePeak, worst_case_peak
from streamplan.remat.bound import MakespanBound
from streamplan.remat.budget import fmt_mib
from streamplan.remat.candidates import (
    ONE_STREAM_ORDER,
    POLICY_ORDER,
    UPDATES_EARLY_ORDER,
    PlanCandidate,
)
from streamplan.remat.checkpoint import CHECKPOINT_POLICIES, blocks, checkpoint_plan
from streamplan.remat.orders import updates_early
from streamplan.remat.problem import RematProblem
from streamplan.remat.rewrite import recomputations, rewrite
from streamplan.remat.scalable import Pruned
from streamplan.remat.solution import SolverResult
from streamplan.remat.solvers import Ladder, solve
from streamplan.schedule.context import MemoryBudget, ScheduleContext
from streamplan.schedule.live_bytes import sequential_peak_bytes
from streamplan.schedule.registry import make_schedule

_TOLERANCE = 1e-9  # relative: a bound this close to a makespan may be that makespan summed otherwise


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


@dataclass(frozen=True)
class Lane:
    """A stream cap, the reference order plans are made on, and how: by the solver, or from an
    activation-checkpointing policy (``remat.checkpoint``) pruned to each rung."""

    index: int
    cap: int
    name: str
    order: tuple[str, ...]
    start: str | None = None  # the checkpointing policy the plans start from (None: the solver)

    @property
    def key(self) -> tuple:
        return (self.order, self.start)

    @property
    def reference(self) -> str:
        return self.name if self.start is None else f"{self.name}, from {self.start} checkpointing"


@dataclass
class Work:
    """A plan waiting to be evaluated: where it came from and its makespan bound."""

    bound_ms: float
    level: int
    lane: Lane
    round: int
    order: tuple[str, ...]
    result: SolverResult
    graph: Graph | None = None
    schedule: StreamSchedule | None = None

    @property
    def tie(self) -> tuple:
        return (-self.level, self.lane.index, self.round)


class Search:
    """One search's state: its lanes and ladders, the candidates they make, and their evaluation
    (bound first, then schedule and simulate, then prove the worst case) down to the best that fits."""

    def __init__(self, graph: Graph, policy: str, solver: str, ctx: ScheduleContext, includes: Includes):
        self.graph = graph
        self.policy = policy
        self.solver = solver
        self.ctx = ctx
        self.includes = includes
        self.policy_ctx = ctx  # what candidates are scheduled under (a shorter time limit, maybe)
        self.budget: int | None = None  # set once the baseline has scaled a factor budget
        self.deadline: float | None = None
        self.stopped = False
        self.base: PlanCandidate | None = None
        self.best: tuple[PlanCandidate, tuple] | None = None
        self.smallest: PlanCandidate | None = None  # the lowest proven peak seen (for the error)
        self.bound = MakespanBound.of(graph, ctx.cost)
        self.pending: list[tuple[PlanCandidate, tuple]] = []  # simulated, not yet proven
        self.schedules: dict[tuple, StreamSchedule | None] = {}
        self.runs: dict[tuple, list] = {}  # (graph, schedule) -> [timeline, worst case, added ms, ops]
        self.graphs: dict[tuple, Graph] = {}  # (order, plan) -> rewritten graph
        self.problems: dict[tuple[str, ...], RematProblem] = {}
        self.ladders: dict[tuple, Ladder] = {}
        self.seeded: dict[tuple, Pruned] = {}
        self.resident_bytes = _resident_bytes(graph, includes)
        self.candidates = 0
        self.evaluated = 0
        self.analyses = 0

    # -- set-up ---------------------------------------------------------------------------
    def problem(self, order: tuple[str, ...]) -> RematProblem:
        if order not in self.problems:
            self.problems[order] = RematProblem.build(self.graph, order, self.ctx.cost, self.includes)
        return self.problems[order]

    def starts(self, lane: Lane) -> Pruned:
        """The plans a seeded lane starts from (its checkpointing policy's plan, pruned per rung)."""
        if lane.key not in self.seeded:
            problem = self.problem(lane.order)
            self.seeded[lane.key] = Pruned(
                problem, checkpoint_plan(problem, lane.start), time_limit_s=self.ctx.time_limit_s
            )
        return self.seeded[lane.key]

    def ladder(self, lane: Lane, floor_bytes: int, levels: int, extra: set[int]) -> Ladder:
        if lane.key not in self.ladders:
            problem = self.problem(lane.order)
            rungs = _ladder(problem, floor_bytes, levels)
            if rungs:
                rungs = sorted({*rungs, *(x for x in extra if rungs[0] <= x < problem.baseline_peak_bytes())})
            self.ladders[lane.key] = Ladder(
                self.solver,
                problem,
                tuple(rungs),
                time_limit_s=self.ctx.time_limit_s,
                seed=self.ctx.seed,
                start=None if lane.start is None else self.starts(lane),
            )
        return self.ladders[lane.key]

    def lanes(self, joint: bool) -> list[Lane]:
        """(stream cap, reference order) pairs; joint mode also tries fewer streams."""
        early = updates_early(self.graph)  # a training step: each optimizer update right after its gradient
        lanes: list[Lane] = []
        for cap in stream_caps(self.ctx.max_streams) if joint else (self.ctx.max_streams,):
            plain = self.base if cap == self.ctx.max_streams else self.plain(cap)  # no recomputation
            refs = [(ONE_STREAM_ORDER, self.graph.node_ids)]
            if early is not None:
                refs.append((UPDATES_EARLY_ORDER, early))
            if joint and plain.schedule.launch_order != self.graph.node_ids:
                refs.insert(0, (POLICY_ORDER, project(plain.schedule.launch_order, self.graph)))
            for name, order in refs:
                if all((lane.cap, lane.order) != (cap, order) for lane in lanes):
                    lanes.append(Lane(len(lanes), cap, name, order))
        if self._has_blocks():  # plans from the frameworks' checkpointing policies, pruned to each rung
            for lane in [lane for lane in lanes if lane.name != POLICY_ORDER]:
                for start in CHECKPOINT_POLICIES:
                    lanes.append(Lane(len(lanes), lane.cap, lane.name, lane.order, start))
        return lanes

    def _has_blocks(self) -> bool:
        try:
            blocks(self.graph)
        except StreamplanError:
            return False
        return True

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
        sched = make_schedule(self.graph, self.policy, self.policy_ctx.replace(max_streams=cap))
        if self.base is not None and sched == self.base.schedule:
            return self.base  # the cap changed nothing
        timeline = simulate(self.graph, sched, self.ctx.cost)
        self.candidates += 1
        self.evaluated += 1
        cand = PlanCandidate(
            self.graph, sched, timeline, None, 0.0, 0, reference="fewer streams", max_streams=cap
        )
        self.pending.append((cand, (0, cap)))  # proven, if it may be the answer, with the plans
        return cand

    # -- candidates ------------------------------------------------------------------------
    def make_candidates(self, lanes: list[Lane], levels: list[int], rounds: int) -> list[Work]:
        """Every plan of every lane at ``levels``, with alternation rounds. What is made here
        depends on the rungs alone, never on the budget or on what was evaluated."""
        work: list[Work] = []
        for lv in sorted(levels, reverse=True):
            self.ctx.progress(f"remat: plans for target {fmt_mib(lv)}", None, None)
            for lane in lanes:
                ladder = self.ladders[lane.key]
                if lv not in ladder.rungs:
                    continue
                order, result = lane.order, ladder.plan(lv)
                for rnd in range(rounds if lane.start is None else 1):
                    if not result.found:
                        break
                    problem = self.problem(order)
                    item = Work(
                        self.bound.plan_ms(problem, result.sequence, lane.cap), lv, lane, rnd, order, result
                    )
                    work.append(item)
                    self.candidates += 1
                    if rnd + 1 == rounds or lane.start is not None:
                        break
                    sched = self.schedule_of(item)  # the next round plans on this schedule's order
                    if sched is None:
                        break
                    nxt = project(sched.launch_order, self.graph)
                    if nxt == order:
                        break
                    order = nxt
                    result = solve(
                        self.solver,
                        self.problem(order),
                        lv,
                        time_limit_s=self.ctx.time_limit_s,
                        seed=self.ctx.seed,
                    )
        return work

    def graph_of(self, item: Work) -> Graph:
        if item.graph is None:
            key = (item.order, item.result.sequence)
            if key not in self.graphs:
                self.graphs[key] = rewrite(self.problem(item.order), item.result.sequence)
            item.graph = self.graphs[key]
        return item.graph

    def schedule_of(self, item: Work) -> StreamSchedule | None:
        """The policy's schedule of a plan's graph under its lane's cap and its rung as the budget
        (None: the policy could not schedule it)."""
        if item.schedule is None:
            graph = self.graph_of(item)
            gkey = tuple((n.id, n.inputs, n.after) for n in graph.nodes)
            skey = (gkey, item.level, item.lane.cap)
            if skey not in self.schedules:
                budget = MemoryBudget(item.level, includes=self.includes)
                try:
                    ctx = self.policy_ctx.replace(budget=budget, max_streams=item.lane.cap)
                    self.schedules[skey] = make_schedule(graph, self.policy, ctx)
                except StreamplanError:
                    self.schedules[skey] = None  # a policy that cannot schedule this graph under the level
            item.schedule = self.schedules[skey]
        return item.schedule

    # -- evaluation ------------------------------------------------------------------------
    def evaluate_all(self, work: list[Work], *, prove_all: bool = False) -> None:
        """Find the best of ``work`` (and of the plain graphs under fewer streams) exactly.

        Plans are simulated in order of their makespan bound, and simulated candidates are
        proven in order of their makespan, whichever comes first: the first that fits is the
        answer once nothing left can match it (a bound or a makespan past the answer's), so
        few plans are simulated and few worst cases proven. ``prove_all``: simulate and
        prove every plan (to say how low plans go when none fits).
        """
        items = sorted(work, key=lambda w: (w.bound_ms, w.tie))
        if prove_all:
            for item in items:
                if self.out_of_time():
                    self.stopped = True
                    return
                cand = self.simulated(item)
                if cand is not None:
                    self.prove(cand, item.tie, force=True)
            return
        waiting: list[tuple[float, float, tuple, int, PlanCandidate]] = []
        for cand, tie in self.pending:
            heapq.heappush(waiting, (cand.makespan_ms, cand.added_compute_ms, tie, len(waiting), cand))
        self.pending = []
        i, pushed = 0, len(waiting)
        while True:
            limit = self.best[0].makespan_ms if self.best is not None else math.inf
            nxt = items[i].bound_ms if i < len(items) else math.inf
            if waiting and waiting[0][0] <= nxt:
                ms, _, tie, _, cand = heapq.heappop(waiting)
                if not _within(ms, limit):
                    return  # every candidate left, simulated or not, is slower than the answer
                self.prove(cand, tie)
                continue
            if i == len(items) or not _within(nxt, limit):
                return  # no plan left can be faster than the answer
            if self.out_of_time():
                self.stopped = True
                return
            item = items[i]
            i += 1
            cand = self.simulated(item)
            if cand is not None:
                heapq.heappush(waiting, (cand.makespan_ms, cand.added_compute_ms, item.tie, pushed, cand))
                pushed += 1

    def simulated(self, item: Work) -> PlanCandidate | None:
        """A plan's graph scheduled and simulated (None: the policy could not schedule it). Runs are
        cached by graph and schedule: a plan met again costs nothing."""
        sched = self.schedule_of(item)
        if sched is None:
            return None
        graph = self.graph_of(item)
        key = (tuple((n.id, n.inputs, n.after) for n in graph.nodes), sched)
        if key not in self.runs:
            self.evaluated += 1
            recomputed = recomputations(graph)
            added = sum(self.ctx.cost.op_time_ms(graph, n) for n in recomputed)
            self.runs[key] = [simulate(graph, sched, self.ctx.cost), None, added, len(recomputed)]
        timeline, wc, added, count = self.runs[key]
        return PlanCandidate(
            graph, sched, timeline, wc, added, count, item.level, item.lane.reference, item.round, item.result,
            item.lane.cap,
        )  # fmt: skip

    def prove(self, cand: PlanCandidate, tie: tuple, *, force: bool = False) -> PlanCandidate:
        """``cand`` with its worst case, proven unless its host-order peak (a timing every schedule
        allows) is already over the budget (``force``: proven anyway); then considered."""
        if cand.worst_case is None or (force and cand.worst_case.method == STOPPED_METHOD):
            key = (tuple((n.id, n.inputs, n.after) for n in cand.graph.nodes), cand.schedule)
            run = self.runs.get(key)
            wc = run[1] if run is not None else None
            if force and wc is not None and wc.method == STOPPED_METHOD:
                wc = None  # only known to exceed the budget: now its peak is wanted
            if wc is None and (force or self._may_fit(cand)):
                wc = self.worst_case(
                    cand.graph,
                    cand.schedule,
                    stop_above_bytes=None if force else self.budget,
                    timeline=cand.timeline,
                )
                if run is not None:
                    run[1] = wc
            cand = dataclasses.replace(cand, worst_case=wc)
        self._note_smallest(cand)
        self.consider(cand, tie)
        return cand

    def _may_fit(self, cand: PlanCandidate) -> bool:
        if self.budget is None or cand.schedule.num_streams <= 1:
            return True  # on one stream the worst case is the host-order peak: cheap anyway
        host = self.resident_bytes + sequential_peak_bytes(cand.graph, cand.schedule.launch_order)
        return host <= self.budget

    def worst_case(
        self,
        graph: Graph,
        schedule: StreamSchedule,
        *,
        stop_above_bytes: int | None = None,
        timeline: Timeline | None = None,
    ) -> WorstCasePeak:
        """The worst case of a schedule (``stop_above_bytes``: once a timing is known to exceed
        it — the budget — no more: the candidate cannot be the answer)."""
        self.analyses += 1
        return worst_case_peak(
            graph,
            schedule,
            includes=self.includes,
            time_limit_s=self.ctx.time_limit_s,
            seed=self.ctx.seed,
            stop_above_bytes=stop_above_bytes,
            timeline=timeline,
        )

    def consider(self, cand: PlanCandidate, tie: tuple) -> None:
        if cand.worst_case is None or self.budget is None or cand.peak_bytes > self.budget:
            return
        if self.best is None or cand.rank(tie) < self.best[0].rank(self.best[1]):
            self.best = (cand, tie)

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.perf_counter() > self.deadline

    def _note_smallest(self, cand: PlanCandidate) -> None:
        if cand.worst_case is not None and (
            self.smallest is None or cand.peak_bytes < self.smallest.peak_bytes
        ):
            self.smallest = cand


def _within(ms: float, limit_ms: float) -> bool:
    """``ms`` is not slower than ``limit_ms`` (up to rounding: sums taken in another order)."""
    return ms <= limit_ms * (1 + _TOLERANCE) + _TOLERANCE


def _resident_bytes(graph: Graph, includes: Includes) -> int:
    """Bytes of the inputs and parameters a figure counts (always live)."""
    return sum(
        st.nbytes
        for st in graph.storages().values()
        if (st.kind == "input" and includes.inputs) or (st.kind in PARAM_KINDS and includes.params)
    )
