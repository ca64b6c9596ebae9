"""``ios``: the IOS dynamic program over stages (Ding et al., MLSys 2021), costed by the simulator.

The graph is cut into blocks at single-node cuts (no dependency jumps over the
node in graph order), and long stretches are capped at ``block_ops`` ops. Within a
block, a memoised DP over the set R of ops not yet scheduled picks a last stage S:
a non-empty subset of R that no edge leaves towards R \\ S. A stage is up to ``s``
groups run concurrently, one stream each; a group is a dependency-ordered sequence
of up to ``r`` ops. ``cost(R) = min_S cost(R \\ S) + stage_time(S)``, where
``stage_time`` simulates the stage alone with the cost model (cached by stage).

Two partitions of an ending into groups are tried:

- IOS's own: the weakly connected components of S, each one group;
- the endings IOS misses: components split into dependency chains, so that two
  groups may share a descendant (the joining op waits for the other group with an
  event instead of serialising the whole component on one stream).

IOS's "merge" stage (convs with one input fused into one kernel) is not generated:
it needs a kernel the runtime does not have. Stages are separated by a device-wide
barrier, expressed as waits (every group of a stage waits for every group of the
previous one) and thinned by ``derive_waits``; they are dropped again when the
full simulation finds the schedule faster without them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from streamplan.cost.contention import Demand, Supply
from streamplan.cost.simulate import OpCosts, op_costs, run_events, simulate
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.schedule.context import DEFAULT_CONTEXT, ScheduleContext
from streamplan.schedule.events import derive_waits
from streamplan.schedule.options import whole

MAX_ENDINGS_PER_STATE = 4000  # enumeration cap per DP state (reported in meta when hit)
BLOCK_BUDGET = 60_000  # stage candidates one block may try before it is halved
SEARCH_SHARE = 0.8  # of the context's time limit for the blocks' DP; the rest: the final simulations


class _OverBudget(Exception):
    """A block's DP outgrew ``BLOCK_BUDGET``."""


EXECUTORS = ("streams", "synchronized")


@dataclass(frozen=True)
class IosOptions:
    """IOS's tunables: ``r`` units per group, ``s`` groups per stage, ``block_ops`` units per block.

    ``block_budget``: stage candidates one block's DP may try before the block is halved
    (a larger budget searches wide blocks whole, at the cost of time).

    ``executor`` says which executor the DP costs stages for:

    - ``"streams"`` (default): streamplan's, where only events order the streams and the
      host launches ahead of the device; a stage may split a component into chains that
      wait for each other with events.
    - ``"synchronized"``: IOS's own: the host launches a stage's groups one after another
      (all of the first group's kernels, then the second's), and synchronizes the whole
      device (``sync_ms``) after every stage, except between two stages of one group each,
      which run back to back. A stage's groups are then its weakly connected components
      (that executor has no events inside a stage), and a stage of several groups costs
      its host launches and the synchronize as well as its kernels.
      ``synchronized_ms`` times a whole stage list as that executor runs it.
    """

    r: int = 3
    s: int = 8
    block_ops: int = 20
    block_budget: int = BLOCK_BUDGET
    executor: str = "streams"
    sync_ms: float = 0.005

    def __post_init__(self) -> None:
        for name in ("r", "s", "block_ops", "block_budget"):
            object.__setattr__(self, name, whole(name, getattr(self, name)))
        if self.executor not in EXECUTORS:
            raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, got {self.executor!r}")
        sync = self.sync_ms
        if isinstance(sync, bool) or not isinstance(sync, (int, float)) or not 0 <= sync < float("inf"):
            raise ValueError(f"sync_ms must be a finite number of milliseconds >= 0, got {sync!r}")


