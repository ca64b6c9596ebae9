"""Nimble: independent ops on different streams, and the fewest events (brute-force oracle)."""

import itertools

from hypothesis import given, settings

from helpers.dags import dag, random_dags
from streamplan.ir.analysis import transitive_closure_bits
from streamplan.schedule import derive_waits, make_schedule, verify_schedule
from streamplan.schedule.context import ScheduleContext

NO_CAP = 10**6


def _topo_orders(g):
    preds = g.pred_positions()
    n = len(preds)

    def rec(done, order):
        if len(order) == n:
            yield list(order)
            return
        for v in range(n):
            if not done >> v & 1 and all(done >> u & 1 for u in preds[v]):
                order.append(v)
                yield from rec(done | 1 << v, order)
                order.pop()

    yield from rec(0, [])


def _chain_partitions(reach, n):
    """Every split of 0..n-1 into blocks whose members are pairwise ordered."""

    def rec(v, blocks):
        if v == n:
            yield [list(b) for b in blocks]
            return
        for b in blocks:
            if all(reach[u] >> v & 1 for u in b):
                b.append(v)
                yield from rec(v + 1, blocks)
                b.pop()
        blocks.append([v])
        yield from rec(v + 1, blocks)
        blocks.pop()

    yield from rec(0, [])


def _min_events(g):
    ids = g.node_ids
    reach = transitive_closure_bits(g)
    orders = [[ids[p] for p in o] for o in _topo_orders(g)]
    best = None
    for blocks in _chain_partitions(reach, len(ids)):
        streams = {ids[p]: b for b, blk in enumerate(blocks) for p in blk}
        for order in orders:
            events = len({w.after for w in derive_waits(g, order, streams)})
            best = events if best is None else min(best, events)
    return best


def _assert_independent_apart(g, s):
    reach = transitive_closure_bits(g)
    ids = g.node_ids
    for a, b in itertools.combinations(range(len(ids)), 2):
        if not (reach[a] >> b & 1 or reach[b] >> a & 1):
            assert s.streams[ids[a]] != s.streams[ids[b]], (ids[a], ids[b])


@settings(max_examples=30, deadline=None)
@given(random_dags(1, 7))
def test_nimble_is_maximally_concurrent_with_fewest_events(g):
    s = make_schedule(g, "nimble", ScheduleContext(max_streams=NO_CAP))
    verify_schedule(g, s)
    _assert_independent_apart(g, s)
    assert s.num_events == _min_events(g)


def test_chains_are_merged_onto_fewer_streams():
    # Two ordered chains (n0 -> n1, then n2 -> n3 after n1) and a side op: 2 streams, not 3.
    g = dag({1: [0], 2: [1], 3: [2], 4: [0], 5: [3, 4]}, 6)
    s = make_schedule(g, "nimble", ScheduleContext(max_streams=NO_CAP))
    assert s.num_streams == 2
    _assert_independent_apart(g, s)


def test_cap_reports_lost_concurrency():
    g = dag({1: [0], 2: [0], 3: [0], 4: [1, 2, 3]}, 5)  # three parallel branches
    s = make_schedule(g, "nimble", ScheduleContext(max_streams=2))
    verify_schedule(g, s)
    assert s.num_streams == 2
    assert s.meta["streams_uncapped"] == 3
    assert s.meta["lost_concurrency_pairs"] == 1
