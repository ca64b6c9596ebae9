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
    # the search's candidate budget bounds it, not the clock: a loaded machine must not halve blocks
    sched = schedule_ios(g, ScheduleContext(cost="v100", time_limit_s=600))
    assert not sched.meta.get("timed_out_blocks")
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
    from streamplan.schedule.ios_search import _chains, _components

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


def test_synchronized_executor_times_stages_as_ios_runs_them():
    """One-group stages run back to back (host ahead); a stage of several groups is launched
    group after group on an idle device and followed by a device-wide synchronize."""
    from streamplan.cost.simulate import op_costs
    from streamplan.schedule.ios import synchronized_ms

    g = load_model("seed-example2")  # a, {b -> d | c -> e}, f
    cost = FakeCostModel(1.0, occupancy=0.5, launch_ms=0.25)
    pos = {op: i for i, op in enumerate(g.node_ids)}
    costs = op_costs(g, g.node_ids, cost)
    supply = cost.device_facts.supply
    one_by_one = [[[p]] for p in range(len(g.node_ids))]
    # six kernels on one stream, the host one launch ahead: 0.25 + 6 x 1.0, and no synchronize
    assert synchronized_ms(g, one_by_one, costs, supply, 0.1) == 6.25
    a, b, c, d, e, f = (pos[x] for x in "abcdef")
    staged = [[[a]], [[b, d], [c, e]], [[f]]]
    # [a] 1.25 | b, d, c, e launched in that order: c starts at 0.75, e ends at 0.75 + 2 = 2.75 | [f] 1.25
    assert abs(synchronized_ms(g, staged, costs, supply, 0.1) - (1.25 + 2.75 + 1.25 + 2 * 0.1)) < 1e-12


def test_the_synchronized_search_pays_for_launches_and_synchronizes():
    g = load_model("seed-example2")
    cheap = FakeCostModel(1.0, occupancy=0.5, launch_ms=0.01)
    ctx = ScheduleContext(cost=cheap, options={"executor": "synchronized", "sync_ms": 0.01})
    sched = schedule_ios(g, ctx)
    verify_schedule(g, sched)
    assert sched.meta["executor"] == "synchronized" and sched.num_streams == 2
    # groups of a stage are its connected components: no edge between two groups of a stage
    group_of = {
        op: (k, j) for k, st in enumerate(sched.meta["stages"]) for j, grp in enumerate(st) for op in grp
    }
    for op, preds in zip(g.node_ids, g.pred_positions(), strict=True):
        for src in (g.node_ids[q] for q in preds):
            assert group_of[src][0] != group_of[op][0] or group_of[src] == group_of[op]
    assert sched.meta["predicted_ms"] < sched.meta["sequential_ms"]
    # with launches and synchronizes dearer than the kernels, one stream wins
    dear = FakeCostModel(1.0, occupancy=0.5, launch_ms=0.9)
    ctx = ScheduleContext(cost=dear, options={"executor": "synchronized", "sync_ms": 2.0})
    assert all(len(stage) == 1 for stage in schedule_ios(g, ctx).meta["stages"])


def test_bad_ios_options_are_refused():
    import pytest

    from streamplan.errors import ScheduleError
    from streamplan.schedule import make_schedule

    g = load_model("seed-example2")
    for bad in ({"executor": "cuda"}, {"sync_ms": -1.0}, {"sync_ms": float("nan")}, {"block_budget": 0}):
        with pytest.raises(ScheduleError):
            make_schedule(g, "ios", ScheduleContext(options=bad))


def test_a_small_block_budget_halves_blocks_and_a_large_one_does_not():
    g = load_model("random:60:2")
    small = schedule_ios(g, ScheduleContext(cost="v100", options={"block_budget": 50}))
    verify_schedule(g, small)
    assert small.meta["halved_blocks"] > 0
    large = schedule_ios(g, ScheduleContext(cost="v100", time_limit_s=600, options={"block_budget": 10**7}))
    assert large.meta["halved_blocks"] == 0
