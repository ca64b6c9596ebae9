"""A calibrated profile costs attention as its parts: Q Kᵀ and P V on the measured GEMM surface and
a softmax over the scores (8-wide heads over 1,024 tokens cost mostly exponentials, which a FLOPs
curve measured on 64-wide heads misses by 3x); without those curves it keeps the attention curve."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from streamplan.cost import AnalyticCostModel, get_device
from streamplan.cost.calibration import Calibration, GemmCurve, TimeCurve
from streamplan.cost.kinds import op_features
from streamplan.frontends.torch_capture import capture


class Attend(torch.nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


def _features(heads=4, s_q=32, s_k=48, d=8, d_v=16):
    args = (torch.randn(1, heads, s_q, d), torch.randn(1, heads, s_k, d), torch.randn(1, heads, s_k, d_v))
    g = capture(Attend(), args, name="attend")
    node = next(n for n in g.nodes if op_features(g, n).family == "attention")
    return op_features(g, node)


def test_an_attention_op_knows_its_gemms_and_scores():
    f = _features()
    assert f.kind == "attention" and f.attention is not None
    assert f.attention.qk_mnk == (4 * 32, 48, 8)
    assert f.attention.pv_mnk == (4 * 32, 16, 48)
    assert f.attention.score_bytes == 2 * 4 * 32 * 48 * 4  # read and written once, float32
    assert f.attention.gemm_flops() == (2 * 128 * 48 * 8, 2 * 128 * 16 * 48)


GEMM = GemmCurve("gemm", 1e10, 8.0, 4.0, 16.0)
SOFTMAX = TimeCurve("_softmax", "bytes", ((1e3, 0.001), (1e7, 2.0)))
ATTENTION = TimeCurve("attention", "flops", ((1e5, 0.01), (1e8, 1.0)))


@pytest.mark.parametrize(
    ("curves", "gemms", "parts"),
    [
        ((SOFTMAX, ATTENTION), (GEMM,), True),
        ((ATTENTION,), (GEMM,), False),
        ((SOFTMAX, ATTENTION), (), False),
    ],
)
def test_attention_costs_as_its_parts_where_the_profile_measured_them(curves, gemms, parts):
    f = _features()
    model = AnalyticCostModel(
        get_device("cpu").replace(calibration=Calibration(curves=curves, gemm_curves=gemms))
    )
    a = f.attention
    qk, pv = a.gemm_flops()
    expected = (
        GEMM.time_ms(qk, a.qk_mnk) + GEMM.time_ms(pv, a.pv_mnk) + SOFTMAX.time_ms(a.score_bytes)
        if parts
        else ATTENTION.time_ms(f.flops)
    )
    assert model.curve_time_ms(f) == pytest.approx(expected)


def test_narrow_heads_cost_more_per_flop_than_wide_ones():
    """Same FLOPs, 8-wide heads over 4x the scores: the parts say slower, the FLOPs curve cannot."""
    model = AnalyticCostModel(
        get_device("cpu").replace(calibration=Calibration(curves=(SOFTMAX, ATTENTION), gemm_curves=(GEMM,)))
    )
    narrow, wide = (
        _features(heads=4, s_q=64, s_k=64, d=8, d_v=8),
        _features(heads=1, s_q=64, s_k=64, d=32, d_v=32),
    )
    assert narrow.flops == wide.flops
    assert model.curve_time_ms(narrow) > 1.5 * model.curve_time_ms(wide)
