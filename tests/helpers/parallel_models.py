"""Small models for the parallel-plan tests: a stack of residual MLP blocks in a ModuleList
(so FSDP's automatic wrapping gives one unit per block), with a mean cross-entropy loss."""

from __future__ import annotations

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 2 * d)
        self.down = nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Stack(nn.Module):
    """``features -> d``, ``blocks`` residual blocks, ``d -> classes``; odd sizes, so the flat
    units need padding to split over ranks."""

    def __init__(self, features: int = 7, d: int = 24, blocks: int = 3, classes: int = 5):
        super().__init__()
        self.embed = nn.Linear(features, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(blocks))
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        h = self.embed(x)
        for b in self.blocks:
            h = b(h)
        return self.head(h)


def stack_problem(global_batch: int = 8, seed: int = 0):
    """A ``TrainingProblem`` over ``global_batch`` samples (the ranks split it)."""
    return _problem(Stack, 7, 5, global_batch, seed)


def _problem(make, features: int, classes: int, global_batch: int, seed: int, **sizes):
    from streamplan.frontends.training import TrainingProblem

    torch.manual_seed(seed)
    model = make(features=features, classes=classes, **sizes)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(global_batch, features, generator=gen)
    y = torch.randint(0, classes, (global_batch,), generator=gen)
    return TrainingProblem(
        model, (x,), lambda out, t: nn.functional.cross_entropy(out, t), (y,), "cross entropy"
    )


def stack(batch: int = 4):
    """``file.py:function`` form: ``(module, inputs, loss_fn, targets)`` (the CLI's model spec)."""
    p = stack_problem(batch)
    return p.module, p.inputs, p.loss_fn, p.targets


def wide_problem(global_batch: int = 4096, seed: int = 0):
    """A stack whose activations (batch x 256 floats, 4 MiB at 4096) outweigh the allocator's
    segment rounding, so recomputing some of them changes what a rank's program needs."""
    return _problem(Stack, 64, 10, global_batch, seed, d=256, blocks=4)


def wide(batch: int = 4096):
    """``file.py:function`` form of ``wide_problem``."""
    p = wide_problem(batch)
    return p.module, p.inputs, p.loss_fn, p.targets
