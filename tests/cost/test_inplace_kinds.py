"""In-place ops (``relu_``, ``silu_``, ``add_``: models' activations and residual sums) are kinds
of their own for a calibrated profile; without their own curve, they cost as their out-of-place
kind, not as the pooled pointwise family."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from streamplan.cost.kinds import op_features
from streamplan.frontends.torch_capture import capture


class InPlace(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        torch.relu_(y)
        return F.silu(y, inplace=True) + 1


def test_an_in_place_op_costs_as_its_own_kind_else_as_its_out_of_place_kind():
    from streamplan.cost import AnalyticCostModel, get_device
    from streamplan.cost.calibration import Calibration, TimeCurve

    g = capture(InPlace(), (torch.randn(1, 4, 8, 8),), name="inplace")
    relu_ = next(n for n in g.nodes if op_features(g, n).kind == "relu_")
    f = op_features(g, relu_)
    assert f.family == "pointwise"
    family = TimeCurve("pointwise", "bytes", ((1e2, 0.5), (1e8, 50.0)))
    relu = TimeCurve("relu", "bytes", ((1e2, 0.01), (1e8, 1.0)))
    own = TimeCurve("relu_", "bytes", ((1e2, 0.005), (1e8, 0.5)))
    for curves, expected in (((family,), family), ((family, relu), relu), ((family, relu, own), own)):
        model = AnalyticCostModel(get_device("cpu").replace(calibration=Calibration(curves=curves)))
        assert model.curve_time_ms(f) == expected.time_ms(f.bytes_moved)
