"""streamplan: multi-stream schedules for PyTorch graphs, with latency and peak memory known in advance.

The pipeline, one subpackage per stage::

    capture/build -> ir.Graph -> schedule.StreamSchedule -> memory / cost (simulate) / runtime

Start with ``streamplan.analyze(model)``: a ``Session`` on the model's graph under
``Settings`` (device profile, fusion, budget...), with every analysis as a method.

Torch is imported by ``frontends``, ``zoo`` models and ``runtime``, and inside the few
functions that load or run a model (``models`` for a ``file.py:function`` spec, ``app.run``);
nothing else imports it, so a graph-only analysis never loads it.
"""

from streamplan.errors import StreamplanError
from streamplan.ir import Graph, Node, Value, verify
from streamplan.models import load_model

__version__ = "0.1.0"


_LAZY = {
    "analyze": "streamplan.app.model_session",
    "Session": "streamplan.app.session",
    "Settings": "streamplan.schedule.settings",
    "Includes": "streamplan.ir.includes",
    "Fusion": "streamplan.ir.schedule",
}


def __getattr__(name: str):
    # the session API imports every analysis: loaded on first use, so `import streamplan` stays light
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'streamplan' has no attribute {name!r}")


def capture(module, example_inputs, *, name: str | None = None) -> Graph:
    """Capture a ``torch.nn.Module`` as a streamplan graph (torch.export under FakeTensor)."""
    from streamplan.frontends.torch_capture import capture as _capture

    return _capture(module, example_inputs, name=name)


def capture_training(
    module, example_inputs, loss_fn=None, targets=(), *, optimizer: str = "none", name: str | None = None
) -> Graph:
    """Capture one training step of ``module`` — forward, ``loss_fn(output, *targets)`` (the sum
    of the outputs when None), backward and ``optimizer``'s update (none, sgd, momentum, adam)
    — as one graph, under FakeTensor (``docs/training.md``)."""
    from streamplan.frontends.training import TrainingProblem
    from streamplan.frontends.training import capture_training as _capture_training

    problem = TrainingProblem(module, example_inputs, loss_fn, tuple(targets), "the given loss function")
    return _capture_training(problem, optimizer=optimizer, name=name)


def backend(policy: str = "nimble", ctx=None, *, device: str | None = None):
    """A ``torch.compile`` backend running the captured graph with a stream schedule:
    ``torch.compile(model, backend=streamplan.backend(policy="nimble"))``; ``ctx`` is a
    ``streamplan.schedule.ScheduleContext`` (stream cap, cost model...)."""
    from streamplan.runtime.compile_backend import backend as _backend

    return _backend(policy, ctx, device=device)


__all__ = [
    "analyze",
    "Session",
    "Settings",
    "Includes",
    "Fusion",
    "backend",
    "Graph",
    "Node",
    "Value",
    "verify",
    "load_model",
    "capture",
    "capture_training",
    "StreamplanError",
    "__version__",
]
