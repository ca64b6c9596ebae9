"""The zoo's table: name -> how to build it (a graph directly, or a torch module to capture)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from streamplan.errors import ModelSpecError


@dataclass(frozen=True, slots=True)
class ZooModel:
    """One built-in model. ``factory`` is ``"module:function"``.

    For ``kind == "graph"`` the function is ``(batch, dtype) -> Graph`` and needs no torch.
    For ``kind == "torch"`` it is ``(batch) -> (torch.nn.Module, example_inputs)``.
    """

    name: str
    summary: str
    kind: str
    factory: str
    default_batch: int = 1
    requires: str | None = None  # an optional package the model needs
    train_factory: str | None = None  # ``(batch) -> TrainingProblem``; CNNs: cross-entropy on labels

    def load_factory(self) -> Any:
        mod, fn = self.factory.split(":")
        return getattr(importlib.import_module(mod), fn)


_ENTRIES = [
    ZooModel(
        "seed-example1",
        "a->{b,c}->d, every tensor 1 MiB (seed discussion, example 1)",
        "graph",
        "streamplan.zoo.seed:example1",
    ),
    ZooModel(
        "seed-example2",
        "a->{b->d, c->e}->f add, every tensor 1 MiB (seed discussion, example 2)",
        "graph",
        "streamplan.zoo.seed:example2",
    ),
    ZooModel(
        "seed-concat",
        "the atan/concatenate graph from the seed discussion, 1 MiB tensors",
        "graph",
        "streamplan.zoo.seed:concat",
    ),
    ZooModel(
        "inception_v3",
        "Inception V3, 3x299x299, 4-branch blocks, no aux head, 23.8M params (IOS benchmark)",
        "torch",
        "streamplan.zoo.inception:build",
    ),
    ZooModel(
        "googlenet",
        "GoogLeNet (Inception v1), 3x224x224, modules 3a-5b, no aux heads, 6.6M params (Opara benchmark)",
        "torch",
        "streamplan.zoo.googlenet:build",
    ),
    ZooModel(
        "squeezenet",
        "SqueezeNet 1.0 with simple bypass, 3x224x224, 1.25M params (IOS benchmark)",
        "torch",
        "streamplan.zoo.squeezenet:build",
    ),
    ZooModel(
        "randwire",
        "RandWire-WS(n,4,0.75), C=154, graph seeds 0-3, 3x224x224, 62.6M params (IOS benchmark)",
        "torch",
        "streamplan.zoo.randwire:build",
    ),
    ZooModel(
        "nasnet_a",
        "NASNet-A mobile 4@1056, 3x224x224, separable-conv cells, 5.3M params",
        "torch",
        "streamplan.zoo.nasnet:build",
    ),
    ZooModel(
        "nasnet_a_large",
        "NASNet-A large 6@4032, 3x331x331, 88.8M params (the size IOS measured)",
        "torch",
        "streamplan.zoo.nasnet:build_large",
    ),
    ZooModel(
        "resnet50",
        "ResNet-50, 3x224x224, 25.6M params: a control with little parallelism",
        "torch",
        "streamplan.zoo.resnet:build",
    ),
    ZooModel(
        "bert_base",
        "BERT-base encoder (transformers config, random weights), seq 128",
        "torch",
        "streamplan.zoo.transformers_models:bert_base",
        requires="transformers",
        train_factory="streamplan.zoo.transformers_models:bert_base_train",
    ),
    ZooModel(
        "gpt2",
        "GPT-2 small (transformers config, random weights, no cache), seq 128",
        "torch",
        "streamplan.zoo.transformers_models:gpt2",
        requires="transformers",
        train_factory="streamplan.zoo.transformers_models:gpt2_train",
    ),
]

ZOO: dict[str, ZooModel] = {m.name: m for m in _ENTRIES}

RANDOM_HELP = "random:N[:seed] — a synthetic network-like random DAG of N ops (no torch)"
RANDOM_TRAIN_HELP = (
    "random-train:N[:seed] — random:N followed by a mirrored backward pass that reads the saved "
    "activations (about 2.5N ops, no torch)"
)


def zoo_names() -> list[str]:
    return list(ZOO)


def get_model(name: str) -> ZooModel:
    try:
        return ZOO[name]
    except KeyError:
        import difflib

        # a near spelling, or a name it starts (bert -> bert_base); a loose match helps nobody
        # (adir -> randwire)
        close = difflib.get_close_matches(name, ZOO, n=3, cutoff=0.75)
        if len(name) >= 3:
            close += [z for z in ZOO if z.startswith(name) and z not in close][: 3 - len(close)]
        hint = f"did you mean {', '.join(close)}?" if close else "run `streamplan zoo` for the list"
        raise ModelSpecError(f"unknown model {name!r}", hint=hint) from None
