"""The latency bound holds for every schedule, and each of its terms is right on simple graphs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.dags import chain, dag, random_dags
from helpers.memory_oracles import schedules_for
from streamplan.cost import AnalyticCostModel, FakeCostModel, latency_bound, simulate
from streamplan.schedule import make_schedule


def test_chain_bound_is_its_launches_then_its_ops():
    g = chain(4)
    cost = FakeCostModel(1.0, launch_ms=0.5)
    b = latency_bound(g, cost)
    # op i cannot start before i+1 launches are done; the chain then runs serially
    assert b.critical_path_ms == pytest.approx(0.5 + 4 * 1.0)
    assert b.host_launch_ms == pytest.approx(4 * 0.5 + 1.0)
    assert b.binding == "critical path" and b.bound_ms == pytest.approx(4.5)


def test_launch_bound_fan_out():
    g = dag({}, 10)  # ten independent ops
    b = latency_bound(g, FakeCostModel(0.1, launch_ms=1.0, occupancy=0.1))
    assert b.binding == "host launches" and b.bound_ms == pytest.approx(10.1)
    tl = simulate(g, make_schedule(g, "asap"), FakeCostModel(0.1, launch_ms=1.0, occupancy=0.1))
    assert tl.makespan_ms == pytest.approx(b.bound_ms)


def test_capacity_bound_for_wide_full_ops():
    g = dag({}, 4)
    b = latency_bound(g, FakeCostModel(2.0, occupancy=1.0))
    assert b.binding == "device capacity" and b.bound_ms == pytest.approx(8.0)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_no_schedule_beats_the_bound(data):
    g = data.draw(random_dags(min_nodes=1, max_nodes=10))
    times = {n: data.draw(st.floats(0.1, 3.0)) for n in g.node_ids}
    occ = {n: data.draw(st.floats(0.05, 1.0)) for n in g.node_ids}
    cost = FakeCostModel(times, occupancy=occ, launch_ms=data.draw(st.sampled_from([0.0, 0.2, 1.0])))
    s = data.draw(schedules_for(g))
    assert simulate(g, s, cost).makespan_ms >= latency_bound(g, cost).bound_ms - 1e-9


@pytest.mark.parametrize("graphs", [False, True])
def test_zoo_policies_are_above_the_bound(graphs):
    from helpers.models import graph_of

    g = graph_of("squeezenet")
    cost = AnalyticCostModel("h100", cuda_graphs=graphs)
    b = latency_bound(g, cost)
    assert b.cuda_graphs is graphs
    for policy in ("sequential", "asap", "nimble"):
        assert simulate(g, make_schedule(g, policy), cost).makespan_ms >= b.bound_ms
