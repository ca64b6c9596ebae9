"""``replay``: run a schedule's host-order allocations and frees through an allocator model."""

from __future__ import annotations

import math
from typing import Any

from streamplan.cost.timeline import OpSpan, Timeline
from streamplan.errors import BudgetError, ModelSpecError, ScheduleError
from streamplan.ir.graph import Graph
from streamplan.ir.includes import ACTIVATIONS, Includes
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.allocators._base import OutOfMemory
from streamplan.memory.allocators.exact import ExactAllocator
from streamplan.memory.allocators.op_memory import OpMemory
from streamplan.memory.allocators.page import PageAllocator
from streamplan.memory.allocators.pow2 import Pow2Allocator
from streamplan.memory.allocators.report import AllocatorOOM, AllocatorReport, AllocatorStep
from streamplan.memory.allocators.torch_cuda import TorchCudaAllocator
from streamplan.memory.launch_time import HostKnowledge
from streamplan.memory.liveness import Liveness, liveness

MODELS = ("exact", "page", "pow2", "torch-cuda")
RESIDENT_STREAM = -1  # inputs/params are created on the default stream, not a schedule stream

_CLASSES = {
    "exact": ExactAllocator,
    "page": PageAllocator,
    "pow2": Pow2Allocator,
    "torch-cuda": TorchCudaAllocator,
}


def replay(
    graph: Graph,
    schedule: StreamSchedule,
    model: str = "torch-cuda",
    *,
    timeline: Timeline | None = None,
    device_memory_bytes: int | None = None,
    includes: Includes = ACTIVATIONS,
    live: Liveness | None = None,
    op_memory: OpMemory | None = None,
    run_ahead: bool = False,
) -> AllocatorReport:
    """Replay ``schedule``'s host launch order through allocator ``model`` (one of ``MODELS``).

    Each activation storage is allocated when the host launches its producer and
    freed once the host has launched its last user; graph outputs stay. With
    ``includes`` counting inputs or params, those storages are allocated first (in the
    graph's storage order, on the default stream: pools of their own) and never freed, as in a
    measured ``max_memory_allocated``. Zero-byte storages allocate nothing.

    For ``torch-cuda``, a storage used on streams other than its allocating one is
    held after its free until the event recorded on each of those streams at free
    time completes: that event follows the last op launched on the stream so far,
    so with ``timeline`` the block is reusable by an allocation whose host launch
    time is at or after that op's simulated end. Without a timeline the device is
    assumed to lag behind the host: held blocks come back only when the
    out-of-memory path synchronises (the largest reserved figure). With ``run_ahead``
    (and no timeline) the device lags as far as the schedule's host waits allow: a held
    block comes back at the first launch before which the host has waited for the ops
    its events follow (``memory.launch_time``: maximal run-ahead, the timing that holds
    most). A schedule without ``record_stream`` frees every block at once (its waits
    order the reuse). The other models ignore streams. ``device_memory_bytes`` is the capacity available to the
    allocator: the replay stops at the first request that does not fit even after
    the cache is emptied, and ``oom`` says where. ``live`` reuses a ``liveness``
    already computed for this graph, schedule and ``includes``.

    ``op_memory`` adds what ops allocate beyond the graph's tensors (measured
    scratch and per-stream library workspaces, see ``op_memory``): each op's scratch
    is allocated after its outputs on its stream and freed at once; every stream
    that runs a BLAS op holds a workspace from the start (after the residents), as
    in every run after the first, where the first run's workspaces are still held.
    """
    name = _model_name(model)
    if device_memory_bytes is not None and device_memory_bytes <= 0:
        raise BudgetError(f"device memory must be positive, got {device_memory_bytes} bytes")
    if live is None:
        live = liveness(graph, schedule, includes=includes)
    elif live.includes != includes:
        raise ScheduleError(
            f"the liveness given counts {live.includes.describe()}, not {includes.describe()}",
            hint="pass the includes of the liveness, or no liveness",
        )
    residents, allocs, frees = _bucket_lives(live, len(schedule.launch_order))
    spans = _spans(timeline, schedule) if timeline is not None else None
    host = HostKnowledge(live, schedule) if run_ahead and spans is None else None
    alloc: Any = _CLASSES[name](device_memory_bytes)
    handles: dict[str, tuple[Any, int]] = {}
    trace: list[AllocatorStep] = []
    oom = None
    op: str | None = None
    sid, nbytes = "", 0  # the request being made (named if it fails)
    extra = op_memory if op_memory is not None and not op_memory.empty else None
    try:
        for sid, nbytes in residents:  # noqa: B007
            if nbytes > 0:
                alloc.malloc(nbytes, RESIDENT_STREAM, None)
        if extra is not None and extra.stream_workspace_bytes:
            for stream in sorted({schedule.streams[w] for w in extra.workspace_ops if w in schedule.streams}):
                sid, nbytes = f"stream {stream} workspace", extra.stream_workspace_bytes
                alloc.malloc(nbytes, stream, None)
        last_on_stream: dict[int, str] = {}
        streams = schedule.streams
        for i, op in enumerate(schedule.launch_order):
            stream = streams[op]
            last_on_stream[stream] = op
            now_ms = spans[op].launch_ms if spans is not None else (float(i) if host is not None else None)
            for sid, nbytes, users in allocs[i]:
                if nbytes > 0:
                    handles[sid] = (alloc.malloc(nbytes, stream, now_ms), stream, users)
            if extra is not None and extra.scratch_bytes.get(op, 0) > 0:
                sid, nbytes = f"{op}:scratch", extra.scratch_bytes[op]
                alloc.free(alloc.malloc(nbytes, stream, now_ms), None)
            trace.append(AllocatorStep(op, alloc.allocated_bytes, alloc.reserved_bytes))
            for sid in frees[i]:
                entry = handles.pop(sid, None)
                if entry is not None:
                    others = {streams[u] for u in entry[2]} if schedule.record_stream else set()
                    others.discard(entry[1])
                    alloc.free(entry[0], _ready_ms(others, last_on_stream, spans, host))
    except OutOfMemory as e:
        oom = AllocatorOOM(
            op,
            sid,
            nbytes,
            e.device_request_bytes,
            alloc.allocated_bytes,
            alloc.reserved_bytes,
            int(device_memory_bytes or 0),
        )
    return AllocatorReport(
        model=name,
        allocated_peak_bytes=alloc.allocated_peak_bytes,
        reserved_peak_bytes=alloc.reserved_peak_bytes,
        trace=tuple(trace),
        oom=oom,
        segments=alloc.segments_peak,
        segment_allocs=alloc.segment_allocs,
        alloc_retries=alloc.alloc_retries,
        resident_bytes=sum(n for _, n in residents),
        includes=includes,
        uses_timeline=spans is not None,
        op_memory=extra is not None,
        run_ahead=host is not None,
        held_peak_bytes=alloc.held_peak_bytes,
    )


