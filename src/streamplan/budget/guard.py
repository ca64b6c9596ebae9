"""Guarded list scheduling: a base schedule made to fit a budget by admission waits.

The base fixes each op's stream and the host's launch order. Ops are placed in that
order; before an op is admitted, the launch-order position bound
(``memory.position_bound``) says how many bytes can be live at the instants where it
is the latest op started. When that is over the budget, the op also waits for the
ops expected to finish first (on an estimated timeline: each op starts when its
stream, its waits and the host allow, and takes its standalone time), as few as
bring the bound under the budget. Waiting for more never raises the bound, and
waiting for every earlier op leaves at most the host-order live bytes of the launch
order at that op: so a launch order whose one-stream peak fits always succeeds, and
every schedule this returns has its position bound, hence its worst case over all
timings, within the budget.
"""

from __future__ import annotations

import bisect

from streamplan.cost.opcost import CostModel
from streamplan.cost.simulate import op_costs
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule, Wait
from streamplan.memory.position_bound import CountedStorages, PositionBound

PRUNE_EVERY = 64


def guard_schedule(
    graph: Graph,
    base: StreamSchedule,
    limit_bytes: int,
    cost: CostModel,
    facts: CountedStorages,
) -> StreamSchedule | None:
    """``base`` with admission waits added so that its position bound stays within ``limit_bytes``;
    None when even waiting for every earlier op does not fit (the launch order itself is over)."""
    order = base.launch_order
    costs = op_costs(graph, order, cost)
    facts_d = cost.device_facts
    num_streams = len(set(base.streams[op] for op in order))
    state = PositionBound(facts, num_streams)
    waits = base.waits_before()
    est_end: dict[str, float] = {}
    on_slot: list[list[str]] = [[] for _ in range(num_streams)]  # ops per slot, launch order
    ends_on_slot: list[list[float]] = [[] for _ in range(num_streams)]  # their estimated ends (increasing)
    added: list[Wait] = []
    host = 0.0
    for i, op in enumerate(order):
        stream = base.streams[op]
        slot = state.slot_for(stream)
        ws = list(waits.get(op, ()))
        before = state.clock_before(stream, ws)
        value = state.probe(op, stream, before, enough=limit_bytes)
        if value > limit_bytes:
            admitted = _admit(state, op, stream, before, limit_bytes, on_slot, ends_on_slot, slot)
            if admitted is None:
                return None
            extra, before, value = admitted
            ws.extend(extra)
            added.extend(Wait(u, op) for u in extra)
        state.place(op, stream, before, bound=value)
        host += costs.launch_ms[i] + (facts_d.event_wait_ms * len(ws) if ws else 0.0)
        start = max(
            [host] + [est_end[u] for u in ws] + ([est_end[on_slot[slot][-1]]] if on_slot[slot] else [])
        )
        end = start + costs.time_ms[i] + (facts_d.event_resume_ms if ws else 0.0)
        end = max(end, ends_on_slot[slot][-1] if ends_on_slot[slot] else 0.0)  # a stream runs in order
        est_end[op] = end
        on_slot[slot].append(op)
        ends_on_slot[slot].append(end)
        if i % PRUNE_EVERY == PRUNE_EVERY - 1:
            state.prune()
    meta = dict(base.meta)
    meta.update(guard_waits=len(added), position_bound_bytes=state.peak_bytes, base=base.policy)
    return StreamSchedule(order, base.streams, base.waits + tuple(added), "budget", meta)


def _admit(
    state: PositionBound,
    op: str,
    stream: int,
    before: tuple[int, ...],
    limit_bytes: int,
    on_slot: list[list[str]],
    ends_on_slot: list[list[float]],
    own: int,
) -> tuple[list[str], tuple[int, ...], int] | None:
    """The fewest earliest-finishing ops to wait for so that ``op`` fits: a threshold time T,
    found by bisection; ``op`` waits, on every other stream, for the last op expected to end by T."""
    times = sorted(
        {
            ends_on_slot[t][j]
            for t in range(len(on_slot))
            if t != own
            for j in range(before[t], len(on_slot[t]))
        }
    )
    if not times:
        return None

    def waits_until(limit_time: float) -> list[str]:
        out = []
        for t in range(len(on_slot)):
            if t == own:
                continue
            k = bisect.bisect_right(ends_on_slot[t], limit_time)  # ops 1..k end by the threshold
            if k > before[t]:
                out.append(on_slot[t][k - 1])
        return out

    def value_at(limit_time: float) -> tuple[list[str], tuple[int, ...], int]:
        ws = waits_until(limit_time)
        clock = state.clock_before(stream, ws)
        clock = tuple(max(a, b) for a, b in zip(clock, before, strict=True))
        return ws, clock, state.probe(op, stream, clock)

    full = value_at(times[-1])
    if full[2] > limit_bytes:
        return None
    lo, hi = 0, len(times) - 1  # invariant: times[hi] fits
    while lo < hi:
        mid = (lo + hi) // 2
        if value_at(times[mid])[2] <= limit_bytes:
            hi = mid
        else:
            lo = mid + 1
    return value_at(times[hi])
