"""The GPU profiles' op model: tiled GEMM efficiency, the per-kernel minimum time, SM-share interference."""

from __future__ import annotations

import pytest

from helpers.dags import chain
from streamplan.cost import AnalyticCostModel, Demand, GemmCurve, Supply, corun_rates, get_device
from streamplan.cost.calibration import tiled_fraction

V100_SMS = 80


def test_tiled_fraction_is_symmetric_in_rows_and_columns():
    for m, n, k in ((49, 1232, 1232), (3136, 64, 576), (17, 4000, 300), (289, 768, 1280)):
        assert tiled_fraction(m, n, k, V100_SMS, 32.0, 8.0) == tiled_fraction(n, m, k, V100_SMS, 32.0, 8.0)


def test_a_gemm_with_few_rows_spreads_over_its_columns():
    # RandWire's last stage: 1 x 1 convolutions on 7 x 7 images (M = 49, N = K = 1232): 78 tiles of
    # 32 x 32 fill the 80 SMs, without splitting the reduction (a convolution's path).
    small_m = tiled_fraction(49, 1232, 1232, V100_SMS, 32.0, 8.0, 1.0, False)
    large = tiled_fraction(4096, 4096, 4096, V100_SMS, 32.0, 8.0, 1.0, False)
    assert 0.4 * large < small_m < large
    # one tile in all: one SM of 80 works; split-K (a matmul's path) gives it at most K / 256 more
    assert tiled_fraction(32, 32, 512, V100_SMS, 32.0, 8.0, 1.0, False) < 0.01
    assert tiled_fraction(32, 32, 512, V100_SMS, 32.0, 8.0, 1.0, True) < 0.02


def test_an_sm_needs_its_resident_tiles_to_reach_its_peak():
    # 80 tiles of the smallest size fill 80 SMs when one tile per SM hides the memory latency,
    # half of them when two do
    one = tiled_fraction(32 * 80, 32, 2048, V100_SMS, 32.0, 8.0, 1.0, False)
    two = tiled_fraction(32 * 80, 32, 2048, V100_SMS, 32.0, 8.0, 2.0, False)
    assert two == pytest.approx(0.5 * one)
    big = (8192, 8192, 2048, V100_SMS, 32.0, 8.0)
    assert tiled_fraction(*big, 2.0, False) == pytest.approx(tiled_fraction(*big, 1.0, False), rel=0.05)


def test_one_tile_past_a_full_wave_costs_a_second_wave():
    full = tiled_fraction(128 * 80, 128, 4096, V100_SMS, 32.0, 8.0)  # 80 tiles of 128 x 128: one wave
    over = tiled_fraction(128 * 81, 128, 4096, V100_SMS, 32.0, 8.0)  # 81 of them: a second, almost idle
    assert over < 0.75 * full


def test_short_reductions_run_slower_per_flop():
    assert tiled_fraction(4096, 4096, 64, V100_SMS, 32.0, 8.0) < 0.7 * tiled_fraction(
        4096, 4096, 4096, V100_SMS, 32.0, 8.0
    )


def test_a_tiled_curve_round_trips_and_a_measured_one_keeps_its_form():
    tiled = GemmCurve("conv", 1.5e13, 0.0, 0.0, 30.0, sms=80, tile_half=7.5, tiles_per_sm=2.5)
    assert GemmCurve.from_dict(tiled.to_dict()) == tiled
    expect = 1.5e13 * tiled_fraction(49, 1232, 1232, 80, 30.0, 7.5, 2.5, False)
    assert tiled.rate(49, 1232, 1232) == pytest.approx(expect)
    measured = GemmCurve("gemm", 5e10, 8.0, 4.0, 16.0)
    assert "sms" not in measured.to_dict()
    assert measured.rate(8, 4, 16) == pytest.approx(5e10 / 8)


def test_the_gpu_profiles_cost_gemms_with_tiles_of_their_own_sm_count():
    for name in ("v100", "a100", "h100"):
        d = get_device(name)
        assert {c.sms for c in d.calibration.gemm_curves} == {d.sms}


def test_every_kernel_takes_at_least_the_minimum_time_on_a_stream_and_in_a_graph():
    base = get_device("v100").replace(kernel_min_ms=0.0)
    g = chain(3)
    node = g.nodes[1]
    body_ms = AnalyticCostModel(base).op_time_ms(g, node) - base.kernel_fixed_ms
    floor_ms = 2 * body_ms + 0.001  # a floor above this op's roofline body
    d = base.replace(kernel_min_ms=floor_ms)
    stream, graph = AnalyticCostModel(d), AnalyticCostModel(d, cuda_graphs=True)
    assert stream.op_time_ms(g, node) == pytest.approx(d.kernel_fixed_ms + floor_ms)
    assert graph.op_time_ms(g, node) == pytest.approx(d.graph_node_ms + floor_ms)  # a graph keeps it
    assert stream.op_facts(g, node)[0] == pytest.approx(stream.op_time_ms(g, node))
    # below the floor's reach the op keeps its own time
    assert AnalyticCostModel(base.replace(kernel_min_ms=body_ms / 2)).op_time_ms(g, node) == pytest.approx(
        base.kernel_fixed_ms + body_ms
    )


def test_sm_interference_grows_with_the_co_runners_share_of_the_sms():
    supply = Supply(sm_interference=0.5)
    a, b = corun_rates([Demand(0.3), Demand(0.3)], supply)
    assert a == b == pytest.approx(1 / (1 + 0.5 * 0.3))
    # co-runners filling more than the whole device slow an op no more than one that fills it
    three = corun_rates([Demand(0.2), Demand(0.9), Demand(0.9)], supply)
    assert three[0] <= 1 / (1 + 0.5) + 1e-12
    assert corun_rates([Demand(0.2), Demand(0.9), Demand(0.9)], Supply())[0] == 1.0
    assert corun_rates([Demand(0.5)], supply) == [1.0]  # alone: no interference
    # a collective (no SMs) is not slowed by the kernels beside it
    assert corun_rates([Demand(0.0, link=1.0), Demand(0.8)], supply)[0] == 1.0


def test_sm_interference_round_trips():
    s = Supply(interference=0.1, sm_interference=0.25)
    assert Supply.from_dict(s.to_dict()) == s
    assert not s.is_perfect_sharing
    with pytest.raises(ValueError, match="sm_interference"):
        Supply.from_dict({"sm_interference": -1})
