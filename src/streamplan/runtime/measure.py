"""What a run measured (``RunResult``) and how live tensor bytes are counted.

Peak live bytes are counted by the executor itself, per *storage*: a storage is
allocated when the first value living in it is produced (its
``untyped_storage().nbytes()``), and freed when the executor drops the last value
that lives in it (after that value's last consumer has finished). Inputs, params
and constants are not counted (``measured_peak_bytes`` is activations only, as the
memory model's activation figures). This is the program's own allocation pattern as
it actually unfolded on the threads; allocator rounding and op-internal scratch
buffers are not included (on CUDA, ``max_memory_allocated`` has those).
"""

from __future__ import annotations

import statistics
import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RunResult:
    """Outputs (in ``graph.outputs`` order) and the measured figures of one ``run`` call.

    ``measured_ms`` is the median of ``times_ms`` (one entry per timed repetition).
    ``measured_peak_bytes`` is the peak of live activation bytes (see module doc), the
    largest over the repetitions. On CUDA ``max_memory_allocated_bytes`` and
    ``max_memory_reserved_bytes`` come from torch's caching allocator (after
    ``reset_peak_memory_stats``, with inputs and params already resident).
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
    meta: dict[str, Any] = field(default_factory=dict)

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
            "meta": self.meta,
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
