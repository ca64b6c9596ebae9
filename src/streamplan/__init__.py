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


__all__ = ["Graph", "Node", "Value", "verify", "load_model", "capture", "StreamplanError", "__version__"]
