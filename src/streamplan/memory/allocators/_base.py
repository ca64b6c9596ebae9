"""What every allocator model shares: byte counters with peaks, and the out-of-memory signal.

A model is a small mutable simulator (internal to one ``replay`` call) with
``malloc(nbytes, stream, now_ms) -> handle`` and ``free(handle, ready_ms)``.
``ready_ms`` is when a block used on other streams becomes reusable (None: at
once; ``math.inf``: not before a synchronisation). Models that ignore streams
ignore it.
"""

from __future__ import annotations

from collections.abc import Callable


class OutOfMemory(Exception):
    """Raised by a model when a request does not fit in the device capacity."""

    def __init__(self, device_request_bytes: int):
        super().__init__(device_request_bytes)
        self.device_request_bytes = device_request_bytes


class Counters:
    """Allocated and reserved bytes, their peaks, and device-allocation counts."""

    def __init__(self, capacity_bytes: int | None):
        self.capacity_bytes = capacity_bytes
        self.allocated_bytes = 0
        self.reserved_bytes = 0
        self.allocated_peak_bytes = 0
        self.reserved_peak_bytes = 0
        self.live_segments = 0
        self.segments_peak = 0
        self.segment_allocs = 0
        self.alloc_retries = 0
        self.pending_bytes = 0  # freed, but held back until other streams' events complete
        self.held_peak_bytes = 0  # peak of allocated + pending

    def _note_held(self) -> None:
        held = self.allocated_bytes + self.pending_bytes
        if held > self.held_peak_bytes:
            self.held_peak_bytes = held

    def _allocate(self, nbytes: int) -> None:
        self.allocated_bytes += nbytes
        if self.allocated_bytes > self.allocated_peak_bytes:
            self.allocated_peak_bytes = self.allocated_bytes
        self._note_held()

    def _reserve(self, nbytes: int) -> None:
        self.reserved_bytes += nbytes
        self.live_segments += 1
        self.segment_allocs += 1
        if self.reserved_bytes > self.reserved_peak_bytes:
            self.reserved_peak_bytes = self.reserved_bytes
        if self.live_segments > self.segments_peak:
            self.segments_peak = self.live_segments

    def _unreserve(self, nbytes: int) -> None:
        self.reserved_bytes -= nbytes
        self.live_segments -= 1

    def _fits(self, nbytes: int) -> bool:
        return self.capacity_bytes is None or self.reserved_bytes + nbytes <= self.capacity_bytes


class SizeClassAllocator(Counters):
    """Round each request to a size class; a freed block is reused only by the same class.

    Blocks are obtained from the device one by one and pooled on free, never split
    or merged, and streams are ignored (RAF's pool). On a request that would exceed
    the capacity, every pooled block is returned to the device and the request retried.
    """

    def __init__(self, capacity_bytes: int | None, round_bytes: Callable[[int], int]):
        super().__init__(capacity_bytes)
        self._round = round_bytes
        self._pool: dict[int, int] = {}  # size class -> number of free pooled blocks

    def malloc(self, nbytes: int, stream: int, now_ms: float | None) -> int:
        size = self._round(nbytes)
        if self._pool.get(size, 0) > 0:
            self._pool[size] -= 1
        else:
            if not self._fits(size):
                self.alloc_retries += 1
                self._release_pool()
                if not self._fits(size):
                    raise OutOfMemory(size)
            self._reserve(size)
        self._allocate(size)
        return size

    def free(self, handle: int, ready_ms: float | None) -> None:
        self.allocated_bytes -= handle
        self._pool[handle] = self._pool.get(handle, 0) + 1

    def _release_pool(self) -> None:
        for size, count in self._pool.items():
            for _ in range(count):
                self._unreserve(size)
        self._pool.clear()
