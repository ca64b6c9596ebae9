"""Device profiles and the analytic / fake cost models."""

from __future__ import annotations

import pytest

from streamplan.cost import DEVICES, AnalyticCostModel, FakeCostModel, get_device, is_view_op
from streamplan.cost.kinds import op_features
from streamplan.errors import ModelSpecError
from streamplan.frontends.builder import GraphBuilder
from streamplan.ir.graph import Graph, Node, Value


def test_every_device_has_a_profile():
    assert set(DEVICES) >= {"v100", "a100", "h100", "h200", "cpu"}
    v100, h100, h200 = get_device("v100"), get_device("H100"), get_device("h200")
    assert v100.sms == 80 and v100.peak("fp32") == pytest.approx(15.7e12)
    assert h200.peak("bf16") == h100.peak("bf16") and h200.mem_bw_bytes_per_s > h100.mem_bw_bytes_per_s
    assert v100.peak("bf16") == v100.peak("fp32")  # no bf16 tensor cores on V100
    assert get_device(v100) is v100


def test_unknown_device_is_a_clear_error():
    with pytest.raises(ModelSpecError, match="unknown device 'tpu9'") as e:
        get_device("tpu9")
    assert "v100" in str(e.value) and isinstance(e.value, ValueError)


def conv_graph(channels: int, size: int, dtype: str = "float32") -> tuple[Graph, Node]:
    b = GraphBuilder("conv", dtype)
    x = b.input("x", (1, channels, size, size))
    y = b.conv2d(x, channels, 3, padding=1, name="y")
    g = b.build([y])
    return g, g.node("y")


def test_small_convs_fill_little_of_the_device_and_big_ones_all_of_it():
    cost = AnalyticCostModel("v100")
    g_small, small = conv_graph(64, 8)
    g_big, big = conv_graph(256, 112)
    assert 0 < cost.occupancy(g_small, small) < 0.5
    assert cost.occupancy(g_big, big) == 1.0
    # a big conv runs near the roofline: time ~ flops / (peak * efficiency), a 3 x 3 stride-1 one
    # that much faster again by its Winograd speedup (fewer multiplications than its direct count)
    d = cost.device
    winograd = next(c.winograd_speedup for c in d.calibration.gemm_curves if c.kind == "conv")
    assert op_features(g_big, big).winograd and winograd > 1
    ideal_ms = 1e3 * big.flops / (d.peak("fp32") * d.gemm_efficiency * winograd)
    assert ideal_ms <= cost.op_time_ms(g_big, big) - d.kernel_fixed_ms < 1.5 * ideal_ms


def test_low_occupancy_costs_more_than_its_roofline():
    cost = AnalyticCostModel("v100")
    g, node = conv_graph(64, 8)
    d = cost.device
    roofline_ms = 1e3 * max(
        node.flops / (d.peak("fp32") * d.gemm_efficiency),
        (node.bytes_read + node.bytes_written) / (d.mem_bw_bytes_per_s * d.memory_efficiency),
    )
    assert cost.op_time_ms(g, node) > d.kernel_fixed_ms + 1.5 * roofline_ms


def test_tensor_cores_for_half_precision_and_tf32_convs():
    g32, c32 = conv_graph(256, 56)
    g16, c16 = conv_graph(256, 56, "float16")
    v100 = AnalyticCostModel("v100")
    assert v100.op_time_ms(g16, c16) < v100.op_time_ms(g32, c32) / 2
    a100 = AnalyticCostModel("a100")
    assert a100._precision(g32, c32, True) == "tf32"
    b = GraphBuilder("mm")
    mm = b.matmul(b.input("x", (512, 512)), b.param("w", (512, 512)), name="mm")
    gm = b.build([mm])
    assert a100._precision(gm, gm.node("mm"), True) == "fp32"  # matmul tf32 is off by default


def test_memory_bound_elementwise_follows_bandwidth():
    b = GraphBuilder("relu")
    y = b.relu(b.input("x", (64, 1 << 20)), name="y")  # 256 MiB in, 256 MiB out
    g = b.build([y])
    cost = AnalyticCostModel("h200")
    d = cost.device
    node = g.node("y")
    expect_ms = 1e3 * (node.bytes_read + node.bytes_written) / (d.mem_bw_bytes_per_s * d.memory_efficiency)
    assert cost.op_time_ms(g, node) == pytest.approx(expect_ms + d.kernel_fixed_ms, rel=0.01)


def test_view_ops_launch_no_kernel():
    x = Value("x", (4, 8), "float32", 128, "input")
    y = Value("y", (32,), "float32", 128, "activation", storage="x")
    z = Value("z", (32,), "float32", 128, "activation")
    nodes = (
        Node("view", "aten.view.default", ("x",), ("y",)),
        Node("relu", "aten.relu.default", ("y",), ("z",), flops=32, bytes_read=128, bytes_written=128),
    )
    g = Graph("views", nodes, {"x": x, "y": y, "z": z}, ("x",), (), ("z",))
    cost = AnalyticCostModel("v100")
    assert is_view_op(g, g.node("view")) and not is_view_op(g, g.node("relu"))
    assert cost.op_time_ms(g, g.node("view")) == 0.0
    assert cost.launch_overhead_ms(g, g.node("view")) == 0.0
    assert cost.op_time_ms(g, g.node("relu")) > 0 and cost.launch_overhead_ms(g, g.node("relu")) > 0


def test_fake_cost_model_is_deterministic():
    g, node = conv_graph(8, 4)
    fake = FakeCostModel({"y": 2.5}, occupancy={"y": 0.25}, launch_ms=0.1)
    assert (fake.op_time_ms(g, node), fake.occupancy(g, node), fake.launch_overhead_ms(g, node)) == (
        2.5,
        0.25,
        0.1,
    )
    assert FakeCostModel(1.0).op_time_ms(g, node) == 1.0
