"""The IOS policy: valid schedules, stage structure, and never slower than one stream."""

from __future__ import annotations

from hypothesis import given, settings

from helpers.dags import chain, dag, diamond, random_dags
from streamplan.cost import FakeCostModel, simulate
from streamplan.ir.schedule import StreamSchedule
from streamplan.models import load_model
from streamplan.schedule.context import ScheduleContext
from streamplan.schedule.ios import chain_units, schedule_ios, split_blocks
from streamplan.schedule.verify import verify_schedule


def one_stream(graph):
    return StreamSchedule(graph.node_ids, {n: 0 for n in graph.node_ids})


@settings(max_examples=30, deadline=None)
@given(graph=random_dags(1, 10))
def test_ios_schedules_are_valid(graph):
    sched = schedule_ios(graph, ScheduleContext(max_streams=3, options={"r": 2, "s": 3, "block_ops": 6}))
    verify_schedule(graph, sched)
    assert sorted(sched.launch_order) == sorted(graph.node_ids)
    assert sched.num_streams <= 3
    stage_ops = [op for stage in sched.meta["stages"] for group in stage for op in group]
    assert sorted(stage_ops) == sorted(graph.node_ids)
    assert all(len(stage) <= 3 for stage in sched.meta["stages"])
    # stages run in order: every op of a stage is launched after every op of the one before
    index = {op: i for i, op in enumerate(sched.launch_order)}
    stages = sched.meta["stages"]
    for before, after in zip(stages, stages[1:], strict=False):
        assert max(index[o] for g in before for o in g) < min(index[o] for g in after for o in g)


def test_parallel_branches_get_their_own_streams():
    g = load_model("seed-example2")
    cost = FakeCostModel(1.0, occupancy=0.5)
    sched = schedule_ios(g, ScheduleContext(cost=cost))
    verify_schedule(g, sched)
    assert simulate(g, sched, cost).makespan_ms == 4.0  # a, {b->d | c->e}, f
    assert simulate(g, one_stream(g), cost).makespan_ms == 6.0
    assert not sched.meta["fallback_sequential"]
    assert sched.num_streams == 2
    assert sched.meta["search_time_s"] >= 0 and sched.meta["predicted_ms"] == 4.0


def test_ios_is_never_slower_than_sequential():
    for spec in ("seed-example2", "seed-concat", "random:40:3"):
        g = load_model(spec)
        sched = schedule_ios(g, ScheduleContext(cost="v100"))
        verify_schedule(g, sched)
        assert (
            simulate(g, sched, "v100").makespan_ms <= simulate(g, one_stream(g), "v100").makespan_ms + 1e-12
        )
    g = load_model("random:40:3")
    sched = schedule_ios(g, ScheduleContext(cost="v100"))
    assert simulate(g, sched).makespan_ms < 0.9 * simulate(g, one_stream(g)).makespan_ms


def test_full_occupancy_ops_stay_sequential():
    g = diamond()
    cost = FakeCostModel(1.0, occupancy=1.0)
    sched = schedule_ios(g, ScheduleContext(cost=cost))
    assert simulate(g, sched, cost).makespan_ms == 4.0


def test_units_and_blocks():
    assert chain_units(chain(5)) == [[0, 1, 2, 3, 4]]
    assert chain_units(diamond()) == [[0], [1], [2], [3]]
    g = dag({1: [0], 2: [0], 3: [1, 2], 4: [3], 5: [3], 6: [4, 5]}, 7)
    units = chain_units(g)
    assert split_blocks(units, g, 20) == [[0], [1, 2, 3], [4, 5, 6]]
    assert split_blocks(units, g, 2) == [[0], [1, 2], [3], [4, 5], [6]]


def test_chain_split_lets_groups_share_a_descendant():
    from streamplan.schedule.ios import _chains, _components

    # local units 0 -> 2 <- 1 (two branches joining): IOS's partition is one group of 3,
    # the split puts the branches on two groups and the join after one of them
    preds = [0, 0, 0b011]
    succs = [0b100, 0b100, 0]
    assert _components(0b111, preds, succs) == [[0, 1, 2]]
    assert _chains([0, 1, 2], preds, 3) == [[0, 2], [1]]


def test_single_op_graph():
    g = chain(1)
    sched = schedule_ios(g)
    verify_schedule(g, sched)
    assert sched.launch_order == ("n0",) and sched.meta["stages"] == [[["n0"]]]


def test_out_of_time_blocks_are_halved_down_to_one_stream():
    g = load_model("random:60:2")
    fast = schedule_ios(g, ScheduleContext(cost="v100", time_limit_s=1e-6))
    verify_schedule(g, fast)
    assert fast.meta["timed_out_blocks"] > 0
    assert simulate(g, fast, "v100").makespan_ms <= simulate(g, one_stream(g), "v100").makespan_ms + 1e-12
    full = schedule_ios(g, ScheduleContext(cost="v100", time_limit_s=600))
    assert full.meta["timed_out_blocks"] == 0
