"""Execute schedules for real: CPU threads or CUDA streams, and a ``torch.compile`` backend.

- ``run(graph, schedule, inputs, device=...)`` -> ``RunResult`` (outputs, measured ms, peaks);
- ``run_and_compare(model, policy, ...)`` -> ``Comparison`` (outputs vs eager PyTorch);
- ``backend(policy=...)`` for ``torch.compile`` (also registered as ``backend="streamplan"``).

This package imports torch; outside ``runtime``/``frontends``/``zoo`` only the functions that
load or run a model do (``models``, ``app.run``), inside the function.
"""

from streamplan.runtime.compare import Comparison, MeasuredOpMemory, compare_outputs, run_and_compare
from streamplan.runtime.compile_backend import backend, register
from streamplan.runtime.execute import run
from streamplan.runtime.measure import RunResult

# The name "streamplan" reaches torch.compile through the torch_dynamo_backends entry point
# (pyproject.toml), so importing this package does not pay for importing torch._dynamo.

__all__ = [
    "run",
    "run_and_compare",
    "backend",
    "RunResult",
    "Comparison",
    "compare_outputs",
    "MeasuredOpMemory",
    "register",
]
