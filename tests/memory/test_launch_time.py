"""Memory at host launch time: held bytes (allocated + held by record_stream) against a brute
force over every timing the host waits allow, and the device worst case with host waits."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.dags import UNIT, dag, random_dags
from helpers.memory_oracles import (
    brute_force_held_peak,
    brute_force_worst_case,
    schedules_for,
    timelines_for,
    with_host_waits,
)
from streamplan.ir.schedule import StreamSchedule, Wait
from streamplan.memory import host_order_peak_bytes, liveness, worst_case_peak
from streamplan.memory.allocators import replay
from streamplan.memory.launch_time import held_peak


@st.composite
def graph_and_schedule(draw, max_nodes=6):
    g = draw(random_dags(min_nodes=1, max_nodes=max_nodes, vary_sizes=True))
    s = draw(schedules_for(g))
    return g, draw(with_host_waits(g, s))


@settings(max_examples=60, deadline=None)
@given(graph_and_schedule())
def test_run_ahead_held_peak_equals_brute_force(gs):
    g, s = gs
    assert held_peak(liveness(g, s), s).peak_bytes == brute_force_held_peak(g, s)


@settings(max_examples=40, deadline=None)
@given(graph_and_schedule())
def test_device_worst_case_with_host_waits_equals_brute_force(gs):
    g, s = gs
    wc = worst_case_peak(g, s)
    assert wc.exact and wc.lower_bytes == brute_force_worst_case(g, s)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_simulated_held_is_between_host_order_and_the_worst_case(data):
    g, s = data.draw(graph_and_schedule())
    live = liveness(g, s)
    tl = data.draw(timelines_for(s))
    sim = held_peak(live, s, timeline=tl)
    worst = held_peak(live, s)
    assert host_order_peak_bytes(g, s) <= sim.peak_bytes <= worst.peak_bytes
    assert sim.peak_bytes == sim.allocated_bytes + sim.held_bytes


@settings(max_examples=30, deadline=None)
@given(graph_and_schedule())
def test_one_stream_holds_nothing_back(gs):
    g, s = gs
    one = s.replace(streams=dict.fromkeys(s.launch_order, 0), waits=())
    assert held_peak(liveness(g, one), one).peak_bytes == host_order_peak_bytes(g, one)


def test_unbounded_run_ahead_holds_every_cross_stream_block_and_a_host_wait_releases_it():
    g = dag({1: [0], 2: [], 3: [2], 4: [1, 3]}, 5, sizes=[4 * UNIT, UNIT, 4 * UNIT, UNIT, UNIT])
    # n0 and n2 make 4 MiB on stream 1; n1 and n3 read them on stream 0
    order = ("n0", "n1", "n2", "n3", "n4")
    streams = {"n0": 1, "n1": 0, "n2": 1, "n3": 0, "n4": 0}
    waits = (Wait("n0", "n1"), Wait("n2", "n3"))
    free_run = StreamSchedule(order, streams, waits)
    live = liveness(g, free_run)
    unbounded = held_peak(live, free_run)
    # v0 and v2 are freed by the host after n1's and n3's launches, but with nothing making
    # the host wait, the device may not have run n1 or n3 yet: both stay held at n4
    assert unbounded.held == ("v0", "v2") and unbounded.peak_op == "n4"
    assert (unbounded.allocated_bytes, unbounded.held_bytes) == (3 * UNIT, 8 * UNIT)
    limited = free_run.replace(host_waits=(Wait("n1", "n2"),))  # v0 is back before v2 is made
    assert held_peak(liveness(g, limited), limited).peak_bytes == 3 * UNIT + 4 * UNIT
    both = free_run.replace(host_waits=(Wait("n1", "n2"), Wait("n3", "n4")))
    assert held_peak(liveness(g, both), both).peak_bytes == 6 * UNIT  # v1, v2, v3 at n3
    # without record_stream (the reuse ordered by waits) nothing is held
    plain = free_run.replace(record_stream=False, waits=(*waits, Wait("n1", "n2")))
    assert held_peak(liveness(g, plain), plain).peak_bytes == host_order_peak_bytes(g, plain)


def test_torch_cuda_run_ahead_replay_reserves_what_the_host_waits_free():
    g = dag({1: [0], 2: [], 3: [2], 4: [1, 3]}, 5, sizes=[32 * UNIT, UNIT, 32 * UNIT, UNIT, UNIT])
    order = ("n0", "n1", "n2", "n3", "n4")
    streams = {"n0": 1, "n1": 0, "n2": 1, "n3": 0, "n4": 0}
    s = StreamSchedule(order, streams, (Wait("n0", "n1"), Wait("n2", "n3")))
    free = replay(g, s, "torch-cuda", run_ahead=True)
    limited = replay(g, s.replace(host_waits=(Wait("n1", "n2"),)), "torch-cuda", run_ahead=True)
    assert free.run_ahead and free.reserved_peak_bytes >= 64 * UNIT  # v2 cannot reuse v0's block
    assert limited.reserved_peak_bytes < free.reserved_peak_bytes  # it can once the host waited
    assert free.held_peak_bytes >= 64 * UNIT > limited.held_peak_bytes


def two_units():
    """A miniature FSDP step: two units' shards all-gathered, used, their gradients reduce-scattered."""
    from streamplan.ir import Graph, Node, Value
    from streamplan.ir.collectives import collective_node

    kib = 1024
    vals = {"x": Value("x", (256,), "float32", kib, "input")}
    nodes = []
    prev = "x"
    for u in range(2):
        vals[f"s{u}"] = Value(f"s{u}", (64,), "float32", kib // 4, "param")
        for name, n in ((f"full{u}", 4 * kib), (f"y{u}", kib), (f"g{u}", 4 * kib), (f"gs{u}", kib)):
            vals[name] = Value(name, (n // 4,), "float32", n)
        nodes += [
            collective_node(
                f"ag{u}",
                "all_gather",
                f"s{u}",
                f"full{u}",
                group="dp",
                group_size=4,
                source_bytes=kib,
                output_bytes=4 * kib,
            ),
            Node(f"fwd{u}", "aten.mul.Tensor", (prev, f"full{u}"), (f"y{u}",)),
            Node(f"bwd{u}", "aten.mul.Tensor", (f"y{u}", f"full{u}"), (f"g{u}",)),
            collective_node(
                f"rs{u}",
                "reduce_scatter",
                f"g{u}",
                f"gs{u}",
                group="dp",
                group_size=4,
                source_bytes=4 * kib,
                output_bytes=kib,
            ),
        ]
        prev = f"y{u}"
    return Graph("two_units", tuple(nodes), vals, ("x",), ("s0", "s1"), ("gs0", "gs1", "y1"))


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_collective_programs_match_the_brute_force(data):
    g = two_units()
    s = data.draw(with_host_waits(g, data.draw(schedules_for(g, max_streams=3)), max_waits=2))
    assert held_peak(liveness(g, s), s).peak_bytes == brute_force_held_peak(g, s)
    wc = worst_case_peak(g, s)
    assert wc.exact and wc.lower_bytes == brute_force_worst_case(g, s)
