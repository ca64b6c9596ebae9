"""Pooling at stride 1 is its own kind for a calibrated profile: its windows overlap, so it
costs less per window than pooling at a larger stride with the same FLOPs."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from streamplan.cost.kinds import op_features
from streamplan.frontends.torch_capture import capture


class Pools(torch.nn.Module):
    def forward(self, x):
        return (
            F.max_pool2d(x, 3, 1, 1),
            F.max_pool2d(x, 3, 2, 1),
            F.max_pool2d(x, 2),  # no stride given: the kernel size
            F.avg_pool2d(x, 3, 1, 1),
            F.avg_pool2d(x, 3, 2, 1),
        )


def test_stride_one_pools_have_their_own_kind_in_the_pool_family():
    g = capture(Pools(), (torch.randn(1, 4, 8, 8),), name="pools")
    kinds = [op_features(g, n) for n in g.nodes if "pool" in n.op]
    assert [f.kind for f in kinds] == [
        "max_pool2d_stride1",
        "max_pool2d",
        "max_pool2d",
        "avg_pool2d_stride1",
        "avg_pool2d",
    ]
    assert {f.family for f in kinds} == {"pool"}  # a profile without the kind falls back to the family
