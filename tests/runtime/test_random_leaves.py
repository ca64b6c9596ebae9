"""A model run without its parameters gets random ones that compute numbers, not NaNs: a batch
norm's running variance is never negative (a run on NaNs is not timed like a run on numbers)."""

from __future__ import annotations

import torch

from streamplan.frontends.torch_capture import capture
from streamplan.runtime import run
from streamplan.runtime.interpret import initial_env, running_variances
from streamplan.schedule import make_schedule


class ConvBnPool(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 64, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(64)

    def forward(self, x):
        return torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 3, 1, 1)


def test_random_running_variances_are_non_negative_and_the_run_computes_numbers():
    g = capture(ConvBnPool().eval(), (torch.randn(1, 3, 8, 8),), name="conv-bn-pool")
    variances = running_variances(g)
    assert len(variances) == 1 and "running_var" in g.param_names[next(iter(variances))]
    env = initial_env(g, None, None)
    assert bool((env[next(iter(variances))] >= 0).all())
    assert any(bool((env[v] < 0).any()) for v in g.params if v not in variances)  # the others stay signed
    (out,) = run(g, make_schedule(g, "sequential")).outputs
    assert bool(torch.isfinite(out).all())
