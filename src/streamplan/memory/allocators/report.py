"""Result types of an allocator replay: ``AllocatorReport`` and its parts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamplan.ir.includes import Includes

MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class AllocatorStep:
    """Allocator state right after ``op``'s outputs were allocated (before its frees)."""

    op: str
    allocated_bytes: int
    reserved_bytes: int


@dataclass(frozen=True, slots=True)
class AllocatorOOM:
    """Where the replay ran out of device memory.

    ``op`` is None when the failing request was a resident input/param, made
    before the first launch. ``requested_bytes`` is the storage's size;
    ``device_request_bytes`` what the model tried to obtain from the device
    (a rounded block or a whole segment). ``allocated_bytes``/``reserved_bytes``
    are the state when it failed (after the out-of-memory retry released caches).
    """

    op: str | None
    storage: str
    requested_bytes: int
    device_request_bytes: int
    allocated_bytes: int
    reserved_bytes: int
    capacity_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "storage": self.storage,
            "requested_bytes": self.requested_bytes,
            "device_request_bytes": self.device_request_bytes,
            "allocated_bytes": self.allocated_bytes,
            "reserved_bytes": self.reserved_bytes,
            "capacity_bytes": self.capacity_bytes,
        }


@dataclass(frozen=True)
class AllocatorReport:
    """The host-order replay of a schedule through one allocator model.

    ``allocated_peak_bytes`` predicts ``torch.cuda.max_memory_allocated`` (block
    bytes handed out, with rounding and split slack), ``reserved_peak_bytes``
    ``max_memory_reserved`` (bytes obtained from the device). ``trace`` has one
    step per launch (it stops at the launch that ran out of memory, see ``oom``).
    ``segments`` is the most device allocations held at once (for torch-cuda,
    ``memory_stats()["segment.all.peak"]``), ``segment_allocs`` how many were made,
    ``alloc_retries`` how often the out-of-memory path freed the cache and retried.
    ``resident_bytes`` is what the included inputs/params take (allocated first,
    never freed); zero when ``includes`` counts activations only.
    ``op_memory`` says whether measured op scratch and stream workspaces were added.
    ``held_peak_bytes`` is the most bytes handed out or freed-but-held (``record_stream``)
    at once; ``run_ahead`` says the replay let the device lag as far as the host waits allow.
    """

    model: str
    allocated_peak_bytes: int
    reserved_peak_bytes: int
    trace: tuple[AllocatorStep, ...]
    oom: AllocatorOOM | None
    segments: int
    segment_allocs: int
    alloc_retries: int
    resident_bytes: int
    includes: Includes
    uses_timeline: bool
    op_memory: bool = False
    run_ahead: bool = False  # held blocks came back as late as the host waits allow
    held_peak_bytes: int = 0  # most bytes allocated or held back by record_stream at once

    def to_dict(self, *, trace: bool = True) -> dict[str, Any]:
        """JSON-ready dict; ``trace=False`` leaves out the per-launch trace."""
        out: dict[str, Any] = {
            "model": self.model,
            "allocated_peak_bytes": self.allocated_peak_bytes,
            "reserved_peak_bytes": self.reserved_peak_bytes,
            "segments": self.segments,
            "segment_allocs": self.segment_allocs,
            "alloc_retries": self.alloc_retries,
            "resident_bytes": self.resident_bytes,
            **self.includes.flags(),
            "uses_timeline": self.uses_timeline,
            "run_ahead": self.run_ahead,
            "held_peak_bytes": self.held_peak_bytes,
            "op_memory": self.op_memory,
            "oom": self.oom.to_dict() if self.oom else None,
        }
        if trace:
            out["trace"] = [
                {"op": s.op, "allocated_bytes": s.allocated_bytes, "reserved_bytes": s.reserved_bytes}
                for s in self.trace
            ]
        return out

    def __str__(self) -> str:
        what = self.includes.brief("+") + ("+op scratch" if self.op_memory else "")
        text = (
            f"allocator {self.model} ({what}): allocated peak {self.allocated_peak_bytes / MIB:.2f} MiB, "
            f"reserved peak {self.reserved_peak_bytes / MIB:.2f} MiB, {self.segments} segments"
        )
        if self.oom:
            where = self.oom.op or "resident inputs/params"
            text += (
                f"\n  out of memory at {where}: {self.oom.requested_bytes} B requested "
                f"({self.oom.device_request_bytes} B from the device), "
                f"{self.oom.reserved_bytes / MIB:.2f} of {self.oom.capacity_bytes / MIB:.2f} MiB reserved"
            )
        return text
