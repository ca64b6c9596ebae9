"""The IOS dynamic program over one block at a time (``schedule.ios`` cuts the graph and runs it).

A state is the set of a block's units not yet scheduled (bits); its cost is the best
last stage S (a non-empty subset no edge leaves towards the rest, up to ``r * s``
units) plus the cost of what is left. A stage's time is simulated with the cost model
and cached by the stage's shape. A block whose search outgrows its budget of stage
candidates, or its share of the time limit, is halved and each half searched alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from streamplan.cost.contention import Demand, Supply
from streamplan.cost.simulate import OpCosts, run_events
from streamplan.ir.graph import Graph

MAX_ENDINGS_PER_STATE = 4000  # enumeration cap per DP state (reported in meta when hit)
MAX_MERGE_WIDTH = 10  # convolutions of one merge key among a state's sinks tried for merging
BLOCK_BUDGET = 60_000  # stage candidates one block may try before it is halved


class _OverBudget(Exception):
    """A block's DP outgrew its budget."""


class BlockSearch:
    """The DP for one block at a time (local unit indices as bits); stage times cached by shape."""

    def __init__(
        self,
        graph: Graph,
        costs: OpCosts,
        units: list[list[int]],
        *,
        r: int,
        s: int,
        supply: Supply = Supply(),
        budget: int = BLOCK_BUDGET,
        sync_ms: float | None = None,
        merge_keys: dict[int, tuple] | None = None,
        merge_ms: Callable[[tuple[int, ...]], float] | None = None,
    ):
        self.graph, self.costs, self.units, self.r, self.s = graph, costs, units, r, s
        self.supply = supply
        self.block_budget = budget
        self.sync_ms = sync_ms  # None: streamplan's executor; a number: IOS's synchronizing one
        # IOS's operator merge: the merge key of each unit that is one mergeable convolution, and
        # the time of the merged kernel of some graph positions (``schedule.ios_merge``)
        self.merge_keys = merge_keys or {}
        self.merge_ms = merge_ms
        self.merged: list[tuple[int, ...]] = []  # graph positions of every merged stage returned
        self.merge_cache: dict[tuple[int, ...], float] = {}
        self.demands = costs.demand_list()
        op_class: dict[tuple[float, Demand], int] = {}
        cls = [op_class.setdefault(k, len(op_class)) for k in zip(costs.time_ms, self.demands, strict=True)]
        unit_class: dict[tuple[int, ...], int] = {}
        self.unit_class = [
            unit_class.setdefault(tuple(cls[p] for p in ops), len(unit_class)) for ops in units
        ]
        unit_of = {p: u for u, ops in enumerate(units) for p in ops}
        pred_pos = graph.pred_positions()
        self.unit_preds = [sorted({unit_of[q] for q in pred_pos[ops[0]]}) for ops in units]
        self.shape_cache: dict[tuple, float] = {}
        self.by_ending: dict[int, tuple[float, list[list[int]]]] = {}
        self.truncated = 0
        self.halved = 0
        self.budget = budget
        self.stop_at: float | None = None
        self.timed = False  # the current block was halved for time
        self.timed_out = 0

    def run(self, block: list[int], seconds: float | None = None) -> list[list[list[int]]]:
        """Stages (groups of graph positions, in run order) for one block of units.

        A block whose DP would take more than its budget of stage candidates (a wide
        block: the state count grows like (length/width)^width) is halved and each half
        solved on its own, which bounds the search time at some loss of overlap. So is one
        that takes more than ``seconds`` (each half then gets half the time left).
        """
        self.budget = self.block_budget
        self.stop_at = None if seconds is None else time.perf_counter() + seconds
        try:
            return self._run(block)
        except _OverBudget:
            self.halved += 1
            half = len(block) // 2
            left = None
            if self.stop_at is not None:
                self.timed = self.timed or time.perf_counter() > self.stop_at
                left = max(0.0, self.stop_at - time.perf_counter()) / 2
            return self.run(block[:half], left) + self.run(block[half:], left)

    def _run(self, block: list[int]) -> list[list[list[int]]]:
        k = len(block)
        local = {u: j for j, u in enumerate(block)}
        preds = [0] * k
        succs = [0] * k
        for j, u in enumerate(block):
            for q in self.unit_preds[u]:
                if q in local:
                    preds[j] |= 1 << local[q]
                    succs[local[q]] |= 1 << j
        self.block, self.preds, self.succs = block, preds, succs
        self.by_ending = {}
        memo: dict[int, tuple[float, int, list[list[int]], bool]] = {0: (0.0, 0, [], False)}
        full = (1 << k) - 1
        self._solve(full, memo)
        stages = []
        merged = []
        state = full
        while state:
            _, ending, groups, merge = memo[state]
            stages.append([[p for j in g for p in self.units[block[j]]] for g in groups])
            if merge:
                merged.append(tuple(stages[-1][0]))
            state &= ~ending
        stages.reverse()
        self.merged.extend(merged)
        return stages

    def _solve(self, state: int, memo: dict[int, tuple[float, int, list[list[int]], bool]]) -> float:
        hit = memo.get(state)
        if hit is not None:
            return hit[0]
        best: tuple[float, int, list[list[int]], bool] = (float("inf"), 0, [], False)
        endings = self._endings(state)
        merges = self._merge_endings(state) if self.merge_keys else []
        self.budget -= len(endings) + len(merges)
        over_time = self.stop_at is not None and time.perf_counter() > self.stop_at
        if (self.budget < 0 or over_time) and len(self.block) > 1:
            raise _OverBudget
        for ending in endings:
            stage_ms, groups = self._stage(ending)
            if stage_ms >= best[0]:
                continue
            total = stage_ms + self._solve(state & ~ending, memo)
            if total < best[0]:
                best = (total, ending, groups, False)
        for ending in merges:  # one kernel for several convolutions: a stage of one group
            stage_ms = self._merge_time(ending)
            if stage_ms >= best[0]:
                continue
            total = stage_ms + self._solve(state & ~ending, memo)
            if total < best[0]:
                best = (total, ending, [list(_bits(ending))], True)
        memo[state] = best
        return best[0]

    def _merge_endings(self, state: int) -> list[int]:
        """IOS's merge stages: every set of two or more of ``state``'s sinks that are convolutions
        of one merge key (one input, stride, output size and epilogue)."""
        by_key: dict[tuple, list[int]] = {}
        for j in _bits(state):
            key = self.merge_keys.get(self.block[j])
            if key is not None and not self.succs[j] & state:
                by_key.setdefault(key, []).append(j)
        out = []
        for members in by_key.values():
            members = members[:MAX_MERGE_WIDTH]
            for subset in range(1, 1 << len(members)):
                if subset.bit_count() >= 2:
                    out.append(sum(1 << members[i] for i in _bits(subset)))
        return out

    def _merge_time(self, ending: int) -> float:
        """The merged convolution's time, run alone (the host ahead, as a one-group stage)."""
        positions = tuple(p for j in _bits(ending) for p in self.units[self.block[j]])
        hit = self.merge_cache.get(positions)
        if hit is None:
            assert self.merge_ms is not None
            hit = self.merge_cache[positions] = self.merge_ms(positions)
        return hit

    def _endings(self, state: int) -> list[int]:
        """Every non-empty S within ``state`` with no edge from S to state \\ S, |S| <= r*s."""
        preds, succs = self.preds, self.succs
        limit = self.r * self.s
        out: list[int] = []
        sinks = 0
        for j in _bits(state):
            if not succs[j] & state:
                sinks |= 1 << j
        stack = [(0, sinks, 0)]
        while stack:
            chosen, cand, excl = stack.pop()
            size = chosen.bit_count()
            while cand:
                c = cand & -cand
                cand &= ~c
                new = chosen | c
                out.append(new)
                if len(out) >= MAX_ENDINGS_PER_STATE:
                    self.truncated += 1
                    return out
                if size + 1 < limit:
                    grow = 0
                    for p in _bits(preds[c.bit_length() - 1] & state & ~new & ~excl):
                        if not succs[p] & state & ~new:
                            grow |= 1 << p
                    stack.append((new, (cand | grow) & ~excl, excl))
                excl |= c
        return out

    def _stage(self, ending: int) -> tuple[float, list[list[int]]]:
        """Best (time, groups) of a stage; groups hold local unit indices in dependency order."""
        hit = self.by_ending.get(ending)
        if hit is not None:
            return hit
        best: tuple[float, list[list[int]]] = (float("inf"), [])
        for groups in self._partitions(ending):
            t = self._time(groups)
            if t < best[0]:
                best = (t, groups)
        self.by_ending[ending] = best
        return best

    def _partitions(self, ending: int) -> list[list[list[int]]]:
        """IOS's partition (components) if it fits, and the chain split (groups sharing descendants)."""
        out = []
        comps = _components(ending, self.preds, self.succs)
        if len(comps) <= self.s and all(len(c) <= self.r for c in comps):
            out.append(comps)
        if self.sync_ms is not None:  # IOS's executor: no events inside a stage
            return out
        chains = []
        for comp in comps:
            chains.extend(_chains(comp, self.preds, self.r))
        if len(chains) <= self.s and chains != comps:
            out.append(chains)
        return out

    def _time(self, groups: list[list[int]]) -> float:
        """Simulated time of one stage run alone, the host assumed ahead (launches overlap earlier stages).

        Under IOS's synchronizing executor a stage of several groups is launched group after
        group once the device is idle, and ends with a device-wide synchronize: its time
        includes the host's launches and ``sync_ms``. Cached by the stage's shape (cost class
        of each unit, its group, the cross-group waits), so repeated motifs and equal ops
        are simulated once.
        """
        synchronized = self.sync_ms is not None and len(groups) > 1
        if synchronized:
            order = [j for g in groups for j in g]
        else:
            order = [g[i] for i in range(max(map(len, groups))) for g in groups if i < len(g)]
        group_of = {j: g for g, grp in enumerate(groups) for j in grp}
        where = {j: n for n, j in enumerate(order)}
        waits = [
            [where[q] for q in _bits(self.preds[j]) if q in where and group_of[q] != group_of[j]]
            for j in order
        ]
        if any(w >= n for n, ws in enumerate(waits) for w in ws):  # round robin broke an edge
            order = stage_order(groups, self.preds)
            where = {j: n for n, j in enumerate(order)}
            waits = [
                [where[q] for q in _bits(self.preds[j]) if q in where and group_of[q] != group_of[j]]
                for j in order
            ]
        block, ucls = self.block, self.unit_class
        shape = (tuple((ucls[block[j]], group_of[j]) for j in order), tuple(map(tuple, waits)))
        t = self.shape_cache.get(shape)
        if t is None:
            t = self._simulate_units(order, group_of, waits, synchronized)
            if synchronized:
                t += self.sync_ms
            self.shape_cache[shape] = t
        return t

    def _simulate_units(
        self, order: list[int], group_of: dict[int, int], unit_waits: list[list[int]], launches: bool
    ) -> float:
        times, occ, demands, queue, waits, launch = [], [], [], [], [], []
        last_op: list[int] = []
        c = self.costs
        for n, j in enumerate(order):
            ops = self.units[self.block[j]]
            for k, p in enumerate(ops):
                waits.append([last_op[w] for w in unit_waits[n]] if k == 0 else [])
                times.append(c.time_ms[p])
                occ.append(c.occupancy[p])
                demands.append(self.demands[p])
                queue.append(group_of[j])
                launch.append(c.launch_ms[p] if launches else 0.0)
            last_op.append(len(times) - 1)
        sub = OpCosts(tuple(times), tuple(occ), tuple(launch), tuple(demands))
        _, _, end = run_events(sub, queue, waits, self.supply)
        return max(end, default=0.0)