def schedule_ios(graph: Graph, ctx: ScheduleContext = DEFAULT_CONTEXT) -> StreamSchedule:
    """The IOS schedule of ``graph``: stages of up to ``s`` concurrent groups of up to ``r`` units.

    Options (``IosOptions``): ``r`` (default 3), ``s`` (8) and ``block_ops`` (20).
    A unit is a maximal chain of single links (e.g. conv -> batch_norm -> relu), so
    ``r`` and ``block_ops`` count what IOS counts (its graphs have those fused).
    ``ctx.cost`` (a device profile or a measured table) times every candidate stage.
    Wide blocks whose DP exceeds ``BLOCK_BUDGET`` candidates are halved
    (``meta["halved_blocks"]``), which keeps randwire/nasnet searches to seconds. The
    blocks' search keeps to ``SEARCH_SHARE`` of ``ctx.time_limit_s``: each block gets its
    share of the time left and is halved (down to single units: one stream) when its DP
    would take longer (``meta["timed_out_blocks"]``), so a 10,000-op training step is
    scheduled within the time limit.
    ``meta`` holds ``stages`` (lists of groups of op ids), ``search_time_s``,
    ``blocks``, ``units``, ``predicted_ms`` (the simulated makespan), ``sequential_ms``
    and ``truncated_states``. Should the full simulation of the stage schedule come
    out slower than one stream in graph order, that one-stream schedule is returned
    instead (``meta["fallback_sequential"]``), so ``ios`` is never predicted slower.
    The stage barriers are dropped (only data waits kept, same streams and order)
    when the simulation says that is faster (``meta["barriers"]`` is False then).
    With ``executor="synchronized"`` the search, ``predicted_ms`` and ``sequential_ms``
    are IOS's own executor's (``synchronized_ms``), and the barriers are kept; the
    schedule returned still runs on streamplan's runtime, with events as barriers.
    """
    opts = ctx.options_as(IosOptions)
    r, s, block_ops = opts.r, opts.s, opts.block_ops
    max_streams = ctx.max_streams
    t0 = time.perf_counter()
    model = ctx.cost
    ids = graph.node_ids
    costs = op_costs(graph, ids, model)
    groups_cap = max(1, min(s, max_streams))
    units = chain_units(graph)
    blocks = split_blocks(units, graph, block_ops)
    stages: list[list[list[int]]] = []
    synchronized = opts.executor == "synchronized"
    search = _BlockSearch(
        graph,
        costs,
        units,
        r=max(1, r),
        s=groups_cap,
        supply=model.device_facts.supply,
        budget=opts.block_budget,
        sync_ms=opts.sync_ms if synchronized else None,
    )
    deadline = t0 + SEARCH_SHARE * ctx.time_limit_s
    for k, block in enumerate(blocks):
        ctx.progress("ios search (blocks)", k, len(blocks))
        # each block may take its share of the time left; one that would take longer is halved
        search.timed = False
        stages.extend(search.run(block, max(0.0, deadline - time.perf_counter()) / (len(blocks) - k)))
        search.timed_out += search.timed
    ctx.progress("ios search (blocks)", len(blocks), len(blocks))
    schedule = _to_schedule(graph, stages, max_streams)
    one_stream = StreamSchedule(ids, {op: 0 for op in ids}, (), "ios")
    if synchronized:  # timed as IOS's executor runs the stages, barriers and all
        barriers = True
        supply = model.device_facts.supply
        predicted = synchronized_ms(graph, stages, costs, supply, opts.sync_ms)
        sequential_ms = synchronized_ms(graph, [[[p]] for p in range(len(ids))], costs, supply, opts.sync_ms)
    else:
        predicted = simulate(graph, schedule, model).makespan_ms
        # Without the barriers only data waits order the stages; keep whichever is faster.
        free = schedule.replace(waits=derive_waits(graph, schedule.launch_order, schedule.streams))
        free_ms = simulate(graph, free, model).makespan_ms
        barriers = predicted <= free_ms
        if not barriers:
            schedule, predicted = free, free_ms
        sequential_ms = simulate(graph, one_stream, model).makespan_ms
    # The DP sums stage times; the full simulation can disagree. Never return worse than one stream.
    fallback = sequential_ms < predicted
    if fallback:
        schedule, predicted = one_stream, sequential_ms
        stages = [[list(range(len(ids)))]]
    meta: dict[str, Any] = {
        "stages": [[[ids[i] for i in g] for g in st] for st in stages],
        "blocks": len(blocks),
        "units": len(units),
        "r": r,
        "s": groups_cap,
        "executor": opts.executor,
        "truncated_states": search.truncated,
        "halved_blocks": search.halved,
        "timed_out_blocks": search.timed_out,
        "predicted_ms": predicted,
        "sequential_ms": sequential_ms,
        "fallback_sequential": fallback,
        "barriers": barriers and not fallback,
        "device": model.device_name,
        "search_time_s": time.perf_counter() - t0,
    }
    return schedule.replace(meta=meta)


