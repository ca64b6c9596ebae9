"""streamplan: multi-stream schedules for PyTorch graphs, with latency and peak memory known in advance.

The pipeline, one subpackage per stage::

    capture/build -> ir.Graph -> schedule.StreamSchedule -> memory / cost (simulate) / runtime

Torch is imported only by ``frontends.torch_capture``, ``zoo`` models and ``runtime``.
"""

from streamplan.errors import StreamplanError
from streamplan.ir import Graph, Node, Value, verify
from streamplan.models import load_model

__version__ = "0.1.0"


def capture(module, example_inputs, *, name: str | None = None) -> Graph:
    """Capture a ``torch.nn.Module`` as a streamplan graph (torch.export under FakeTensor)."""
    from streamplan.frontends.torch_capture import capture as _capture

    return _capture(module, example_inputs, name=name)


def backend(policy: str = "nimble", ctx=None, *, device: str | None = None):
    """A ``torch.compile`` backend running the captured graph with a stream schedule:
    ``torch.compile(model, backend=streamplan.backend(policy="nimble"))``; ``ctx`` is a
    ``streamplan.schedule.ScheduleContext`` (stream cap, cost model...)."""
    from streamplan.runtime.compile_backend import backend as _backend

    return _backend(policy, ctx, device=device)


__all__ = [
    "backend",
    "Graph",
    "Node",
    "Value",
    "verify",
    "load_model",
    "capture",
    "StreamplanError",
    "__version__",
]
