"""The fusion rules agree with Inductor's own kernels on small models (bench/fusion_vs_inductor.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "fusion_vs_inductor.py"


class Block(torch.nn.Module):
    """conv -> bn -> relu -> max-pool, then two branches joined by an add (a tiny CNN cell)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)
        self.left = torch.nn.Conv2d(8, 8, 1)
        self.right = torch.nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        return torch.sigmoid(self.left(x)) * torch.relu(self.right(x)) + x


@pytest.mark.slow
def test_kernels_match_inductor_on_small_models(monkeypatch):
    spec = importlib.util.spec_from_file_location("fusion_vs_inductor", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "fusion_vs_inductor", bench)
    spec.loader.exec_module(bench)
    from streamplan.frontends.torch_capture import capture
    from streamplan.fusion import FusionRules

    for name, module, inputs in (
        ("seed-concat", *bench.load("seed-concat")),
        ("block", Block().eval(), (torch.randn(1, 3, 16, 16),)),
    ):
        theirs = bench.inductor_kernels(module, inputs, freeze=True)
        ours, _ = bench.streamplan_kernels(capture(module, inputs, name=name), FusionRules(), frozen=True)
        assert theirs.count == ours.count, (name, theirs.signatures, ours.signatures)
        assert bench.agreement(ours, theirs) == 1.0, (name, theirs.signatures, ours.signatures)
