"""Training steps of the zoo models: which loss each one trains with, on what targets.

- the CNNs (Inception V3, SqueezeNet, RandWire, NASNet-A, ResNet-50): cross-entropy of
  the 1000-way logits against random integer labels, one per image;
- ``bert_base``: masked language modelling (BERT's pre-training loss): the encoder
  without its pooler, the MLM head (dense, GELU, LayerNorm, decoder tied to the word
  embeddings) and cross-entropy at 15% of the positions (the others ignored);
- ``gpt2``: next-token prediction: the LM head tied to the token embeddings and
  cross-entropy of each position's logits against the following token.

Targets are drawn from a fixed seed, so every call builds the same step (same weights,
inputs and labels), which is what lets a run compare itself with eager PyTorch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from streamplan.errors import ModelSpecError
from streamplan.frontends.training import TrainingProblem
from streamplan.zoo.registry import get_model

TARGET_SEED = 1234
NUM_CLASSES = 1000


def training_problem(name: str, batch: int | None = None) -> TrainingProblem:
    """The training problem of zoo model ``name`` at ``batch`` (its default batch if None)."""
    entry = get_model(name)
    batch = batch or entry.default_batch
    if entry.train_factory:
        mod, fn = entry.train_factory.split(":")
        import importlib

        return getattr(importlib.import_module(mod), fn)(batch)
    if entry.kind != "torch":
        raise ModelSpecError(
            f"{name} is a bare graph with no parameters: there is nothing to train",
            hint="train a zoo network (streamplan zoo), a file.py:function model, or random:N",
        )
    module, inputs = entry.load_factory()(batch)
    return image_classification(module, inputs)


def _labels(shape: tuple[int, ...], high: int) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(TARGET_SEED))


def image_classification(module: nn.Module, inputs: tuple[torch.Tensor, ...]) -> TrainingProblem:
    """Cross-entropy against random labels for a 1000-class image model."""
    batch = inputs[0].shape[0]
    return TrainingProblem(
        module=module,
        inputs=inputs,
        loss_fn=F.cross_entropy,
        targets=(_labels((batch,), NUM_CLASSES),),
        loss_name="cross-entropy against random integer labels",
    )