def _bits(mask: int):
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _components(ending: int, preds: list[int], succs: list[int]) -> list[list[int]]:
    """Weakly connected components of the ops in ``ending``, each in local (topological) order."""
    comps = []
    left = ending
    while left:
        seed = left & -left
        comp = seed
        frontier = seed
        while frontier:
            j = (frontier & -frontier).bit_length() - 1
            frontier &= frontier - 1
            nxt = (preds[j] | succs[j]) & ending & ~comp
            comp |= nxt
            frontier |= nxt
        left &= ~comp
        comps.append(list(_bits(comp)))
    return comps


def _chains(comp: list[int], preds: list[int], r: int) -> list[list[int]]:
    """Greedy chain cover in topological order: extend a chain ending in a predecessor, else start one."""
    chains: list[list[int]] = []
    for j in comp:
        for ch in chains:
            if len(ch) < r and preds[j] >> ch[-1] & 1:
                ch.append(j)
                break
        else:
            chains.append([j])
    return chains


def stage_order(groups: list[list[int]], preds: list[int]) -> list[int]:
    """Launch order within a stage: round-robin over groups, kept topological (Kahn by priority)."""
    rank = {j: (i, g) for g, grp in enumerate(groups) for i, j in enumerate(grp)}
    members = 0
    for grp in groups:
        for j in grp:
            members |= 1 << j
    indeg = {j: (preds[j] & members).bit_count() for j in rank}
    ready = sorted((rank[j], j) for j, d in indeg.items() if d == 0)
    order = []
    while ready:
        _, j = ready.pop(0)
        order.append(j)
        for q in rank:
            if preds[q] >> j & 1:
                indeg[q] -= 1
                if indeg[q] == 0:
                    ready.append((rank[q], q))
        ready.sort()
    return order
