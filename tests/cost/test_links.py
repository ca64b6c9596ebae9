"""The link model (ring and tree collectives on NVLink, PCIe, InfiniBand, RoCE) and collectives
and host waits in the simulator."""

from __future__ import annotations

import math

import pytest

from streamplan.cost.devices import get_device
from streamplan.cost.links import LINKS, collective_time_ms, get_link, interconnect, ring_ms, tree_ms
from streamplan.cost.opcost import LINK, AnalyticCostModel, FakeCostModel
from streamplan.cost.overlap import comm_overlap
from streamplan.cost.simulate import simulate
from streamplan.errors import ModelSpecError
from streamplan.ir import Graph, Node, StreamSchedule, Value, Wait
from streamplan.ir.collectives import Collective, collective_node

GB = 1e9
NVL = interconnect("nvlink4", "ib-ndr", 8, base_ms=0.0)


def coll(kind: str, n: int, nbytes: float = 1e9) -> Collective:
    return Collective(kind, "dp", n, int(nbytes))


def test_ring_all_gather_moves_n_minus_1_shards_over_the_link():
    t, algo = collective_time_ms(coll("all_gather", 8), NVL)
    link = get_link("nvlink4")
    assert algo == "ring"
    assert t == pytest.approx(1e3 * 7 / 8 * 1e9 / link.bandwidth_bytes_per_s + 7 * link.hop_latency_ms)


def test_all_reduce_costs_twice_a_ring_and_takes_the_tree_when_it_is_faster():
    big, small = coll("all_reduce", 8, 1e9), coll("all_reduce", 64, 1e3)
    link = get_link("nvlink4")
    assert collective_time_ms(big, NVL) == (pytest.approx(ring_ms(big, link, 0.0)), "ring")
    assert ring_ms(big, link, 0) == pytest.approx(2 * ring_ms(coll("all_gather", 8), link, 0), rel=1e-3)
    net = interconnect("nvlink4", "ib-ndr", 64, base_ms=0.0)
    t, algo = collective_time_ms(small, net)
    assert algo == "tree" and t == pytest.approx(tree_ms(small, link, 0.0)) and t < ring_ms(small, link, 0)


def test_a_group_across_nodes_is_held_back_by_the_slower_link():
    inside, _ = collective_time_ms(coll("reduce_scatter", 8), NVL)
    across, _ = collective_time_ms(coll("reduce_scatter", 16), NVL)
    strided, _ = collective_time_ms(coll("reduce_scatter", 8), NVL, stride=2)  # a dp group beside tp pairs
    assert across > 5 * inside and strided == pytest.approx(across * (7 / 8) / (15 / 16), rel=0.05)
    assert collective_time_ms(coll("all_gather", 1), NVL) == (0.0, "none")


def test_every_gpu_profile_has_an_interconnect_and_links_are_named():
    for name in ("v100", "a100", "h100", "h200", "cpu"):
        assert get_device(name).interconnect is not None
    assert {"nvlink4", "pcie5", "ib-ndr", "roce-400", "loopback"} <= set(LINKS)
    with pytest.raises(ModelSpecError, match="unknown link"):
        get_link("carrier-pigeon")


def overlap_graph():
    """a (compute, 1 ms) and an all-gather of 1 GB on another stream, then b reads both."""
    vals = {
        "s": Value("s", (1 << 25,), "float32", 1 << 27, "param"),
        "x": Value("x", (1024,), "float32", 4096, "input"),
        "full": Value("full", (1 << 28,), "float32", 1 << 30),
        "a": Value("a", (1024,), "float32", 4096),
        "b": Value("b", (1024,), "float32", 4096),
    }
    nodes = (
        collective_node(
            "ag",
            "all_gather",
            "s",
            "full",
            group="dp",
            group_size=8,
            source_bytes=1 << 27,
            output_bytes=1 << 30,
        ),
        Node("a", "aten.relu.default", ("x",), ("a",), flops=10**9, bytes_read=4096, bytes_written=4096),
        Node("b", "aten.add.Tensor", ("a", "full"), ("b",), bytes_read=1 << 30, bytes_written=4096),
    )
    return Graph("ov", nodes, vals, ("x",), ("s",), ("b",))


def test_collectives_run_on_the_links_beside_compute():
    g = overlap_graph()
    h100 = AnalyticCostModel("h100")
    assert h100.resource(g, g.node("ag")) == LINK and h100.occupancy(g, g.node("ag")) == 1.0
    s = StreamSchedule(("ag", "a", "b"), {"ag": 1, "a": 0, "b": 0}, (Wait("ag", "b"),))
    tl = simulate(g, s, h100)
    spans = tl.by_op()
    assert spans["a"].start_ms < spans["ag"].end_ms  # the all-gather does not take the SMs
    ov = comm_overlap(g, tl)
    assert (
        ov.collectives == 1 and ov.hidden_ms > 0 and ov.comm_ms == pytest.approx(ov.hidden_ms + ov.exposed_ms)
    )


def test_concurrent_collectives_share_the_links():
    g = overlap_graph()
    two = g.replace(
        nodes=(
            *g.nodes[:1],
            collective_node(
                "ag2",
                "all_gather",
                "s",
                "full2",
                group="dp",
                group_size=8,
                source_bytes=1 << 27,
                output_bytes=1 << 30,
            ),
            *g.nodes[1:],
        ),
        values={**g.values, "full2": Value("full2", (1 << 28,), "float32", 1 << 30)},
        outputs=("b", "full2"),
    )
    cost = FakeCostModel({"ag": 2.0, "ag2": 2.0, "a": 1.0, "b": 1.0})
    s = StreamSchedule(("ag", "ag2", "a", "b"), {"ag": 1, "ag2": 2, "a": 0, "b": 0}, (Wait("ag", "b"),))
    spans = simulate(two, s, cost).by_op()
    assert spans["ag"].end_ms == pytest.approx(4.0) and spans["ag2"].end_ms == pytest.approx(4.0)
    assert spans["a"].end_ms == pytest.approx(1.0)  # compute is not slowed by the links


def test_a_host_wait_blocks_every_later_launch():
    g = overlap_graph()
    cost = FakeCostModel({"ag": 5.0, "a": 1.0, "b": 1.0}, launch_ms=0.1)
    free = StreamSchedule(("ag", "a", "b"), {"ag": 1, "a": 0, "b": 0}, (Wait("ag", "b"),))
    held = free.replace(host_waits=(Wait("ag", "a"),))
    assert simulate(g, free, cost).by_op()["a"].launch_ms == pytest.approx(0.2)
    spans = simulate(g, held, cost).by_op()
    assert spans["a"].launch_ms == pytest.approx(5.1 + 0.1) and spans["a"].start_ms >= spans["ag"].end_ms
    assert not math.isnan(spans["b"].end_ms)
