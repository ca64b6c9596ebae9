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

IOS's "merge" stage (convolutions that read one tensor, run as one kernel) needs a
kernel streamplan's runtime does not have; it is searched only for IOS's own executor
(``IosOptions(executor="synchronized", merge=True)``, ``schedule.ios_merge``), to
reproduce what IOS measures. Stages are separated by a device-wide
barrier, expressed as waits (every group of a stage waits for every group of the
previous one) and thinned by ``derive_waits``; they are dropped again when the
full simulation finds the schedule faster without them.

The block DP itself is ``schedule.ios_search``. ``IosOptions(executor="synchronized")``
forms and costs stages for IOS's own executor instead (``synchronized_ms``), to
reproduce IOS's measurements.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streamplan.cost.contention import Supply
from streamplan.cost.simulate import OpCosts, op_costs, run_events, simulate
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.schedule.context import DEFAULT_CONTEXT, ScheduleContext
from streamplan.schedule.events import derive_waits
from streamplan.schedule.ios_merge import mergeable, merged_facts
from streamplan.schedule.ios_search import BLOCK_BUDGET, BlockSearch, stage_order
from streamplan.schedule.options import whole

SEARCH_SHARE = 0.8  # of the context's time limit for the blocks' DP; the rest: the final simulations

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

    ``merge`` (IOS's executor only) lets a stage be IOS's operator merge: two or more
    convolutions that read one tensor (same stride, output size and activation) run as one
    convolution (``schedule.ios_merge``). The schedule returned runs a merged stage's
    convolutions one after another on one stream (streamplan has no merged kernel);
    ``meta["merged"]`` lists them, and ``meta["predicted_ms"]`` is IOS's executor's time.
    The parallel-only search runs too, and its schedule is kept when it is faster (the
    merge search makes every mergeable convolution a unit of its own, so under a small
    ``block_budget`` its blocks are halved sooner).
    """

    r: int = 3
    s: int = 8
    block_ops: int = 20
    block_budget: int = BLOCK_BUDGET
    executor: str = "streams"
    sync_ms: float = 0.005
    merge: bool = False

    def __post_init__(self) -> None:
        for name in ("r", "s", "block_ops", "block_budget"):
            object.__setattr__(self, name, whole(name, getattr(self, name)))
        if self.executor not in EXECUTORS:
            raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, got {self.executor!r}")
        sync = self.sync_ms
        if isinstance(sync, bool) or not isinstance(sync, (int, float)) or not 0 <= sync < float("inf"):
            raise ValueError(f"sync_ms must be a finite number of milliseconds >= 0, got {sync!r}")
        if not isinstance(self.merge, bool):
            raise ValueError(f"merge must be True or False, got {self.merge!r}")
        if self.merge and self.executor != "synchronized":
            raise ValueError(
                "merge=True models IOS's merged convolutions, which only IOS's own executor runs: "
                'use it with executor="synchronized"'
            )


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
    r, s = opts.r, opts.s
    max_streams = ctx.max_streams
    t0 = time.perf_counter()
    model = ctx.cost
    ids = graph.node_ids
    costs = op_costs(graph, ids, model)
    groups_cap = max(1, min(s, max_streams))
    synchronized = opts.executor == "synchronized"
    deadline = t0 + SEARCH_SHARE * ctx.time_limit_s
    stages, search, units, blocks = _search(graph, costs, model, opts, ctx, groups_cap, deadline, merge=False)
    if opts.merge:
        # Searched whole, merging only adds choices; but a merge search has more units (every
        # convolution that may merge is one), so its blocks are halved sooner. Keep the
        # parallel-only schedule when it is faster, as IOS-Both is never slower than IOS-Parallel.
        merge = _search(graph, costs, model, opts, ctx, groups_cap, deadline, merge=True)
        supply = model.device_facts.supply
        kernels = {frozenset(m): merged_facts(graph, m, model) for m in merge[1].merged}
        with_merge = synchronized_ms(graph, merge[0], costs, supply, opts.sync_ms, kernels)
        without = synchronized_ms(graph, stages, costs, supply, opts.sync_ms)
        other = merge[1]
        totals = (
            search.halved + other.halved,
            search.timed_out + other.timed_out,
            search.truncated + other.truncated,
        )
        if with_merge < without:
            stages, search, units, blocks = merge
        else:
            search.merged = []
        search.halved, search.timed_out, search.truncated = totals
    schedule = _to_schedule(graph, stages, max_streams)
    one_stream = StreamSchedule(ids, {op: 0 for op in ids}, (), "ios")
    if synchronized:  # timed as IOS's executor runs the stages, barriers and all
        barriers = True
        supply = model.device_facts.supply
        merged = {frozenset(m): merged_facts(graph, m, model) for m in search.merged}
        predicted = synchronized_ms(graph, stages, costs, supply, opts.sync_ms, merged)
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
    merged_ops = [] if fallback else [[ids[p] for p in m] for m in search.merged]
    meta: dict[str, Any] = {
        "stages": [[[ids[i] for i in g] for g in st] for st in stages],
        "blocks": len(blocks),
        "units": len(units),
        "r": r,
        "s": groups_cap,
        "executor": opts.executor,
        "merged": merged_ops,
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


def _search(
    graph: Graph,
    costs: OpCosts,
    model: Any,
    opts: IosOptions,
    ctx: ScheduleContext,
    groups_cap: int,
    deadline: float,
    *,
    merge: bool,
) -> tuple[list[list[list[int]]], BlockSearch, list[list[int]], list[list[int]]]:
    """Stages of every block (graph positions), the search (its counters), the units and blocks."""
    merge_of = mergeable(graph) if merge else {}
    units = chain_units(graph, alone=frozenset(merge_of))
    blocks = split_blocks(units, graph, opts.block_ops)
    search = BlockSearch(
        graph,
        costs,
        units,
        r=max(1, opts.r),
        s=groups_cap,
        supply=model.device_facts.supply,
        budget=opts.block_budget,
        sync_ms=opts.sync_ms if opts.executor == "synchronized" else None,
        merge_keys={
            u: merge_of[ops[0]] for u, ops in enumerate(units) if len(ops) == 1 and ops[0] in merge_of
        },
        merge_ms=lambda positions: merged_facts(graph, positions, model).time_ms[0],
    )
    stages: list[list[list[int]]] = []
    label = "ios search with merge (blocks)" if merge else "ios search (blocks)"
    for k, block in enumerate(blocks):
        ctx.progress(label, k, len(blocks))
        # each block may take its share of the time left; one that would take longer is halved
        search.timed = False
        stages.extend(search.run(block, max(0.0, deadline - time.perf_counter()) / (len(blocks) - k)))
        search.timed_out += search.timed
    ctx.progress(label, len(blocks), len(blocks))
    return stages, search, units, blocks


def chain_units(graph: Graph, alone: frozenset[int] = frozenset()) -> list[list[int]]:
    """Graph positions grouped into units: maximal chains u -> v where v reads only u and u feeds only v.

    Such a link never allows parallelism between u and v, so the DP treats the chain
    as one op (as IOS's graphs have conv+bn+relu fused). Units are numbered in
    topological order (by their first op); only a unit's first op has outside
    predecessors and only its last op outside successors. Positions in ``alone`` are
    units of their own (convolutions that may merge with others: a merge stage takes
    whole units).
    """
    preds, succs = graph.pred_positions(), graph.succ_positions()
    unit_of = [-1] * len(graph.nodes)
    units: list[list[int]] = []
    for i, ps in enumerate(preds):
        if len(ps) == 1 and len(succs[ps[0]]) == 1 and i not in alone and ps[0] not in alone:
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


def synchronized_ms(
    graph: Graph,
    stages: list[list[list[int]]],
    costs: OpCosts,
    supply: Supply,
    sync_ms: float,
    merged: Mapping[frozenset[int], OpCosts] | None = None,
) -> float:
    """Makespan of ``stages`` (groups of graph positions) run as IOS's own executor runs them.

    ``costs`` are every op's facts in graph order. The host launches each stage's groups
    one after another, group ``g`` on stream ``g``; after a stage it synchronizes the
    device (``sync_ms``) unless this stage and the next are both one group (those run back
    to back on one stream, the host launching ahead). So the stages fall into segments
    (a run of one-group stages, or one stage of several groups), each started by the host
    on an idle device. Dependencies inside a segment between groups are honoured with
    waits (IOS's own stages have none). A one-group stage whose positions are a key of
    ``merged`` is IOS's merged convolution: one kernel with the facts given there.
    """
    merged = merged or {}
    pred_pos = list(graph.pred_positions())
    demands = costs.demand_list()
    times, occ, launch = list(costs.time_ms), list(costs.occupancy), list(costs.launch_ms)
    alias: dict[int, int] = {}  # a merged convolution's positions -> the one standing for the kernel
    stages = [list(map(list, stage)) for stage in stages]
    for stage in stages:
        facts = merged.get(frozenset(stage[0])) if len(stage) == 1 else None
        if facts is None:
            continue
        rep = min(stage[0])
        alias.update((q, rep) for q in stage[0])
        members = set(stage[0])
        pred_pos[rep] = tuple(sorted({q for m in members for q in pred_pos[m] if q not in members}))
        times[rep], occ[rep], launch[rep] = facts.time_ms[0], facts.occupancy[0], facts.launch_ms[0]
        demands[rep] = facts.demand_list()[0]
        stage[0] = [rep]
    if alias:
        pred_pos = [tuple(sorted({alias.get(q, q) for q in ps})) for ps in pred_pos]
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
            tuple(times[p] for p in order),
            tuple(occ[p] for p in order),
            tuple(launch[p] for p in order),
            tuple(demands[p] for p in order),
        )
        _, _, end = run_events(sub, queue, waits, supply)
        total += max(end, default=0.0)
    return total + sync_ms * max(0, len(segments) - 1)


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
        for j in stage_order([[local[p] for p in grp] for grp in stage], preds):
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
