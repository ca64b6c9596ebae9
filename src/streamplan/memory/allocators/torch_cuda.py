"""``torch-cuda``: a model of PyTorch's CUDA caching allocator (default settings).

The rules (ANCHORS.md):

- a request rounds up to a multiple of 512 B;
- requests <= 1 MiB use the small pool, whose new segments are 2 MiB; larger ones
  the large pool: a new 20 MiB segment below 10 MiB, else the size rounded up to 2 MiB;
- a request takes the smallest cached free block that fits, in its pool and on
  the **same stream** only (ties: lowest address);
- a block is split when the rest is >= 512 B (small pool) or > 1 MiB (large
  pool); otherwise the whole block is handed out and its slack counts as allocated;
- a freed block merges with free neighbours of the same segment only;
- a block used on other streams (``record_stream``) goes back to the cache only
  once the events recorded on those streams at free time have completed
  (``ready_ms``); pending frees are processed at the start of each later request;
- when a new segment would exceed the capacity, the out-of-memory path waits for
  every pending event, returns every fully free segment to the device, and
  retries once (``max_split_size`` is unlimited by default, so PyTorch's partial
  release step is a no-op and is not modelled).

``allocated`` drops when a block is freed, even while its events are pending
(as PyTorch's ``allocated_bytes`` stat does); ``reserved`` is the segment bytes.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort

from streamplan.memory.allocators._base import Counters, OutOfMemory

MIN_BLOCK_BYTES = 512
SMALL_REQUEST_BYTES = 1 << 20  # requests up to this use the small pool
SMALL_SEGMENT_BYTES = 2 << 20
LARGE_SEGMENT_BYTES = 20 << 20
MIN_LARGE_ALLOC_BYTES = 10 << 20  # requests from here get a segment of their own size
ROUND_LARGE_BYTES = 2 << 20

_FREE, _ALLOCATED, _PENDING = 0, 1, 2


def round_request(nbytes: int) -> int:
    """The block size a request of ``nbytes`` asks for (a multiple of 512 B, at least 512 B)."""
    return max(1, -(-nbytes // MIN_BLOCK_BYTES)) * MIN_BLOCK_BYTES


def segment_bytes(size: int) -> int:
    """The size of the new segment (cudaMalloc) made for a rounded request of ``size`` bytes."""
    if size <= SMALL_REQUEST_BYTES:
        return SMALL_SEGMENT_BYTES
    if size < MIN_LARGE_ALLOC_BYTES:
        return LARGE_SEGMENT_BYTES
    return -(-size // ROUND_LARGE_BYTES) * ROUND_LARGE_BYTES


def should_split(small: bool, remaining_bytes: int) -> bool:
    """Whether a block with ``remaining_bytes`` left over after a request is split."""
    if small:
        return remaining_bytes >= MIN_BLOCK_BYTES
    return remaining_bytes > SMALL_REQUEST_BYTES


class Block:
    """A piece of one segment; ``prev``/``next`` are its neighbours in that segment."""

    __slots__ = ("addr", "size", "stream", "small", "prev", "next", "state")

    def __init__(self, addr: int, size: int, stream: int, small: bool):
        self.addr = addr
        self.size = size
        self.stream = stream
        self.small = small
        self.prev: Block | None = None
        self.next: Block | None = None
        self.state = _FREE

    @property
    def whole_segment(self) -> bool:
        return self.prev is None and self.next is None


class TorchCudaAllocator(Counters):
    """Segments of blocks; free blocks in sorted lists per (stream, pool) for best fit."""

    def __init__(self, capacity_bytes: int | None = None):
        super().__init__(capacity_bytes)
        self._free_lists: dict[tuple[int, bool], list[tuple[int, int]]] = {}  # (size, addr)
        self._free_blocks: dict[int, Block] = {}  # addr -> free block
        self._pending: list[tuple[float, int, Block]] = []  # (ready_ms, seq, block)
        self._seq = 0
        self._next_addr = 0

    # -- public ------------------------------------------------------------
    def malloc(self, nbytes: int, stream: int, now_ms: float | None) -> Block:
        """Hand out a block for ``nbytes`` on ``stream`` at host time ``now_ms``."""
        if now_ms is not None:
            self._process_events(now_ms)
        size = round_request(nbytes)
        small = size <= SMALL_REQUEST_BYTES
        block = self._best_fit(stream, small, size)
        if block is None:
            block = self._new_segment(stream, small, segment_bytes(size))
        remaining = block.size - size
        if should_split(small, remaining):
            rest = Block(block.addr + size, remaining, stream, small)
            rest.prev, rest.next = block, block.next
            if block.next is not None:
                block.next.prev = rest
            block.next = rest
            block.size = size
            self._insert_free(rest)
        block.state = _ALLOCATED
        self._allocate(block.size)
        return block

    def free(self, block: Block, ready_ms: float | None) -> None:
        """Free ``block``; it returns to the cache at once, or at ``ready_ms`` (events pending)."""
        self.allocated_bytes -= block.size
        if ready_ms is None:
            self._free_block(block)
        else:
            block.state = _PENDING
            self._seq += 1
            self.pending_bytes += block.size
            heapq.heappush(self._pending, (ready_ms, self._seq, block))

    def check(self) -> None:
        """Assert the internal invariants (for tests): the blocks tile the reserved bytes."""
        free = sum(b.size for b in self._free_blocks.values())
        pending = sum(b.size for _, _, b in self._pending)
        assert free + pending + self.allocated_bytes == self.reserved_bytes, (
            free,
            pending,
            self.allocated_bytes,
        )
        for lst in self._free_lists.values():
            assert lst == sorted(lst)
        for b in self._free_blocks.values():
            assert b.state == _FREE
            for n in (b.prev, b.next):
                assert n is None or n.state != _FREE, "two free neighbours were not merged"

    # -- internals ---------------------------------------------------------
    def _best_fit(self, stream: int, small: bool, size: int) -> Block | None:
        lst = self._free_lists.get((stream, small))
        if not lst:
            return None
        i = bisect_left(lst, (size, -1))
        if i == len(lst):
            return None
        block = self._free_blocks.pop(lst.pop(i)[1])
        return block

    def _new_segment(self, stream: int, small: bool, seg_bytes: int) -> Block:
        if not self._fits(seg_bytes):
            self.alloc_retries += 1
            self._synchronize_events()
            self._release_cached_segments()
            if not self._fits(seg_bytes):
                raise OutOfMemory(seg_bytes)
        self._reserve(seg_bytes)
        block = Block(self._next_addr, seg_bytes, stream, small)
        self._next_addr += seg_bytes
        return block

    def _insert_free(self, block: Block) -> None:
        block.state = _FREE
        insort(self._free_lists.setdefault((block.stream, block.small), []), (block.size, block.addr))
        self._free_blocks[block.addr] = block

    def _remove_free(self, block: Block) -> None:
        lst = self._free_lists[(block.stream, block.small)]
        del lst[bisect_left(lst, (block.size, block.addr))]
        del self._free_blocks[block.addr]

    def _free_block(self, block: Block) -> None:
        """Merge with free neighbours of the same segment, then cache the result."""
        prev, nxt = block.prev, block.next
        if prev is not None and prev.state == _FREE:
            self._remove_free(prev)
            prev.size += block.size
            prev.next = nxt
            if nxt is not None:
                nxt.prev = prev
            block = prev
        if nxt is not None and nxt.state == _FREE:
            self._remove_free(nxt)
            block.size += nxt.size
            block.next = nxt.next
            if nxt.next is not None:
                nxt.next.prev = block
        self._insert_free(block)

    def _process_events(self, now_ms: float) -> None:
        pending = self._pending
        while pending and pending[0][0] <= now_ms:
            block = heapq.heappop(pending)[2]
            self.pending_bytes -= block.size
            self._free_block(block)

    def _synchronize_events(self) -> None:
        self._process_events(math.inf)

    def _release_cached_segments(self) -> None:
        for block in [b for b in self._free_blocks.values() if b.whole_segment]:
            self._remove_free(block)
            self._unreserve(block.size)
