"""``exact``: live bytes with no rounding and no caching (reserved = allocated)."""

from __future__ import annotations

from streamplan.memory.allocators._base import Counters, OutOfMemory


class ExactAllocator(Counters):
    """Every storage takes exactly its bytes while live; a free returns them at once."""

    def malloc(self, nbytes: int, stream: int, now_ms: float | None) -> int:
        if not self._fits(nbytes):
            raise OutOfMemory(nbytes)
        self._allocate(nbytes)
        self._reserve(nbytes)
        return nbytes

    def free(self, handle: int, ready_ms: float | None) -> None:
        self.allocated_bytes -= handle
        self._unreserve(handle)
