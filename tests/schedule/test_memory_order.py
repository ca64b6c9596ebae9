"""The memory policy: optimal on small graphs (brute force), never worse than sequential."""

import itertools

from hypothesis import given, settings

from helpers.dags import UNIT, chain, dag, random_dags
from streamplan.models import load_model
from streamplan.schedule import make_schedule, sequential_peak_bytes, verify_schedule
from streamplan.schedule.memory_order import _segments, memory_order


def _brute_force_peak(g):
    preds = g.pred_positions()
    ids = g.node_ids
    best = None
    for perm in itertools.permutations(range(len(ids))):
        pos = {p: i for i, p in enumerate(perm)}
        if all(pos[u] < pos[v] for v in range(len(ids)) for u in preds[v]):
            peak = sequential_peak_bytes(g, [ids[p] for p in perm])
            best = peak if best is None else min(best, peak)
    return best


@settings(max_examples=40, deadline=None)
@given(random_dags(1, 7, vary_sizes=True))
def test_memory_order_is_optimal_on_small_graphs(g):
    s = make_schedule(g, "memory")
    verify_schedule(g, s)
    assert s.num_streams <= 1
    peak = sequential_peak_bytes(g, s.launch_order)
    assert peak == s.meta["peak_bytes"] == _brute_force_peak(g)
    assert s.meta["exact"]
    assert peak <= sequential_peak_bytes(g, g.node_ids)


@settings(max_examples=30, deadline=None)
@given(random_dags(1, 12, vary_sizes=True))
def test_heuristics_alone_never_worse_than_sequential(g):
    mo = memory_order(g, exact_max_states=1)
    assert sorted(mo.order) == sorted(g.node_ids)
    assert mo.peak_bytes == sequential_peak_bytes(g, mo.order) <= sequential_peak_bytes(g, g.node_ids)


def test_branch_first_beats_graph_order():
    g = dag(
        {1: [0], 2: [0], 3: [1], 4: [2], 5: [3, 4]}, 6, sizes=[UNIT, 4 * UNIT, 4 * UNIT, UNIT, UNIT, UNIT]
    )
    g = g.replace(nodes=tuple(g.node(i) for i in ("n0", "n1", "n2", "n3", "n4", "n5")))
    mo = memory_order(g)
    assert mo.sequential_peak_bytes == 9 * UNIT
    assert mo.peak_bytes == 6 * UNIT and mo.exact


def test_single_node_cuts_split_the_search():
    g = chain(5)
    assert _segments(g.pred_positions(), g.succ_positions()) == [(i, i + 1) for i in range(5)]
    g = load_model("seed-example2")  # a | b c d e | f
    assert _segments(g.pred_positions(), g.succ_positions()) == [(0, 1), (1, 5), (5, 6)]


def test_large_graph_is_valid_and_not_worse():
    g = load_model("random:300")
    s = make_schedule(g, "memory")
    verify_schedule(g, s)
    assert s.meta["peak_bytes"] <= s.meta["sequential_peak_bytes"]