def chain_units(graph: Graph) -> list[list[int]]:
    """Graph positions grouped into units: maximal chains u -> v where v reads only u and u feeds only v.

    Such a link never allows parallelism between u and v, so the DP treats the chain
    as one op (as IOS's graphs have conv+bn+relu fused). Units are numbered in
    topological order (by their first op); only a unit's first op has outside
    predecessors and only its last op outside successors.
    """
    preds, succs = graph.pred_positions(), graph.succ_positions()
    unit_of = [-1] * len(graph.nodes)
    units: list[list[int]] = []
    for i, ps in enumerate(preds):
        if len(ps) == 1 and len(succs[ps[0]]) == 1:
            unit_of[i] = unit_of[ps[0]]
            units[unit_of[i]].append(i)
        else:
            unit_of[i] = len(units)
            units.append([i])
    return units


def split_blocks(units: list[list[int]], graph: Graph, block_ops: int) -> list[list[int]]:
    """Unit indices of each block: cut after every unit no dependency jumps over, and every ``block_ops``."""
    unit_of = {p: u for u, ops in enumerate(units) for p in ops}
    succ = graph.succ_positions()
    blocks: list[list[int]] = []
    current: list[int] = []
    reach = -1  # furthest successor of the units before u
    for u, ops in enumerate(units):
        current.append(u)
        if reach <= u or len(current) >= block_ops:  # nothing jumps over u: u ends a block
            blocks.append(current)
            current = []
        reach = max(reach, max((unit_of[q] for q in succ[ops[-1]]), default=u))
    if current:
        blocks.append(current)
    return blocks


class _BlockSearch:
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
    ):
        self.graph, self.costs, self.units, self.r, self.s = graph, costs, units, r, s
        self.supply = supply
        self.block_budget = budget
        self.sync_ms = sync_ms  # None: streamplan's executor; a number: IOS's synchronizing one
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
        memo: dict[int, tuple[float, int, list[list[int]]]] = {0: (0.0, 0, [])}
        full = (1 << k) - 1
        self._solve(full, memo)
        stages = []
        state = full
        while state:
            _, ending, groups = memo[state]
            stages.append([[p for j in g for p in self.units[block[j]]] for g in groups])
            state &= ~ending
        stages.reverse()
        return stages

    def _solve(self, state: int, memo: dict[int, tuple[float, int, list[list[int]]]]) -> float:
        hit = memo.get(state)
        if hit is not None:
            return hit[0]
        best = (float("inf"), 0, [])
        endings = self._endings(state)
        self.budget -= len(endings)
        over_time = self.stop_at is not None and time.perf_counter() > self.stop_at
        if (self.budget < 0 or over_time) and len(self.block) > 1:
            raise _OverBudget
        for ending in endings:
            stage_ms, groups = self._stage(ending)
            if stage_ms >= best[0]:
                continue
            total = stage_ms + self._solve(state & ~ending, memo)
            if total < best[0]:
                best = (total, ending, groups)
        memo[state] = best
        return best[0]

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
            order = _stage_order(groups, self.preds)
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


