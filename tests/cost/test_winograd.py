"""Only convolutions cuDNN can run with Winograd (3 x 3, stride 1, dilation 1, dense) may beat the
GPU's peak in direct-count FLOPs; 1 x 1 convolutions and matmuls never do; CPU profiles (the
roofline ``cpu`` profile and measured curves) cost every op as before."""

from __future__ import annotations

import pytest
import torch

from streamplan.cost import AnalyticCostModel, Calibration, GemmCurve, get_device
from streamplan.cost.kinds import op_features
from streamplan.frontends.builder import GraphBuilder
from streamplan.frontends.torch_capture import capture

GPUS = ("v100", "a100", "h100", "rtx3090")


class Convs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.s1 = torch.nn.Conv2d(16, 16, 3, padding=1, bias=False)
        self.valid = torch.nn.Conv2d(16, 16, 3, bias=False)  # stride 1, no padding
        self.s2 = torch.nn.Conv2d(16, 16, 3, stride=2, padding=1, bias=False)
        self.dilated = torch.nn.Conv2d(16, 16, 3, padding=2, dilation=2, bias=False)
        self.row = torch.nn.Conv2d(16, 16, (1, 3), padding=(0, 1), bias=False)
        self.five = torch.nn.Conv2d(16, 16, 5, padding=2, bias=False)
        self.grouped = torch.nn.Conv2d(16, 16, 3, padding=1, groups=2, bias=False)
        self.pointwise = torch.nn.Conv2d(16, 16, 1, bias=False)

    def forward(self, x):
        return tuple(m(x) for m in (self.s1, self.valid, self.s2, self.dilated, self.row, self.five,
                                    self.grouped, self.pointwise))  # fmt: skip


def test_only_dense_3x3_stride_1_convolutions_are_winograd_eligible():
    g = capture(Convs(), (torch.randn(1, 16, 12, 12),), name="convs")
    convs = [n for n in g.nodes if "conv" in n.op]
    assert [op_features(g, n).winograd for n in convs] == [True, True] + [False] * 6


def _big_convs():
    """A compute-bound 3 x 3 convolution at stride 1 and at stride 2, and a 1 x 1 one."""
    b = GraphBuilder("convs")
    x = b.input("x", (8, 256, 56, 56))
    s1 = b.conv2d(x, 256, 3, padding=1, name="s1")
    s2 = b.conv2d(x, 256, 3, stride=2, padding=1, name="s2")
    pw = b.conv2d(x, 256, 1, name="pw")
    g = b.build([s1, s2, pw])
    return g, {n.id: n for n in g.nodes}


def _matmul():
    b = GraphBuilder("mm")
    x, w = b.input("x", (4096, 4096)), b.param("w", (4096, 4096))
    g = b.build([b.matmul(x, w, name="mm")])
    return g, g.nodes[0]


@pytest.mark.parametrize("name", GPUS)
def test_direct_gemms_never_exceed_the_peak_on_gpu_profiles(name):
    d = get_device(name)
    assert d.gemm_efficiency <= 1.0
    curves = {c.kind: c for c in d.calibration.gemm_curves}
    assert curves["conv1x1"].winograd_speedup == curves["gemm"].winograd_speedup == 1.0
    cost = AnalyticCostModel(d)
    g, nodes = _big_convs()
    mg, mm = _matmul()
    for graph, node in ((g, nodes["pw"]), (g, nodes["s2"]), (mg, mm)):
        peak = d.peak(cost._precision(graph, node, True))
        body_ms = cost.body_ms(graph, node)
        assert node.flops / (body_ms * 1e-3) <= peak * (1 + 1e-9), node.id


@pytest.mark.parametrize("name", GPUS)
def test_a_3x3_stride_1_convolution_gets_the_winograd_speedup_on_gpu_profiles(name):
    d = get_device(name)
    conv = next(c for c in d.calibration.gemm_curves if c.kind == "conv")
    assert 1.0 < conv.winograd_speedup <= 2.25
    g, nodes = _big_convs()
    f = op_features(g, nodes["s1"])
    assert f.kind == "conv" and f.winograd
    direct = conv.time_ms(f.flops, f.gemm_mnk)
    assert AnalyticCostModel(d).curve_time_ms(f) == pytest.approx(direct / conv.winograd_speedup)
    f2 = op_features(g, nodes["s2"])
    assert f2.kind == "conv" and not f2.winograd
    assert AnalyticCostModel(d).curve_time_ms(f2) == pytest.approx(conv.time_ms(f2.flops, f2.gemm_mnk))


def test_cpu_profiles_cost_winograd_eligible_convolutions_as_any_other():
    g, nodes = _big_convs()
    f = op_features(g, nodes["s1"])
    # the built-in cpu profile: the roofline, no curves, no Winograd factor anywhere
    cpu = get_device("cpu")
    assert not cpu.calibration.gemm_curves
    node = nodes["s1"]
    rate = node.flops / (AnalyticCostModel(cpu).body_ms(g, node) * 1e-3)
    assert rate <= cpu.peak("fp32") * cpu.gemm_efficiency * (1 + 1e-9)
    # a measured (calibrated) profile: the curve's time, unchanged, and a file without the field
    measured = GemmCurve("conv", 1.5e11, 200.0, 20.0, 40.0)
    assert measured.winograd_speedup == 1.0 and "winograd_speedup" not in measured.to_dict()
    prof = cpu.replace(calibration=Calibration(gemm_curves=(measured,)))
    assert AnalyticCostModel(prof).curve_time_ms(f) == measured.time_ms(f.flops, f.gemm_mnk)


def test_the_winograd_factor_round_trips_and_is_at_least_one():
    c = GemmCurve("conv", 1.5e13, 0.0, 0.0, 30.0, sms=80, tile_half=7.5, tiles_per_sm=2.5)
    c = GemmCurve.from_dict({**c.to_dict(), "winograd_speedup": 1.8})
    assert c.winograd_speedup == 1.8
    assert GemmCurve.from_dict(c.to_dict()) == c
    with pytest.raises(ValueError, match="winograd_speedup"):
        GemmCurve.from_dict({**c.to_dict(), "winograd_speedup": 0.5})
