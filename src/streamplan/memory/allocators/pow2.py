"""``pow2``: round every request up to a power of two and pool blocks by size class."""

from __future__ import annotations

from streamplan.memory.allocators._base import SizeClassAllocator


def pow2_round(nbytes: int) -> int:
    """The smallest power of two >= ``nbytes`` (1 for 0 or 1)."""
    return 1 if nbytes <= 1 else 1 << (nbytes - 1).bit_length()


class Pow2Allocator(SizeClassAllocator):
    """Power-of-two size classes, exact-class reuse, no splitting or merging."""

    def __init__(self, capacity_bytes: int | None = None):
        super().__init__(capacity_bytes, pow2_round)
