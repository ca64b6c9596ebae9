"""One training step of a torch model spec (a zoo network, ``file.py:function`` or a hub spec):
the training problem it names (module, inputs, loss, targets) and its captured step.

``models.load_model(spec, train=True)`` comes here for torch models (``random:N`` and saved
training steps it loads itself)."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
from typing import Any

from streamplan.errors import ModelSpecError
from streamplan.frontends.user_code import directory_on_path, running_user_code
from streamplan.ir.graph import Graph
from streamplan.model_files import cast_floats, graph_name, load_user, python_path


def capture_training_step(
    spec: str,
    *,
    batch: int | None,
    dtype: str | None,
    optimizer: str,
    precision: str | None = None,
    attention: str | None = None,
) -> tuple[Graph, int | None]:
    """One training step of a torch model ``spec`` (a zoo network, ``file.py:function`` or a hub
    spec) with ``optimizer``'s update, captured on the meta device, and the batch it was built at."""
    from streamplan.zoo.hub import is_hub_spec

    if ".py:" not in spec and not is_hub_spec(spec):
        from streamplan.zoo.registry import get_model

        if get_model(spec).kind != "torch":  # before importing torch: this costs nothing to refuse
            raise ModelSpecError(
                f"{spec} is a bare graph with no parameters: there is nothing to train",
                hint="train a zoo network (streamplan zoo), a file.py:function model, or random:N",
            )
    from streamplan.frontends.training import capture_training

    user_file = ".py:" in spec
    with directory_on_path(python_path(spec).parent) if user_file else contextlib.nullcontext():
        problem, name = training_problem_of(spec, batch=batch, device="meta", attention=attention)
        master_dtype = None
        if precision is not None:  # mixed precision: the model in bf16/fp16, fp32 master weights and state
            from streamplan.frontends.precision import PRECISIONS

            dtype, master_dtype = PRECISIONS[precision]
        if dtype is not None and dtype != "float32":
            problem = _cast_problem(problem, dtype)
        if batch is None and is_hub_spec(spec):
            batch = 1
        elif batch is None and not user_file:  # a zoo model's step is built at its default batch
            from streamplan.zoo.registry import get_model

            batch = get_model(spec).default_batch
        with (
            running_user_code(f"{name}'s model, while traced,", spec)
            if user_file
            else contextlib.nullcontext()
        ):
            graph = capture_training(problem, optimizer=optimizer, name=name, master_dtype=master_dtype)
    return graph, batch


def training_problem_of(
    spec: str, *, batch: int | None = None, device: str = "cpu", attention: str | None = None
) -> tuple[Any, str]:
    """``(TrainingProblem, name)`` of a zoo model, a ``file.py:function`` or a hub spec (a hub
    model is built on ``device``: ``meta`` to capture it at full size, ``cpu`` to run it)."""
    from streamplan.frontends.training import TrainingProblem
    from streamplan.zoo.hub import is_hub_spec

    if is_hub_spec(spec):
        from streamplan.zoo.hub_models import hub_training_problem

        return hub_training_problem(spec, batch=batch, device=device, attention=attention)
    if ".py:" in spec:
        module, inputs, loss_fn, targets = load_user(spec, batch=batch, with_targets=True)
        return TrainingProblem(
            module, inputs, loss_fn, targets, loss_name=f"{spec.rpartition(':')[2]}'s loss function"
        ), graph_name(spec)
    from streamplan.zoo.registry import get_model
    from streamplan.zoo.training import training_problem

    entry = get_model(spec)
    if entry.requires and importlib.util.find_spec(entry.requires) is None:
        raise ModelSpecError(
            f"model {spec!r} needs the optional package {entry.requires!r}",
            hint=f"pip install {entry.requires}  (or: pip install 'streamplan[{entry.requires}]')",
        )
    return training_problem(spec, batch), spec


def _cast_problem(problem: Any, dtype: str) -> Any:
    import torch

    tdt = getattr(torch, dtype)
    return dataclasses.replace(
        problem,
        module=problem.module.to(tdt),
        inputs=cast_floats(problem.inputs, tdt),
        targets=cast_floats(problem.targets, tdt),
    )
