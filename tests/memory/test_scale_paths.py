"""The fast paths of the memory analysis give exactly what the plain algorithms give.

The plain versions live here as oracles: a per-event sweep of live bytes, host-order
events summed launch by launch, and best fit against numpy arrays of open blocks.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.dags import random_dags
from streamplan.ir.includes import Includes
from streamplan.memory import arena as arena_mod
from streamplan.memory.arena import _interval_best_fit, _interval_best_fit_arrays, plan_arena
from streamplan.memory.conflicts import arena_overlaps
from streamplan.memory.host_order import events_from_liveness, trace_from_liveness
from streamplan.memory.liveness import liveness
from streamplan.memory.simulated import sweep_live_bytes
from streamplan.models import load_model
from streamplan.schedule.context import ScheduleContext
from streamplan.schedule.registry import make_schedule


def plain_sweep(live, order, start, end):
    """The event-by-event sweep (what ``sweep_live_bytes`` computes with arrays)."""
    rank = {op: i for i, op in enumerate(order)}
    created, uses, remaining, cur = {}, {}, {}, 0
    for life in live.lives:
        if life.creator is None:
            cur += life.nbytes
            continue
        created.setdefault(life.creator, []).append(life)
        if not life.persistent:
            remaining[life.storage] = len(life.users)
            for u in life.users:
                uses.setdefault(u, []).append(life)
    events = []
    for op in order:
        s, e = start[op], end[op]
        events.append((s, 1, rank[op], 0, op))
        events.append((e, 0 if e > s else 1, rank[op], 1, op))
    events.sort()
    peak, peak_t, peak_at, samples = cur, 0.0, -1, []
    for k, (t, _, _, is_end, op) in enumerate(events):
        if is_end:
            for life in uses.get(op, ()):
                remaining[life.storage] -= 1
                if remaining[life.storage] == 0:
                    cur -= life.nbytes
        else:
            cur += sum(life.nbytes for life in created.get(op, ()))
            if cur > peak or peak_at < 0:
                peak, peak_t, peak_at = cur, t, k
        samples.append((t, cur))
    left = {life.storage: len(life.users) for life in live.lives if not life.persistent}
    alive, finished, running = {}, [], {}
    for _, _, _, is_end, op in events[: peak_at + 1]:
        if is_end:
            running.pop(op, None)
            finished.append(op)
            for life in uses.get(op, ()):
                left[life.storage] -= 1
                if left[life.storage] == 0:
                    alive.pop(life.storage, None)
        else:
            running[op] = None
            for life in created.get(op, ()):
                alive[life.storage] = life.nbytes
    resident = tuple(life.storage for life in live.lives if life.creator is None)
    return peak, peak_t, tuple(samples), resident + tuple(alive), tuple(finished), tuple(running)


@settings(max_examples=60)
@given(random_dags(min_nodes=1, max_nodes=12, vary_sizes=True), st.integers(0, 10**6), st.booleans())
def test_sweep_equals_the_event_by_event_sweep(graph, seed, inputs):
    s = make_schedule(graph, "asap", ScheduleContext(max_streams=3))
    live = liveness(graph, s, includes=Includes(inputs=inputs))
    rng = random.Random(seed)
    order = list(s.launch_order)
    # coarse times: many ties and zero-length ops, where the order of events matters most
    start = {op: float(rng.randint(0, 4)) for op in order}
    end = {op: start[op] + rng.choice((0.0, 0.0, 1.0, 2.0)) for op in order}
    got = sweep_live_bytes(live, order, start, end)
    want = plain_sweep(live, order, start, end)
    assert (got.peak_bytes, got.peak_time, got.samples, got.live, got.finished, got.running) == want


@settings(max_examples=60)
@given(random_dags(min_nodes=1, max_nodes=12, vary_sizes=True), st.booleans())
def test_host_order_trace_equals_the_events_summed(graph, inputs):
    s = make_schedule(graph, "nimble", ScheduleContext(max_streams=3))
    live = liveness(graph, s, includes=Includes(inputs=inputs))
    trace = trace_from_liveness(live, s)
    cur, allocs, frees = 0, {}, {}
    for e in events_from_liveness(live, s):
        if e.launch_index < 0:
            cur += e.nbytes
        else:
            into = allocs if e.kind == "alloc" else frees
            into[e.launch_index] = into.get(e.launch_index, 0) + e.nbytes
    values, peak, peak_at = [], cur, -1
    for i in range(len(s.launch_order)):
        cur += allocs.get(i, 0)
        values.append(cur)
        if cur > peak or peak_at < 0:
            peak, peak_at = cur, i
        cur -= frees.get(i, 0)
    assert [e.live_bytes for e in trace.entries] == values
    assert (trace.peak_bytes, trace.peak_launch_index, trace.final_bytes) == (peak, peak_at, cur)


@settings(max_examples=200)
@given(
    st.lists(
        st.tuples(st.integers(0, 30), st.integers(1, 9), st.integers(1, 12)),  # birth, size, lifetime
        min_size=1,
        max_size=60,
    )
)
def test_interval_best_fit_equals_the_array_version(items):
    birth = [b for b, _, _ in items]
    size = [s * 256 for _, s, _ in items]
    dead = [b + d for b, _, d in items]
    order = sorted(range(len(items)), key=lambda i: (birth[i], -size[i]))
    assert _interval_best_fit(order, birth, size, dead) == _interval_best_fit_arrays(order, birth, size, dead)


@pytest.mark.parametrize(
    "spec,policy", [("random:400", "asap"), ("random:300:2", "nimble"), ("seed-concat", "asap")]
)
def test_launch_interval_placement_is_valid(spec, policy, monkeypatch):
    """The placement used above 20M conflict pairs, forced on small graphs: no two storages
    that may coexist share bytes, and every storage has its own range."""
    monkeypatch.setattr(arena_mod, "MAX_CONFLICT_PAIRS", 0)
    g = load_model(spec)
    s = make_schedule(g, policy, ScheduleContext(max_streams=4))
    live = liveness(g, s)
    plan = plan_arena(g, s, live=live)
    assert plan.order == "launch-interval"
    assert arena_overlaps(live, plan.offsets) == []
    assert plan.arena_bytes >= plan.lower_bound_bytes


def test_dead_positions_match_one_by_one():
    g = load_model("random:300")
    s = make_schedule(g, "asap", ScheduleContext(max_streams=4))
    live = liveness(g, s)
    r = arena_mod._Ranges(live)
    n = len(s.launch_order)
    assert r.dead_positions(live).tolist() == [r.dead_position(life, n) for life in live.lives]
    assert np.all(r.dead_positions(live) >= 0)
