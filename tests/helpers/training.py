"""Small training problems for tests: a two-branch CNN with batch norm and dropout, an MLP.

Each builds the same weights, inputs and labels every time (fixed seeds), and captures
in about a second, so tests can run every policy and optimizer on them.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn

from streamplan.frontends.training import TrainingProblem, capture_training
from streamplan.ir.graph import Graph


class TwoBranchNet(nn.Module):
    """conv -> BN -> ReLU, two parallel convs added, dropout, linear: branches, in-place
    running statistics, a random op and a tied loss all in a dozen forward ops."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.left = nn.Conv2d(8, 8, 3, padding=1)
        self.right = nn.Conv2d(8, 8, 1)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.bn(self.stem(x)))
        h = torch.relu(self.left(h)) + torch.sigmoid(self.right(h))
        return self.fc(self.drop(h.mean(dim=(2, 3))))


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(6, 8)
        self.b = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.tanh(self.a(x)))


class Block(nn.Module):
    """A residual block of two bias-free matmuls (``aten.mm``), a norm and a GELU."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 2 * width, bias=False)
        self.down = nn.Linear(2 * width, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(x))))


class BlockNet(nn.Module):
    """An input projection, three numbered blocks (``layers.0`` ... ``layers.2``) and a head: the
    repeated structure activation checkpointing works on, with tokens as rows."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.embed = nn.Linear(6, width)
        self.layers = nn.ModuleList(Block(width) for _ in range(3))
        self.head = nn.Linear(width, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h)
        return self.head(h)


def block_problem(rows: int = 64) -> TrainingProblem:
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(rows, 6, generator=gen)
    labels = torch.randint(0, 4, (rows,), generator=gen)
    return TrainingProblem(BlockNet(), (x,), F.cross_entropy, (labels,), "cross-entropy")


def two_branch_problem(batch: int = 2) -> TrainingProblem:
    torch.manual_seed(0)
    module = TwoBranchNet()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(batch, 3, 8, 8, generator=gen)
    labels = torch.randint(0, 5, (batch,), generator=gen)
    return TrainingProblem(module, (x,), F.cross_entropy, (labels,), "cross-entropy")


def mlp_problem(batch: int = 4) -> TrainingProblem:
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(batch, 6, generator=gen)
    target = torch.randn(batch, 3, generator=gen)
    return TrainingProblem(MLP(), (x,), F.mse_loss, (target,), "mean squared error")


@functools.cache
def two_branch_graph(optimizer: str = "none") -> Graph:
    """The captured step of ``two_branch_problem()``, once per session and optimizer."""
    return capture_training(two_branch_problem(), optimizer=optimizer, name="two_branch")


@functools.cache
def block_graph(optimizer: str = "none") -> Graph:
    """The captured step of ``block_problem()``, once per session and optimizer."""
    return capture_training(block_problem(), optimizer=optimizer, name="blocks")


@functools.cache
def mlp_graph(optimizer: str = "none") -> Graph:
    return capture_training(mlp_problem(), optimizer=optimizer, name="mlp")


def small_zoo_problem(name: str, batch: int = 2) -> TrainingProblem:
    """A zoo model's training problem with shrunk inputs (as ``helpers.models.shrink``; labels of
    sequences cut to the same length). Batch 2: batch norm in training needs two values."""
    import dataclasses

    from helpers.models import SEQ_LEN, shrink
    from streamplan.zoo.training import training_problem

    problem = training_problem(name, batch)
    inputs = shrink(name, tuple(problem.inputs))
    targets = tuple(t[:, :SEQ_LEN].contiguous() if t.dim() == 2 else t for t in problem.targets)
    return dataclasses.replace(problem, inputs=inputs, targets=targets)


def shallow_gpt2_problem(batch: int = 2, layers: int = 2, vocab: int = 2048) -> TrainingProblem:
    """The zoo's GPT-2 training problem (``GPT2LM``: the LM head tied to the token embeddings,
    next-token loss) with ``layers`` of its 12 identical blocks and a ``vocab``-token vocabulary,
    on 16 tokens. Every op kind of the full model's step is there (embeddings, attention,
    layer norms, GELU, the tied head and its two gradients); a training step of GPT-2 small is
    38M embedding weights and ten more blocks of the same, about three times the time on the CPU."""
    from transformers import GPT2Config, GPT2Model

    from helpers.models import SEQ_LEN
    from streamplan.zoo._layers import seeded
    from streamplan.zoo.transformers_models import GPT2LM, next_token_loss

    seeded(0)
    module = GPT2LM.__new__(GPT2LM)
    nn.Module.__init__(module)
    config = GPT2Config(use_cache=False, attn_implementation="eager", n_layer=layers, vocab_size=vocab)
    module.transformer = GPT2Model(config)
    ids = torch.randint(0, vocab, (batch, SEQ_LEN), generator=torch.Generator().manual_seed(1))
    return TrainingProblem(module, (ids,), next_token_loss, (ids.clone(),), "next-token cross-entropy")


def check_zoo_training_step(problem: TrainingProblem, name: str) -> None:
    """The captured Adam step of ``problem`` equals eager exactly on one stream, and to
    tolerance under asap on four streams with chaos delays."""
    from streamplan.runtime import run_and_compare
    from streamplan.schedule.context import ScheduleContext

    graph = capture_training(problem, optimizer="adam", name=name)
    one = run_and_compare(problem, "sequential", graph=graph, train=True, optimizer="adam")
    assert one.matches_eager and one.max_abs_error == 0.0, one.max_abs_error
    many = run_and_compare(
        problem,
        "asap",
        graph=graph,
        train=True,
        optimizer="adam",
        chaos=True,
        ctx=ScheduleContext(max_streams=4),
    )
    assert many.matches_eager, many.max_abs_error
