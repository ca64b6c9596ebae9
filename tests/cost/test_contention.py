"""The contention model: fair shares, co-run rates, and the simulator's use of them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.dags import dag
from streamplan.cost import Demand, FakeCostModel, Supply, corun_rates, simulate
from streamplan.cost.contention import fair_shares
from streamplan.cost.opcost import DeviceFacts
from streamplan.ir.schedule import StreamSchedule

demands = st.lists(
    st.builds(Demand, st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0)), min_size=1, max_size=8
)
supplies = st.builds(
    Supply, st.floats(0.2, 2.0), st.floats(0.2, 2.0), st.floats(0.2, 2.0), st.floats(0.0, 2.0)
)


def test_fair_shares_give_small_demands_all_they_ask():
    assert fair_shares([0.1, 1.0, 1.0], 1.0) == pytest.approx([0.1, 0.45, 0.45])
    assert fair_shares([0.3, 0.3], 1.0) == [0.3, 0.3]  # under capacity: everyone gets their demand
    assert fair_shares([1.0, 1.0], 1.0) == pytest.approx([0.5, 0.5])


@given(demands, supplies)
def test_rates_never_exceed_one_and_no_resource_is_overdrawn(ds, supply):
    rates = corun_rates(ds, supply)
    assert all(0.0 < r <= 1.0 for r in rates)
    for resource in ("sm", "dram", "lock"):
        used = sum(getattr(d, resource) * r for d, r in zip(ds, rates, strict=True))
        assert used <= getattr(supply, resource) + 1e-9


def test_one_op_alone_runs_at_full_speed():
    assert corun_rates([Demand(1.0, 1.0, 1.0)], Supply(interference=2.0)) == [1.0]


def test_two_bandwidth_bound_ops_halve_each_other_but_a_compute_bound_one_barely_notices():
    copy, copy2, gemm = Demand(0.5, 1.0), Demand(0.5, 1.0), Demand(0.5, 0.05)
    assert corun_rates([copy, copy2], Supply()) == pytest.approx([0.5, 0.5])
    r_copy, r_gemm = corun_rates([copy, gemm], Supply())
    assert r_copy == pytest.approx(0.95) and r_gemm == 1.0  # the GEMM's small share is served in full


def test_interference_slows_an_op_by_its_co_runners_bandwidth():
    a, b = Demand(0.2, 0.4), Demand(0.2, 0.1)
    ra, rb = corun_rates([a, b], Supply(interference=0.5))
    assert ra == pytest.approx(1 / (1 + 0.5 * 0.1)) and rb == pytest.approx(1 / (1 + 0.5 * 0.4))


def test_the_lock_serialises_interpreter_bound_ops():
    tiny = Demand(sm=0.5, lock=1.0)  # a CPU-runtime op that is all interpreter work
    assert corun_rates([tiny, tiny], Supply()) == pytest.approx([0.5, 0.5])


def test_lock_interference_slows_the_interpreter_part_of_ops_whose_co_runners_hold_the_lock():
    small, big = Demand(sm=0.5, lock=0.4), Demand(sm=0.5, lock=0.01)
    supply = Supply(sm=2.0, lock_interference=3.0)
    rs, rb = corun_rates([small, small], supply)
    assert rs == rb == pytest.approx(1 / (1 + 3.0 * 0.4 * 0.4))  # each slowed by the other's lock share
    r_small, r_big = corun_rates([small, big], supply)
    assert r_small == pytest.approx(1 / (1 + 3.0 * 0.01 * 0.4))  # a kernel-bound co-runner barely slows it
    assert r_big == pytest.approx(1 / (1 + 3.0 * 0.4 * 0.01))  # nor is it slowed: little interpreter work
    assert corun_rates([small], supply) == [1.0]  # alone: as measured alone
    s = Supply(interference=0.1, lock_interference=4.5)
    assert Supply.from_dict(s.to_dict()) == s and not s.is_perfect_sharing
    assert Supply.from_dict({"sm": 1.0}).lock_interference == 0.0  # profiles written before it
    with pytest.raises(ValueError, match="lock_interference"):
        Supply.from_dict({"lock_interference": -1})


def test_lock_interference_can_make_small_ops_slower_on_two_streams_than_on_one():
    g = dag({2: [0], 3: [1]}, 4)  # two chains: n0 -> n2, n1 -> n3
    one = StreamSchedule(g.node_ids, {n: 0 for n in g.node_ids})
    two = StreamSchedule(g.node_ids, {"n0": 0, "n2": 0, "n1": 1, "n3": 1})

    class _Small(FakeCostModel):
        def __init__(self, supply):
            super().__init__(1.0, occupancy=0.5)
            self.supply = supply

        @property
        def device_facts(self):
            return DeviceFacts(supply=self.supply)

        def demand(self, graph, node):
            return Demand(sm=0.5, lock=0.8)

    calm, contended = (
        _Small(Supply(sm=1.0, lock=2.0)),
        _Small(Supply(sm=1.0, lock=2.0, lock_interference=2.0)),
    )
    assert simulate(g, two, calm).makespan_ms == pytest.approx(2.0)  # two cores, no hand-off cost
    assert (
        simulate(g, two, contended).makespan_ms
        > simulate(g, one, contended).makespan_ms
        == pytest.approx(4.0)
    )


class _Bandwidth(FakeCostModel):
    """A fake whose ops each draw a given share of the DRAM bandwidth, on a device with a supply."""

    def __init__(self, times, dram, supply):
        super().__init__(times, occupancy=0.1)
        self.dram, self.supply = dram, supply

    @property
    def device_facts(self):
        return DeviceFacts(supply=self.supply)

    def demand(self, graph, node):
        return Demand(sm=0.1, dram=self.dram[node.id])


def test_simulator_slows_concurrent_memory_bound_ops_and_speeds_up_when_one_ends():
    g = dag({}, 2)
    sched = StreamSchedule(g.node_ids, {"n0": 0, "n1": 1})
    cost = _Bandwidth({"n0": 1.0, "n1": 2.0}, {"n0": 1.0, "n1": 1.0}, Supply())
    tl = simulate(g, sched, cost)
    # both at half speed until n0 is done at 2.0; n1 then has 1.0 of its 2.0 left, alone at full speed
    assert tl.span("n0").end_ms == pytest.approx(2.0) and tl.span("n1").end_ms == pytest.approx(3.0)
    # the same ops with no bandwidth demand overlap perfectly (occupancy 0.1 each)
    free = _Bandwidth({"n0": 1.0, "n1": 2.0}, {"n0": 0.0, "n1": 0.0}, Supply())
    assert simulate(g, sched, free).makespan_ms == pytest.approx(2.0)


def test_interference_can_make_two_streams_slower_than_one():
    g = dag({}, 2)
    cost = _Bandwidth({"n0": 1.0, "n1": 1.0}, {"n0": 1.0, "n1": 1.0}, Supply(interference=0.5))
    one = simulate(g, StreamSchedule(g.node_ids, {"n0": 0, "n1": 0}), cost).makespan_ms
    two = simulate(g, StreamSchedule(g.node_ids, {"n0": 0, "n1": 1}), cost).makespan_ms
    assert one == pytest.approx(2.0) and two == pytest.approx(3.0)  # rate 0.5 / 1.5 each
