"""Every policy's schedule passes the verifier, respects the stream cap, and launches in topological order."""

import pytest
from hypothesis import given, settings

from helpers.dags import random_dags
from streamplan.errors import ScheduleError
from streamplan.models import load_model
from streamplan.schedule import POLICIES, available_policies, get_policy, make_schedule, verify_schedule
from streamplan.schedule.context import ScheduleContext

# ios and budget have their own tests (test_ios.py, tests/budget); they join only the small fixed
# graphs here (budget runs every fixed policy, ios included).
ALL = list(available_policies())
LOCAL = [p for p in ALL if p not in ("ios", "budget")]


def _check(graph, schedule, max_streams):
    verify_schedule(graph, schedule)
    used = sorted(set(schedule.streams.values()))
    assert used == list(range(len(used)))
    assert len(used) <= max_streams
    pos = {op: i for i, op in enumerate(schedule.launch_order)}
    for u, v in graph.edges():
        assert pos[u] < pos[v]


def test_policy_names_in_display_order():
    assert POLICIES == ("sequential", "memory", "wavefront", "asap", "nimble", "ios", "budget", "overlap")
    assert set(LOCAL) >= {"sequential", "memory", "wavefront", "asap", "nimble"}


def test_unknown_policy_lists_the_policies():
    g = load_model("seed-example1")
    with pytest.raises(ScheduleError, match="sequential, memory, wavefront"):
        make_schedule(g, "fastest")
    with pytest.raises(ScheduleError, match="max_streams"):
        make_schedule(g, "asap", ScheduleContext(max_streams=0))


@settings(max_examples=40, deadline=None)
@given(random_dags(1, 10))
def test_every_policy_verifies_on_random_dags(g):
    for policy in LOCAL:
        for max_streams in (1, 2, 8):
            s = make_schedule(g, policy, ScheduleContext(max_streams=max_streams))
            _check(g, s, max_streams)
            assert s.meta["search_time_s"] >= 0
            # the raw policy output (before pruning) is valid too
            _check(g, get_policy(policy)(g, ScheduleContext(max_streams=max_streams)), max_streams)


# ios on random:200 searches for seconds per stream cap; test_ios.py covers random graphs.
GRAPH_CASES = [
    (spec, policy)
    for spec in ("seed-example1", "seed-example2", "seed-concat", "random:200")
    for policy in ALL
    if not (policy in ("ios", "budget") and spec.startswith("random"))
]


@pytest.mark.parametrize("spec,policy", GRAPH_CASES)
def test_zoo_graphs_verify(spec, policy):
    g = load_model(spec)
    for max_streams in (1, 2, 8):
        _check(g, make_schedule(g, policy, ScheduleContext(max_streams=max_streams)), max_streams)


@pytest.mark.parametrize("policy", ["asap", "wavefront", "nimble"])
def test_seed_example2_uses_two_streams(policy):
    g = load_model("seed-example2")
    s = make_schedule(g, policy)
    assert s.num_streams == 2
    assert s.num_events == 2  # a -> c across, and one branch joining f


def test_sequential_is_graph_order_on_one_stream():
    g = load_model("random:50")
    s = make_schedule(g, "sequential")
    assert s.launch_order == g.node_ids and s.num_streams == 1 and not s.waits


def test_wavefront_barrier_keeps_waves_apart():
    # n0 -> n1 -> n2 and an independent long chain n3..n6 feeding n7 with n2.
    from helpers.dags import dag

    g = dag({1: [0], 2: [1], 4: [3], 5: [4], 6: [5], 7: [2, 6]}, 8)
    s = make_schedule(g, "wavefront")
    verify_schedule(g, s)
    assert s.meta["waves"] == 2  # {n0..n2, n3..n6} then {n7}


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["squeezenet", "inception_v3"])
def test_captured_models_verify(spec):
    g = load_model(spec)
    for policy in ALL:
        _check(g, make_schedule(g, policy), 8)