def _bucket_lives(live: Liveness, n: int) -> tuple[list, list[list], list[list]]:
    """Residents, and per launch the storages allocated and freed there (host order, see
    ``memory.host_order``)."""
    residents: list[tuple[str, int]] = []
    allocs: list[list[tuple[str, int, tuple[str, ...]]]] = [[] for _ in range(n)]
    frees: list[list[str]] = [[] for _ in range(n)]
    lt = live.lifetimes
    for life, birth, death in zip(live.lives, lt.birth, lt.death, strict=True):
        if life.creator is None:
            residents.append((life.storage, life.nbytes))
            continue
        allocs[birth].append((life.storage, life.nbytes, life.users))
        if not life.persistent:
            frees[death].append(life.storage)
    return residents, allocs, frees


def _ready_ms(
    others: set[int],
    last_on_stream: dict[int, str],
    spans: dict[str, OpSpan] | None,
    host: HostKnowledge | None = None,
) -> float | None:
    """When the events recorded now on ``others`` complete (None: no other stream used it); in
    run-ahead replays, the launch index from which the host knows they have."""
    if not others:
        return None
    if host is not None:
        return max(host.first_launch(last_on_stream[s]) for s in others)
    if spans is None:
        return math.inf
    return max(spans[last_on_stream[s]].end_ms for s in others)


def _model_name(model: str) -> str:
    name = model.strip().lower().replace("_", "-")
    if name not in MODELS:
        raise ModelSpecError(
            f"unknown allocator model {model!r}", where="allocator", hint=f"use one of {', '.join(MODELS)}"
        )
    return name


def _spans(timeline: Timeline, schedule: StreamSchedule) -> dict[str, OpSpan]:
    spans = timeline.by_op()
    missing = [op for op in schedule.launch_order if op not in spans]
    if missing:
        raise ScheduleError(
            f"the timeline has no span for {', '.join(missing[:5])}"
            + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""),
            where=f"schedule {schedule.policy}",
            hint="simulate this schedule (not another one) and pass its timeline",
        )
    return spans
