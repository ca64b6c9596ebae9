"""``page``: 4 KiB pages with exact-size reuse (the memory pool RAF's estimator models).

A request rounds up to whole pages; a freed block is pooled by its rounded size
and reused only by a request of the same rounded size. Reserved bytes are the
bytes ever obtained from the device (only an out-of-memory retry gives them back).
"""

from __future__ import annotations

from streamplan.memory.allocators._base import SizeClassAllocator

PAGE_BYTES = 4096


def page_round(nbytes: int) -> int:
    """``nbytes`` rounded up to a whole number of 4 KiB pages (at least one page)."""
    return max(1, -(-nbytes // PAGE_BYTES)) * PAGE_BYTES


class PageAllocator(SizeClassAllocator):
    """Size classes of whole pages, exact-size reuse, no splitting or merging."""

    def __init__(self, capacity_bytes: int | None = None):
        super().__init__(capacity_bytes, page_round)