def synchronized_ms(
    graph: Graph, stages: list[list[list[int]]], costs: OpCosts, supply: Supply, sync_ms: float
) -> float:
    """Makespan of ``stages`` (groups of graph positions) run as IOS's own executor runs them.

    ``costs`` are every op's facts in graph order. The host launches each stage's groups
    one after another, group ``g`` on stream ``g``; after a stage it synchronizes the
    device (``sync_ms``) unless this stage and the next are both one group (those run back
    to back on one stream, the host launching ahead). So the stages fall into segments
    (a run of one-group stages, or one stage of several groups), each started by the host
    on an idle device. Dependencies inside a segment between groups are honoured with
    waits (IOS's own stages have none).
    """
    pred_pos = graph.pred_positions()
    demands = costs.demand_list()
    segments: list[list[list[int]]] = []  # each a list of groups (one stream each)
    for k, stage in enumerate(stages):
        if len(stage) == 1 and k > 0 and len(stages[k - 1]) == 1:
            segments[-1][0].extend(stage[0])  # back to back on the same stream, no synchronize
        else:
            segments.append([list(g) for g in stage])
    total = 0.0
    for groups in segments:
        order = [p for g in groups for p in g]
        queue_of = {p: q for q, g in enumerate(groups) for p in g}
        where = {p: n for n, p in enumerate(order)}
        if any(where.get(q, -1) > where[p] for p in order for q in pred_pos[p]):
            order.sort()  # groups that feed each other both ways: launch in graph order
            where = {p: n for n, p in enumerate(order)}
        queue = [queue_of[p] for p in order]
        waits = [[where[q] for q in pred_pos[p] if q in where and queue_of[q] != queue_of[p]] for p in order]
        sub = OpCosts(
            tuple(costs.time_ms[p] for p in order),
            tuple(costs.occupancy[p] for p in order),
            tuple(costs.launch_ms[p] for p in order),
            tuple(demands[p] for p in order),
        )
        _, _, end = run_events(sub, queue, waits, supply)
        total += max(end, default=0.0)
    return total + sync_ms * max(0, len(segments) - 1)


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


def _stage_order(groups: list[list[int]], preds: list[int]) -> list[int]:
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


def _to_schedule(graph: Graph, stages: list[list[list[int]]], max_streams: int) -> StreamSchedule:
    """Launch stage by stage; group g of a stage on its own stream; barriers as (thinned) waits."""
    ids = graph.node_ids
    pred_pos = graph.pred_positions()
    launch: list[str] = []
    streams: dict[str, int] = {}
    extra: dict[str, list[str]] = {}
    prev_tails: list[str] = []
    for stage in stages:
        stream_of_group = _assign_streams(stage, streams, ids, pred_pos, max_streams)
        members = {p: g for g, grp in enumerate(stage) for p in grp}
        local = {p: j for j, p in enumerate(members)}
        preds = [sum(1 << local[q] for q in pred_pos[p] if q in local) for p in members]
        positions = list(members)
        for j in _stage_order([[local[p] for p in grp] for grp in stage], preds):
            p = positions[j]
            streams[ids[p]] = stream_of_group[members[p]]
            launch.append(ids[p])
        for grp in stage:
            extra[ids[grp[0]]] = list(prev_tails)
        prev_tails = [ids[grp[-1]] for grp in stage]
    waits = derive_waits(graph, launch, streams, extra_deps=extra)
    return StreamSchedule(tuple(launch), streams, waits, "ios")


def _assign_streams(
    stage: list[list[int]],
    streams: dict[str, int],
    ids: tuple[str, ...],
    pred_pos: list[tuple[int, ...]],
    max_streams: int,
) -> list[int]:
    """Stream per group: the stream of the group's first predecessor when free (fewer waits)."""
    used: set[int] = set()
    out = [-1] * len(stage)
    for g, grp in enumerate(stage):
        for q in pred_pos[grp[0]]:
            s = streams.get(ids[q])
            if s is not None and s not in used:
                out[g] = s
                used.add(s)
                break
    free = (x for x in range(max_streams) if x not in used)
    for g in range(len(stage)):
        if out[g] < 0:
            out[g] = next(free, g % max_streams)
            used.add(out[g])
    return out
