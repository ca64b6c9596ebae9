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


class TokenTypes(torch.nn.Module):
    """BERT's token types: an int buffer, gathered and expanded, indexes a two-row embedding."""

    def __init__(self):
        super().__init__()
        self.types = torch.nn.Embedding(2, 8)
        self.rows = torch.nn.Embedding(3, 8)
        self.register_buffer("type_ids", torch.zeros(1, 16, dtype=torch.long))
        self.register_buffer("row_ids", torch.zeros(5, dtype=torch.long))

    def forward(self, ids):
        n = ids.shape[1]
        types = torch.gather(self.type_ids[:, :n], 1, torch.zeros(1, n, dtype=torch.long)).expand(1, n)
        picked = torch.index_select(self.rows.weight, 0, self.row_ids)
        return self.types(types) + ids.unsqueeze(-1) + picked.sum()


def test_random_integer_leaves_stay_within_the_tables_they_index():
    from streamplan.runtime.interpret import index_limits

    g = capture(TokenTypes().eval(), (torch.zeros(1, 8, dtype=torch.long),), name="token-types")
    limits = index_limits(g)
    by_name = {g.param_names.get(v, v): limit for v, limit in limits.items()}
    assert by_name.get("type_ids") == 2, by_name  # back through the expand, gather and slice
    assert by_name.get("row_ids") == 3, by_name
    for seed in range(4):  # [0, 4) would index row 2 or 3 of a two-row table
        env = initial_env(g, None, None, seed=seed)
        for v, limit in limits.items():
            if v in env and not env[v].is_floating_point():
                assert int(env[v].max()) < limit
    (out,) = run(g, make_schedule(g, "sequential")).outputs
    assert out.shape == (1, 8, 8)
