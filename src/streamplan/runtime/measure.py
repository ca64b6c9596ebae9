"""What a run measured (``RunResult``) and how live tensor bytes are counted.

Peak live bytes are counted by the executor itself, per *storage*: a storage is
allocated when the first value living in it is produced (its
``untyped_storage().nbytes()``), and freed when the executor drops the last value
that lives in it (after that value's last consumer has finished). Inputs, params
and constants are not counted (``measured_peak_bytes`` is activations only, as the
memory model's activation figures). This is the program's own allocation pattern as
it actually unfolded on the threads; allocator rounding and op-internal scratch
buffers are not included (on CUDA, ``max_memory_allocated`` has those).

``AllocatedBytes`` counts what the kernels really allocate instead: a dispatch mode
per thread (``AllocatedBytes.mode()``) sees every ATen kernel, including those a
composite op runs inside (``matmul``'s copies, ``max_pool2d``'s indices), and a
storage counts from the kernel that returns it until the last tensor seen on it is
freed. On the CPU this is the ``tracked_peak_bytes`` of a run (op scratch included),
which the ``exact`` allocator replay with measured op scratch predicts.
"""

from __future__ import annotations

import statistics
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from streamplan.cost.timeline import Timeline


@dataclass(frozen=True)
class RunResult:
    """Outputs (in ``graph.outputs`` order) and the measured figures of one ``run`` call.

    ``measured_ms`` is the median of ``times_ms`` (one entry per timed repetition).
    ``measured_peak_bytes`` is the peak of live activation bytes (see module doc), the
    largest over the repetitions. On CUDA ``max_memory_allocated_bytes`` and
    ``max_memory_reserved_bytes`` come from torch's caching allocator (after
    ``reset_peak_memory_stats``, with inputs and params already resident). On the CPU,
    ``tracked_peak_bytes`` (when asked for) is the peak of the storages the kernels
    allocated in one extra untimed run, op scratch included (``AllocatedBytes``), and
    ``timelines`` holds the measured per-op timeline of each timed run (the
    simulator's ``Timeline`` form; ``cost.measured.measured_op_times`` turns them into
    a measured table; ``timeline`` is the median run's).
    """

    outputs: tuple[Any, ...]
    measured_ms: float
    times_ms: tuple[float, ...]
    measured_peak_bytes: int
    device: str
    policy: str
    num_streams: int
    max_memory_allocated_bytes: int | None = None
    max_memory_reserved_bytes: int | None = None
    tracked_peak_bytes: int | None = None
    timelines: tuple[Timeline, ...] = field(default=(), repr=False)
    chaos: bool = False  # random delays were added before ops
    seed: int = 0
    cuda_graph: bool = False  # the timed runs replayed a captured CUDA graph
    resident_bytes: int | None = None  # CUDA: allocated before the timed runs (inputs, params...)

    @property
    def timeline(self) -> Timeline | None:
        """The measured timeline of the run whose time is the median (None on CUDA)."""
        if not self.timelines:
            return None
        return sorted(self.timelines, key=lambda t: t.makespan_ms)[len(self.timelines) // 2]

    def to_dict(self) -> dict[str, Any]:
        """The figures (not the output tensors) as JSON-ready data."""
        return {
            "device": self.device,
            "policy": self.policy,
            "num_streams": self.num_streams,
            "measured_ms": self.measured_ms,
            "times_ms": list(self.times_ms),
            "measured_peak_bytes": self.measured_peak_bytes,
            "max_memory_allocated_bytes": self.max_memory_allocated_bytes,
            "max_memory_reserved_bytes": self.max_memory_reserved_bytes,
            "tracked_peak_bytes": self.tracked_peak_bytes,
            "chaos": self.chaos,
            "seed": self.seed,
            "cuda_graph": self.cuda_graph,
            "resident_bytes": self.resident_bytes,
        }

    def __str__(self) -> str:
        text = (
            f"run {self.policy} on {self.device} ({self.num_streams} streams): "
            f"{self.measured_ms:.3f} ms median of {len(self.times_ms)}, "
            f"peak live {self.measured_peak_bytes / 2**20:.2f} MiB"
        )
        if self.max_memory_allocated_bytes is not None:
            text += (
                f", max_memory_allocated {self.max_memory_allocated_bytes / 2**20:.2f} MiB"
                f", max_memory_reserved {self.max_memory_reserved_bytes / 2**20:.2f} MiB"
            )
        return text


def median_ms(times_ms: list[float]) -> float:
    return float(statistics.median(times_ms)) if times_ms else 0.0


class LiveBytes:
    """Thread-safe count of live activation storages and their peak.

    ``produced(key, nbytes)`` is called once per new value, ``dropped(key)`` when the
    executor releases a value; a storage counts from its first value's production to
    its last value's release (views and in-place results share the key).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._refs: dict[Any, int] = {}
        self._size: dict[Any, int] = {}
        self.live_bytes = 0
        self.peak_bytes = 0

    def produced(self, key: Any, nbytes: int) -> None:
        with self._lock:
            if key in self._refs:
                self._refs[key] += 1
                return
            self._refs[key] = 1
            self._size[key] = nbytes
            self.live_bytes += nbytes
            if self.live_bytes > self.peak_bytes:
                self.peak_bytes = self.live_bytes

    def dropped(self, key: Any) -> None:
        with self._lock:
            n = self._refs.get(key)
            if n is None:
                return
            if n > 1:
                self._refs[key] = n - 1
                return
            del self._refs[key]
            self.live_bytes -= self._size.pop(key)


class AllocatedBytes:
    """Live bytes of the storages created by kernels run under its modes, and their peak.

    Thread-safe: each thread enters its own ``mode()``. Storages in ``known`` (the
    run's inputs and params) never count; a storage is counted once however many
    tensors (views, in-place results) are seen on it, until the last of them is freed.
    """

    def __init__(self, known: set[int] | None = None) -> None:
        self._known = set(known or ())
        self._lock = threading.Lock()
        self._refs: dict[int, list[int]] = {}  # data_ptr -> [nbytes, tensors alive]
        self.live_bytes = 0
        self.peak_bytes = 0

    @staticmethod
    def of_tensors(tensors: Any) -> AllocatedBytes:
        """A tracker that ignores the storages of ``tensors`` (an iterable)."""
        return AllocatedBytes(
            {t.untyped_storage().data_ptr() for t in tensors if isinstance(t, torch.Tensor)}
        )

    def mode(self) -> TorchDispatchMode:
        """A dispatch mode for the calling thread that reports to this tracker."""
        return _TrackKernels(self)

    def seen(self, t: torch.Tensor) -> None:
        if t.device.type == "meta":
            return
        storage = t.untyped_storage()
        ptr, nbytes = storage.data_ptr(), storage.nbytes()
        if nbytes == 0 or ptr in self._known:
            return
        with self._lock:
            entry = self._refs.get(ptr)
            if entry is None:
                self._refs[ptr] = [nbytes, 1]
                self.live_bytes += nbytes
                self.peak_bytes = max(self.peak_bytes, self.live_bytes)
            else:
                entry[1] += 1
        weakref.finalize(t, self._release, ptr)

    def _release(self, ptr: int) -> None:
        with self._lock:
            entry = self._refs.get(ptr)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] == 0:
                del self._refs[ptr]
                self.live_bytes -= entry[0]


class _TrackKernels(TorchDispatchMode):
    """Reports every tensor a kernel returns; runs composite ops' own kernels under itself."""

    def __init__(self, counter: AllocatedBytes) -> None:
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        kwargs = kwargs or {}
        if torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeImplicitAutograd"):
            with self:  # see the temporaries inside the composite
                out = func.decompose(*args, **kwargs)
            if out is not NotImplemented:
                return out
        out = func(*args, **kwargs)
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self.counter.seen(t)
        return out
