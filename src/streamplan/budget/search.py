"""The scalable budget search: the fastest schedule found whose budgeted figure fits.

Candidates, all simulated under the context's cost model:

1. the fixed policies' own schedules (sequential, memory, wavefront, asap, nimble and,
   where it is affordable, ios), kept when their figure fits the budget;
2. guarded variants (``budget.guard``) of bases, fastest base first: each multi-stream
   policy's stream assignment with its own launch order, the graph's order and the
   memory-optimal order, critical-path list scheduling on the stream cap, and greedy
   earliest-start streams (``budget.bases``), with admission waits that keep the
   launch-order position bound, hence the worst case, within the budget;
3. memory-aware list scheduling (``bases.memory_list_schedule``);
4. on small graphs, the best bases guarded to larger thresholds (kept when the worst-case
   analysis proves them within the budget), and their launch orders polished by local
   search (one op a step earlier at a time).

The memory-optimal one-stream order always fits a budget at or above the floor, so the
search never comes back empty.

A candidate fits when its position bound is within the budget (a proven upper bound
on the worst case), or, for a candidate faster than every fitting one, when the
worst-case analysis proves it within the time left. The caller checks the winner
again with the analysis (``figures.budget_figure``); ``BudgetSearch`` keeps the fixed
runs and the floor, so a Pareto front reuses them for every budget.

Linear-ish in ops: a guarded variant costs one pass with a vectorised bound per op
plus one simulation.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from streamplan.budget.bases import greedy_streams, list_schedule, memory_list_schedule
from streamplan.budget.cached import CachedCost, make_schedule_like
from streamplan.budget.figures import FigureCheck, Floor, memory_floor
from streamplan.budget.guard import guard_schedule
from streamplan.cost.simulate import simulate
from streamplan.errors import StreamplanError
from streamplan.ir.frozen import FrozenDict
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.position_bound import CountedStorages, counted_storages, position_bound
from streamplan.memory.worst_case import worst_case_peak
from streamplan.schedule.context import MemoryBudget, ScheduleContext
from streamplan.schedule.events import derive_waits
from streamplan.schedule.live_bytes import sequential_peak_bytes
from streamplan.schedule.registry import make_schedule, policy_info, unbudgeted_policies

FIXED_POLICIES = unbudgeted_policies()  # every policy that schedules without a budget
SEARCHED_MAX_OPS_WITH_BUDGET = (
    400  # above this, a searching policy (IOS) takes longer than a budget point should
)
ANALYSIS_SLACK = 1.25  # ask the worst-case analysis only when the position bound is this close
ANALYSIS_S_PER_OP = 0.002  # about what the worst-case analysis needs before its solver even starts
BASE_SLACK = 0.02  # a guarded base rarely beats its own unguarded makespan by more than this
RELAX_MAX_OPS = 400  # relaxed guards need the worst-case analysis of each try: small graphs only
RELAX_BASES = 3
RELAX_SLACKS = (1.1, 1.25, 1.5, 2.0)
POLISH_MAX_OPS = 200  # launch-order local search: one guard and one simulation per move
POLISH_S = 2.0
POLISH_BASES = 3


@dataclass(frozen=True)
class Candidate:
    """A verified schedule, its simulated makespan, and what proves its figure (None: unchecked)."""

    schedule: StreamSchedule
    makespan_ms: float
    source: str  # "asap", "guarded nimble (memory order)", ...
    bound_bytes: int | None = None  # the position bound (worst case) or arena size (arena figure)
    check: FigureCheck | None = None  # the memory analysis's figure, when the search ran it


@dataclass
class BudgetSearch:
    """The fixed schedules, the floor and the graph's storages, shared by every budget point."""

    graph: Graph
    ctx: ScheduleContext
    budget_kind: MemoryBudget  # figure and includes (its limit is ignored here)
    fixed: Sequence[str] = FIXED_POLICIES
    runs: dict[str, Candidate] = field(default_factory=dict)
    facts: CountedStorages | None = None
    floor: Floor | None = None
    tried: int = 0

    def __post_init__(self) -> None:
        self.facts = counted_storages(self.graph, includes=self.budget_kind.includes)
        self.cost = CachedCost(self.ctx.cost)
        self._plain_ctx = self.ctx.replace(options=FrozenDict(), budget=None, cost=self.cost)
        self._bounds: dict[tuple[str, int], int] = {}
        self._keep: list[Candidate] = []
        self._listed: Candidate | None = None
        self._base_cache: list[tuple[float, StreamSchedule, str]] | None = None

    # -- the fixed policies -------------------------------------------------------
    def fixed_runs(self, *, with_searched: bool = True, deadline: float | None = None) -> list[Candidate]:
        """Each fixed policy's schedule and makespan (computed once), fastest first; without
        ``with_searched``, not the policies whose own search grows steeply (``PolicyInfo.searched``).
        Past ``deadline`` no further policy runs (one at least does)."""
        for p in self.fixed:
            if p in self.runs or (policy_info(p).searched and not with_searched):
                continue
            if deadline is not None and self.runs and time.perf_counter() > deadline:
                break  # out of time: the policies run so far are the candidates
            self.ctx.progress(f"budget: {p} schedule", None, None)
            if self.floor is not None and p == self.floor.schedule.policy:
                # the floor is the memory-optimal policy's own order: computed once, reused
                s = make_schedule_like(self.graph, self.floor.schedule)
            else:
                ctx = self._plain_ctx
                if deadline is not None:  # a searching policy (ios) gets the time left, not more
                    ctx = ctx.replace(
                        time_limit_s=max(0.1, min(ctx.time_limit_s, deadline - time.perf_counter()))
                    )
                try:
                    s = make_schedule(self.graph, p, ctx)
                except StreamplanError:
                    continue  # a policy that cannot handle this graph is simply not a candidate
            self.runs[p] = Candidate(s, simulate(self.graph, s, self.cost).makespan_ms, p)
        return sorted(self.runs.values(), key=lambda c: c.makespan_ms)

    def fastest(self, *, deadline: float | None = None) -> Candidate:
        """The fastest schedule found with no budget: the fixed policies, and each multi-stream
        policy's streams launched in the graph's and the memory-optimal order (never slower than
        the best fixed policy, which is among the candidates). Past ``deadline``, what was found."""
        self.memory_floor()
        fixed = self.fixed_runs(deadline=deadline)
        best = fixed[0]
        for ms, base, source in self._base_runs(fixed, self.memory_floor(), deadline=deadline):
            if ms < best.makespan_ms:
                cand = self._candidate(base, source)
                if cand.makespan_ms < best.makespan_ms:
                    best = cand
        return best

    def memory_floor(self) -> Floor:
        if self.floor is None:
            self.floor = memory_floor(self.graph, self.budget_kind)
        return self.floor

    # -- one budget ---------------------------------------------------------------
    def best_under(
        self, limit_bytes: int, *, deadline: float, incumbents: Sequence[Candidate] = ()
    ) -> Candidate | None:
        """The fastest candidate found whose figure is proven within ``limit_bytes``."""
        small = len(self.graph.nodes) <= SEARCHED_MAX_OPS_WITH_BUDGET
        self.memory_floor()  # first: the memory policy's schedule is its order
        fixed = self.fixed_runs(
            with_searched=small or any(policy_info(p).searched for p in self.runs), deadline=deadline
        )
        best: Candidate | None = None
        unproven: list[Candidate] = []
        for c in sorted([*incumbents, *fixed], key=lambda c: c.makespan_ms):
            if self.witness_bytes(c) > limit_bytes:
                continue  # its host-order state is a timing that already exceeds the budget
            if self.bound_fits(c, limit_bytes):
                best = c  # the fastest one that fits: the rest are slower
                break
            unproven.append(c)
        floor = self.memory_floor()
        if floor.figure_bytes <= limit_bytes:
            one = self._candidate(floor.schedule, "memory order, one stream", floor.figure_bytes)
            if best is None or one.makespan_ms < best.makespan_ms:
                best = one
        guarded: list[tuple[Candidate, StreamSchedule, str]] = []
        for base_ms, base, source in self._base_runs(fixed, floor, deadline=deadline):
            if time.perf_counter() > deadline and best is not None:
                break
            if best is not None and base_ms >= best.makespan_ms * (1 + BASE_SLACK):
                break  # bases come fastest first; guarding adds waits, so the rest cannot win
            if self.facts.resident_bytes + sequential_peak_bytes(self.graph, base.launch_order) > limit_bytes:
                continue  # even waiting for everything, this launch order's host-order peak is over
            self.ctx.progress(f"budget: guarding {source}", None, None)
            self.tried += 1
            g = guard_schedule(self.graph, base, limit_bytes, self.cost, self.facts)
            if g is None:
                continue
            cand = self._candidate(g, f"guarded {source}", g.meta.get("position_bound_bytes"))
            guarded.append((cand, base, source))
            if best is not None and cand.makespan_ms >= best.makespan_ms:
                continue
            if self.budget_kind.figure == "arena" and self.bound_bytes(cand) > limit_bytes:
                continue
            best = cand
        mls = memory_list_schedule(self.graph, self.cost, self.ctx.max_streams, limit_bytes, self.facts)
        if mls is not None:
            cand = self._candidate(mls, "memory-aware list scheduling", None)
            if (best is None or cand.makespan_ms < best.makespan_ms) and (
                self.budget_kind.figure == "worst_case" or self.bound_bytes(cand) <= limit_bytes
            ):
                best = cand
        best = self._relaxed(best, guarded, limit_bytes, deadline)
        best = self._polish(best, guarded, limit_bytes, deadline)
        # Faster candidates the position bound could not clear: ask the worst-case analysis.
        for c in sorted(unproven, key=lambda c: c.makespan_ms):
            left = deadline - time.perf_counter()
            if left <= 0.5 or (best is not None and c.makespan_ms >= best.makespan_ms):
                break
            if self.bound_fits(c, int(ANALYSIS_SLACK * limit_bytes)) is False:
                continue  # the bound is far above: the exact analysis would rarely clear it
            if left < ANALYSIS_S_PER_OP * len(self.graph.nodes):
                break  # building the analysis alone would overrun the time left
            check = self._analysis(c.schedule, min(left, self.ctx.time_limit_s))
            if check is not None and check.upper_bytes <= limit_bytes:
                best = Candidate(c.schedule, c.makespan_ms, c.source, c.bound_bytes, check)
        return best

    def _relaxed(
        self,
        best: Candidate | None,
        guarded: list[tuple[Candidate, StreamSchedule, str]],
        limit_bytes: int,
        deadline: float,
    ) -> Candidate | None:
        """The position bound overstates the worst case, so guarding to it can serialise more
        than needed: guard the fastest bases to larger thresholds and keep those the worst-case
        analysis proves within the budget (where that analysis is quick enough to afford)."""
        if self.budget_kind.figure != "worst_case" or not guarded:
            return best
        if len(self.graph.nodes) > RELAX_MAX_OPS:
            return best
        for _, base, source in sorted(guarded, key=lambda t: t[0].makespan_ms)[:RELAX_BASES]:
            for slack in RELAX_SLACKS:
                left = deadline - time.perf_counter()
                if left <= 0.2:
                    return best
                g = guard_schedule(self.graph, base, int(limit_bytes * slack), self.cost, self.facts)
                if g is None:
                    break
                c = self._candidate(g, f"guarded {source}, relaxed", None)
                if best is not None and c.makespan_ms >= best.makespan_ms:
                    continue
                check = self._analysis(c.schedule, min(left, self.ctx.time_limit_s))
                if check is None or check.upper_bytes > limit_bytes:
                    break  # larger thresholds only let more coexist
                best = Candidate(c.schedule, c.makespan_ms, c.source, None, check)
        return best

    def _polish(
        self,
        best: Candidate | None,
        guarded: list[tuple[Candidate, StreamSchedule, str]],
        limit_bytes: int,
        deadline: float,
    ) -> Candidate | None:
        """Local search on small graphs: launch one op a step earlier (when its inputs allow) in the
        best guarded variant's base, guard again, keep the move when the simulation is faster."""
        if best is None or len(self.graph.nodes) > POLISH_MAX_OPS:
            return best
        stop = min(deadline, time.perf_counter() + POLISH_S)
        for _, base, source in sorted(guarded, key=lambda t: t[0].makespan_ms)[:POLISH_BASES]:
            best = self._polish_one(best, base, source, limit_bytes, stop)
        return best

    def _polish_one(
        self, best: Candidate, base: StreamSchedule, source: str, limit_bytes: int, stop: float
    ) -> Candidate:
        order = list(base.launch_order)
        pos = {op: i for i, op in enumerate(self.graph.node_ids)}
        preds = self.graph.pred_positions()
        mine = float("inf")
        improved = True
        while improved and time.perf_counter() < stop:
            improved = False
            for i in range(1, len(order)):
                if time.perf_counter() > stop:
                    break
                a, b = order[i - 1], order[i]
                if pos[a] in preds[pos[b]]:
                    continue  # b reads what a writes
                trial = order[: i - 1] + [b, a] + order[i + 1 :]
                waits = derive_waits(self.graph, trial, base.streams)
                g = guard_schedule(
                    self.graph,
                    StreamSchedule(tuple(trial), base.streams, waits, base.policy),
                    limit_bytes,
                    self.cost,
                    self.facts,
                )
                if g is None:
                    continue
                c = self._candidate(g, f"guarded {source}, reordered", g.meta.get("position_bound_bytes"))
                if self.budget_kind.figure == "arena" and self.bound_bytes(c) > limit_bytes:
                    continue
                if c.makespan_ms < mine - 1e-12:
                    order, mine, improved = trial, c.makespan_ms, True
                    if c.makespan_ms < best.makespan_ms - 1e-12:
                        best = c
        return best

    def _base_runs(
        self, fixed: Sequence[Candidate], floor: Floor, *, deadline: float | None = None
    ) -> list[tuple[float, StreamSchedule, str]]:
        """The bases with their unguarded makespans, fastest first (simulated once per search;
        past ``deadline``, those simulated so far, not kept for the next search)."""
        if self._base_cache is not None:
            return self._base_cache
        runs = []
        for base, source in self._bases(fixed, floor):
            if deadline is not None and time.perf_counter() > deadline:
                return sorted(runs, key=lambda r: r[0])
            known = self.runs.get(source)
            ms = known.makespan_ms if known is not None else simulate(self.graph, base, self.cost).makespan_ms
            runs.append((ms, base, source))
        self._base_cache = sorted(runs, key=lambda r: r[0])
        return self._base_cache

    def _bases(self, fixed: Sequence[Candidate], floor: Floor):
        """(base schedule, description) to guard: each multi-stream policy's streams with its own
        launch order, the graph's order and the memory-optimal order."""
        orders = {"graph order": self.graph.node_ids, "memory order": floor.schedule.launch_order}
        listed = self._list_base()
        for c in [*fixed, listed]:
            s = c.schedule
            if s.num_streams < 2:
                continue
            yield s, c.source
            for name, order in orders.items():
                if tuple(order) != s.launch_order:
                    waits = derive_waits(self.graph, order, s.streams)
                    yield StreamSchedule(tuple(order), s.streams, waits, c.source), f"{c.source} ({name})"
        for name, order in orders.items():
            yield (
                greedy_streams(self.graph, order, self.cost, self.ctx.max_streams),
                f"greedy streams ({name})",
            )

    def _list_base(self) -> Candidate:
        """Critical-path list scheduling on the stream cap (``bases.list_schedule``), computed once."""
        if self._listed is None:
            s = list_schedule(self.graph, self.cost, self.ctx.max_streams)
            self._listed = self._candidate(s, "list scheduling")
        return self._listed

    def _candidate(self, schedule: StreamSchedule, source: str, bound: int | None = None) -> Candidate:
        s = make_schedule_like(self.graph, schedule)
        return Candidate(s, simulate(self.graph, s, self.cost).makespan_ms, source, bound)

    def witness_bytes(self, c: Candidate) -> int:
        """A realisable figure of the candidate (its host-order peak; for the arena, its size): a
        candidate above the budget here cannot fit."""
        key = ("witness", id(c.schedule))
        got = self._bounds.get(key)
        if got is None:
            b = self.budget_kind
            if b.figure == "arena":
                got = self.bound_bytes(c)
            else:
                # the host-order state (ops launched before one op finished, that op running) is
                # realisable; its live bytes are the one-stream replay of the launch order's
                got = sequential_peak_bytes(self.graph, c.schedule.launch_order) + self.facts.resident_bytes
            self._bounds[key] = got
            self._keep.append(c)
        return got

    def bound_fits(self, c: Candidate, limit_bytes: int) -> bool:
        """The candidate's figure is proven within ``limit_bytes`` by a cheap bound (for the worst
        case: the position bound, replayed only until it exceeds the limit)."""
        b = self.budget_kind
        if (c.check is not None and c.check.figure == b.figure) or b.figure == "arena":
            return self.bound_bytes(c) <= limit_bytes
        if c.bound_bytes is not None or c.schedule.num_streams == 1:
            return self.bound_bytes(c) <= limit_bytes
        key = ("partial", id(c.schedule))
        known = self._bounds.get(key)  # a bound value, negative when only "over |value|" is known
        if known is not None and (known >= 0 or -known > limit_bytes):
            return 0 <= known <= limit_bytes
        pb = position_bound(self.graph, c.schedule, facts=self.facts, stop_above=limit_bytes)
        self._bounds[key] = pb.peak_bytes if pb.complete else -pb.peak_bytes
        self._keep.append(c)
        return pb.complete and pb.peak_bytes <= limit_bytes

    def bound_bytes(self, c: Candidate) -> int:
        """A proven bound on the candidate's figure: the position bound (worst case) or its arena
        size (arena figure), computed once per candidate."""
        if c.check is not None and c.check.figure == self.budget_kind.figure:
            return c.check.upper_bytes  # the memory analysis already proved it
        key = ("bound", id(c.schedule))
        got = self._bounds.get(key)
        if got is None:
            b = self.budget_kind
            if b.figure == "arena":
                from streamplan.memory.arena import plan_arena

                got = plan_arena(self.graph, c.schedule, includes=b.includes).arena_bytes
            elif c.bound_bytes is not None:
                got = c.bound_bytes
            elif c.schedule.num_streams == 1:
                got = self.witness_bytes(c)  # on one stream the host-order peak is the worst case
            else:
                got = position_bound(self.graph, c.schedule, facts=self.facts).peak_bytes
            self._bounds[key] = got
            self._keep.append(c)  # keeps id() unique while cached
        return got

    def _analysis(self, schedule: StreamSchedule, time_limit_s: float) -> FigureCheck | None:
        """The worst-case analysis of a schedule (None for the arena figure: its bound is exact)."""
        if self.budget_kind.figure != "worst_case":
            return None
        wc = worst_case_peak(
            self.graph, schedule, includes=self.budget_kind.includes, time_limit_s=max(0.1, time_limit_s)
        )
        return FigureCheck("worst_case", wc.lower_bytes, wc.upper_bytes, wc.exact, wc.method)
