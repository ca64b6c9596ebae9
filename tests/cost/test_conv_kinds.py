"""A depthwise convolution whose channels are not whole vector blocks (16) is a kind of its own
for a calibrated profile; a profile calibrated before that kind existed costs it as any grouped
convolution."""

from __future__ import annotations

import torch

from streamplan.cost import AnalyticCostModel, Calibration, TimeCurve, get_device
from streamplan.cost.kinds import UNALIGNED, op_features
from streamplan.frontends.torch_capture import capture


class Convs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.dw32 = torch.nn.Conv2d(32, 32, 3, padding=1, groups=32, bias=False)
        self.dw22 = torch.nn.Conv2d(22, 22, 3, padding=1, groups=22, bias=False)
        self.grouped = torch.nn.Conv2d(22, 22, 3, padding=1, groups=2, bias=False)  # 11 channels a group
        self.pointwise = torch.nn.Conv2d(22, 22, 1, bias=False)

    def forward(self, x, y):
        return self.dw32(x), self.dw22(y), self.grouped(y), self.pointwise(y)


def _convs():
    g = capture(Convs(), (torch.randn(1, 32, 8, 8), torch.randn(1, 22, 8, 8)), name="convs")
    return g, [n for n in g.nodes if "conv" in n.op]


def test_only_depthwise_convolutions_with_partial_blocks_are_unaligned():
    g, convs = _convs()
    kinds = [op_features(g, n) for n in convs]
    assert [f.kind for f in kinds] == ["conv_grouped", UNALIGNED, "conv_grouped", "conv1x1"]
    assert kinds[1].family == "conv_grouped"  # a profile without the kind falls back to the family


def test_a_profile_without_the_unaligned_kind_costs_it_by_the_grouped_curve():
    g, convs = _convs()
    grouped = TimeCurve("conv_grouped", "flops", ((1e3, 0.01), (1e8, 1.0)))
    unaligned = TimeCurve(UNALIGNED, "flops", ((1e3, 0.03), (1e8, 3.0)))
    old = get_device("cpu").replace(calibration=Calibration(curves=(grouped,)))
    new = get_device("cpu").replace(calibration=Calibration(curves=(grouped, unaligned)))
    f = op_features(g, convs[1])
    assert AnalyticCostModel(old).curve_time_ms(f) == grouped.time_ms(f.flops)
    assert AnalyticCostModel(new).curve_time_ms(f) == unaligned.time_ms(f.flops)
