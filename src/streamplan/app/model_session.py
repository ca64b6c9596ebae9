"""``analyze(model)``: a ``Session`` on a model spec, a captured ``Graph`` or a ``torch.nn.Module``.

The one door every model comes in by (``streamplan.analyze``, and every command of the
command line): a spec is captured through the capture cache, a module with its example
inputs, a graph is taken as it is; ``train=True`` captures one training step and
``parallel`` turns that step into one rank's program. What each kind of model accepts is
checked here, so a wrong combination is a clear error before anything is captured.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from streamplan.app.session import Session
from streamplan.errors import ModelSpecError, ScheduleError
from streamplan.ir.graph import Graph
from streamplan.progress import ProgressFn, no_progress
from streamplan.schedule.settings import Settings


def analyze(
    model: Any,
    example_inputs: Any = None,
    *,
    train: bool = False,
    optimizer: str = "none",
    loss_fn: Any = None,
    targets: Sequence[Any] = (),
    batch: int | None = None,
    dtype: str | None = None,
    precision: str | None = None,
    attention: str | None = None,
    name: str | None = None,
    cache: bool = True,
    progress: ProgressFn = no_progress,
    settings: Settings | None = None,
    parallel: Any = None,
    **setting_fields: Any,
) -> Session:
    """A ``Session`` on ``model`` under ``settings`` (or ``Settings(**setting_fields)``).

    ``model`` is a model spec (a zoo name, ``random:N``, ``graph.json``, ``file.py:function``,
    ``model.onnx``, ``hf:NAME``, ``timm:NAME``, ``torchvision:NAME``; captured through the
    capture cache unless ``cache=False``), a ``Graph``, or a ``torch.nn.Module`` (it may live
    on the meta device) with ``example_inputs``. ``train=True`` makes it one training step
    (``optimizer``: none, sgd, momentum, adam or adamw; for a module, ``loss_fn(output, *targets)``,
    the sum of the outputs when None). For a spec, ``precision`` (``mixed-bf16``) and
    ``attention`` (``flash``, ``math``, ``eager``) say how the step runs (``ModelRequest``).
    ``parallel`` (a ``ParallelPlan`` or its text: ``"fsdp=8"``, ``"ddp=8,bucket=25MiB"``) turns
    the training step into one rank's program (``docs/distributed.md``); ``batch`` is then each
    rank's batch.
    """
    if settings is not None and setting_fields:
        raise ScheduleError("give either settings= or setting fields, not both")
    settings = settings if settings is not None else Settings(**setting_fields)
    if optimizer != "none" and not train:
        raise ModelSpecError(
            f"optimizer {optimizer!r} needs --train (train=True): it updates a training step",
            hint="add --train (train=True), or drop the optimizer",
        )
    if isinstance(model, Graph):
        if parallel is not None:
            from streamplan.parallel import rank_program

            return Session(rank_program(model, parallel), settings, progress=progress)
        if train or batch is not None or dtype is not None or example_inputs is not None:
            raise ModelSpecError(
                f"{model.name}: a graph is already captured: train, batch, dtype and example inputs "
                "do not apply to it",
                hint="pass the model spec or the module to capture it with them",
            )
        return Session(model, settings, progress=progress)
    if isinstance(model, str):
        from streamplan.cache import CaptureCache
        from streamplan.models import ModelRequest

        if example_inputs is not None:
            raise ModelSpecError(
                f"{model}: a model spec makes its own example inputs", hint="drop example_inputs"
            )
        request = ModelRequest(
            model,
            batch=batch,
            dtype=dtype,
            train=train,
            optimizer=optimizer,
            precision=precision,
            attention=attention,
            parallel=parallel,
        )
        graph = request.load(cache=CaptureCache() if cache else None, progress=progress)
        return Session(graph, settings, source=request, progress=progress, notes=_capture_notes(model, graph))
    if parallel is not None and not train:
        raise ModelSpecError("a parallel plan splits a training step over ranks", hint="add train=True")
    if example_inputs is None:
        raise ModelSpecError(
            f"cannot analyze a {type(model).__name__} without example inputs",
            hint="analyze(module, example_inputs) with a tuple of tensors, or a model spec string",
        )
    inputs = example_inputs if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    if precision is not None or attention is not None:
        raise ModelSpecError(
            "precision and attention rebuild a model spec; a module is captured as it is",
            hint="cast the module yourself, or analyze a model spec",
        )
    if batch is not None or dtype is not None:
        raise ModelSpecError(
            "batch and dtype rebuild a model spec's inputs; a module is captured with the inputs given",
            hint="pass example inputs of the batch size and dtype you want",
        )
    if train:
        from streamplan.frontends.training import TrainingProblem, capture_training

        problem = TrainingProblem(model, tuple(inputs), loss_fn, tuple(targets), "the given loss function")
        graph = capture_training(problem, optimizer=optimizer, name=name)
        if parallel is not None:
            from streamplan.parallel import rank_program

            graph = rank_program(graph, parallel)
        return Session(graph, settings, source=(problem, optimizer), progress=progress)
    from streamplan.frontends.torch_capture import capture

    graph = capture(model, tuple(inputs), name=name)
    return Session(graph, settings, source=(model, tuple(inputs)), progress=progress)


def _capture_notes(spec: str, graph: Graph) -> tuple[str, ...]:
    """What capturing ``spec`` had to assume: a training step with no loss function of its own."""
    from streamplan.ir.training import training_step

    step = training_step(graph)
    if step is not None and step.loss_is_default:
        return (f"{spec} gives no loss function: the loss is {step.loss_fn}",)
    return ()
