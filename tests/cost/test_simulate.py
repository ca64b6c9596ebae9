"""The event simulator: exact small cases with a fake cost model, and bounds on random DAGs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.dags import chain, dag, diamond, random_dags
from streamplan.cost import AnalyticCostModel, FakeCostModel, critical_path_ms, op_costs, simulate
from streamplan.errors import ScheduleError
from streamplan.ir.schedule import StreamSchedule, Wait
from streamplan.schedule.events import with_derived_waits


def on_streams(graph, streams, policy="test"):
    return with_derived_waits(graph, graph.node_ids, streams, policy)


def test_diamond_on_two_streams_is_exact():
    g = diamond()
    cost = FakeCostModel({"n0": 1.0, "n1": 2.0, "n2": 3.0, "n3": 1.0}, occupancy=0.5)
    tl = simulate(g, on_streams(g, {"n0": 0, "n1": 0, "n2": 1, "n3": 0}), cost)
    spans = tl.by_op()
    assert (spans["n1"].start_ms, spans["n1"].end_ms) == (1.0, 3.0)
    assert (spans["n2"].start_ms, spans["n2"].end_ms) == (1.0, 4.0)
    assert (spans["n3"].start_ms, spans["n3"].end_ms) == (4.0, 5.0)
    assert tl.makespan_ms == 5.0
    assert tl.stream_busy_ms == {0: 4.0, 1: 3.0}
    assert [s.op for s in tl.spans] == list(g.node_ids)


def test_wait_delays_its_stream():
    g = dag({}, 2)  # two independent ops
    cost = FakeCostModel({"n0": 2.0, "n1": 1.0}, occupancy=0.1)
    free = StreamSchedule(g.node_ids, {"n0": 0, "n1": 1})
    assert simulate(g, free, cost).makespan_ms == 2.0
    held = free.replace(waits=(Wait("n0", "n1"),))
    tl = simulate(g, held, cost)
    assert tl.span("n1").start_ms == 2.0 and tl.makespan_ms == 3.0


def test_launch_bound_chain():
    g = chain(5)
    tl = simulate(g, on_streams(g, {n: 0 for n in g.node_ids}), FakeCostModel(0.1, launch_ms=1.0))
    assert [s.launch_ms for s in tl.spans] == pytest.approx([1, 2, 3, 4, 5])
    assert tl.makespan_ms == pytest.approx(5.1)


@pytest.mark.parametrize(("occupancy", "expected_ms"), [(1.0, 2.0), (0.75, 1.5), (0.5, 1.0), (0.2, 1.0)])
def test_sharing_slows_ops_when_occupancy_exceeds_device(occupancy, expected_ms):
    g = dag({}, 2)
    tl = simulate(g, StreamSchedule(g.node_ids, {"n0": 0, "n1": 1}), FakeCostModel(1.0, occupancy=occupancy))
    assert tl.span("n0").end_ms == pytest.approx(expected_ms)
    assert tl.span("n1").end_ms == pytest.approx(expected_ms)


def test_uneven_sharing_speeds_up_when_a_partner_finishes():
    g = dag({}, 2)
    cost = FakeCostModel({"n0": 1.0, "n1": 2.0}, occupancy=1.0)
    tl = simulate(g, StreamSchedule(g.node_ids, {"n0": 0, "n1": 1}), cost)
    # both at half speed until n0 is done at 2.0; n1 has 1.0 of its 2.0 left, alone at full speed
    assert tl.span("n0").end_ms == pytest.approx(2.0)
    assert tl.span("n1").end_ms == pytest.approx(3.0)


def test_streams_beyond_hardware_queues_serialise():
    g = dag({}, 3)
    sched = StreamSchedule(g.node_ids, {"n0": 0, "n1": 1, "n2": 2})
    cost = FakeCostModel(1.0, occupancy=0.1)
    assert simulate(g, sched, cost).makespan_ms == pytest.approx(1.0)
    assert simulate(g, sched, cost, max_queues=2).makespan_ms == pytest.approx(2.0)


def test_bad_schedules_raise_schedule_errors():
    g = diamond()
    with pytest.raises(ScheduleError, match="never launched"):
        simulate(g, StreamSchedule(("n0", "n1"), {"n0": 0, "n1": 0}))
    late = StreamSchedule(g.node_ids, {n: 0 for n in g.node_ids}, (Wait("n3", "n1"),))
    with pytest.raises(ScheduleError, match="launched later"):
        simulate(g, late)
    with pytest.raises(ValueError, match="unknown device"):
        simulate(g, StreamSchedule(g.node_ids, {n: 0 for n in g.node_ids}), "tpu9")


@settings(max_examples=40, deadline=None)
@given(graph=random_dags(1, 12), k=st.integers(1, 4), data=st.data())
def test_makespan_between_critical_path_and_serial_sum(graph, k, data):
    ids = graph.node_ids
    times = {n: data.draw(st.floats(0.0, 2.0)) for n in ids}
    occ = {n: data.draw(st.floats(0.05, 1.0)) for n in ids}
    launch = data.draw(st.sampled_from([0.0, 0.01, 0.5]))
    cost = FakeCostModel(times, occ, launch_ms=launch)
    sched = on_streams(graph, {n: i % k for i, n in enumerate(ids)})
    tl = simulate(graph, sched, cost)
    eps = 1e-9 * (1 + sum(times.values()))
    assert tl.makespan_ms >= critical_path_ms(graph, cost) - eps
    assert tl.makespan_ms <= sum(times.values()) + launch * len(ids) + eps
    for u, v in graph.edges():
        assert tl.span(u).end_ms <= tl.span(v).start_ms + eps


@settings(max_examples=15, deadline=None)
@given(graph=random_dags(1, 12), k=st.integers(1, 4))
def test_analytic_bounds_on_random_dags(graph, k):
    cost = AnalyticCostModel("v100")
    tl = simulate(graph, on_streams(graph, {n: i % k for i, n in enumerate(graph.node_ids)}), cost)
    costs = op_costs(graph, graph.node_ids, cost)
    assert tl.makespan_ms >= critical_path_ms(graph, cost) * (1 - 1e-9)
    # The serial bound counts what the simulator charged: op times and launches plus events
    # (host record/wait time, device resume after a cross-stream wait), which only add.
    assert tl.meta["sum_op_ms"] >= sum(costs.time_ms) * (1 - 1e-9)
    assert tl.meta["launch_ms"] >= sum(costs.launch_ms) * (1 - 1e-9)
    assert tl.makespan_ms <= (tl.meta["sum_op_ms"] + tl.meta["launch_ms"]) * (1 + 1e-9)


def test_random_graph_simulates_and_multistream_is_faster():
    from streamplan.zoo.random_dag import random_dag

    g = random_dag(300, 1)
    seq = simulate(g, on_streams(g, {n: 0 for n in g.node_ids}))
    multi = simulate(g, on_streams(g, {n: i % 4 for i, n in enumerate(g.node_ids)}))
    assert multi.makespan_ms < seq.makespan_ms
    assert seq.device == "v100" and seq.meta["queues"] == 1
