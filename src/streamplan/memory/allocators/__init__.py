"""Allocator models replayed over a schedule's host launch order (``docs/memory.md``, figure 4).

``replay(graph, schedule, model)`` returns an ``AllocatorReport`` with the
allocated and reserved peaks, a per-launch trace, and where it would run out of
memory. Models: ``exact`` (live bytes), ``page`` (4 KiB pages, exact-size reuse),
``pow2`` (power-of-two size classes) and ``torch-cuda`` (PyTorch's CUDA caching
allocator, which predicts ``max_memory_allocated`` and ``max_memory_reserved``).
``OpMemory`` adds measured op scratch and per-stream library workspaces to a replay.
"""

from streamplan.memory.allocators.driver import MODELS, replay
from streamplan.memory.allocators.op_memory import OpMemory
from streamplan.memory.allocators.report import AllocatorOOM, AllocatorReport, AllocatorStep

__all__ = ["MODELS", "AllocatorOOM", "AllocatorReport", "AllocatorStep", "OpMemory", "replay"]
