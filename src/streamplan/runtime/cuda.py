"""Launch a schedule from one host thread onto device streams (CUDA, or the fake backend).

One non-default stream per schedule stream. The host issues ops in launch order:
for each op it makes the op's stream wait for the events of the ops it waits for,
launches the op under its stream, and records an event after it if any op waits
for it. Every stream first waits for a *fork* event recorded on the caller's stream
(so the inputs made there are ready), and the caller's stream finally waits for a
*join* event from every stream. CUDA-graph capture uses the same fork/join.

Cross-stream frees: the host drops a value's last reference when its last consumer
has been *launched*, long before the device has run it. A storage allocated on
stream A and read on stream B would be reusable on A too early, so the first time a
storage is used on a stream other than the one it was allocated on, the host calls
``tensor.record_stream(B)``: the caching allocator then keeps the block out of A's
pool until an event recorded on B at free time has completed. (The memory model's
``torch-cuda`` replay follows the same rule.) Outputs made on a side stream are also
recorded on the caller's stream, which reads them afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.runtime.backend_api import StreamBackend
from streamplan.runtime.cpu import chaos_delays_s, storage_key, store_and_release, use_counts
from streamplan.runtime.interpret import call_node
from streamplan.runtime.measure import LiveBytes


class StreamExecutor:
    """Creates one backend stream per schedule stream once; ``launch`` issues one run."""

    def __init__(self, graph: Graph, schedule: StreamSchedule, backend: StreamBackend):
        self.graph = graph
        self.schedule = schedule
        self.backend = backend
        ids = sorted(set(schedule.streams[op] for op in schedule.launch_order))
        self.streams = {s: backend.create_stream(s) for s in ids}
        self.waits = schedule.waits_before()
        self.host_waits = schedule.host_waits_before()
        self.needs_event = {w.after for w in (*schedule.waits, *schedule.host_waits)}

    def launch(
        self, env: dict[str, Any], tracker: LiveBytes | None = None, delays_s: dict[str, float] | None = None
    ) -> tuple[Any, ...]:
        """Issue every op once; ``env`` holds the leaf tensors (consumed). Returns the outputs.

        ``delays_s`` (chaos mode) keeps an op's stream busy that long before the op.
        """
        g, be = self.graph, self.backend
        tracker = tracker if tracker is not None else LiveBytes()
        caller = be.current_stream()
        fork = be.record_event(caller, "fork")
        for stream in self.streams.values():
            be.wait_event(stream, fork)
        remaining = use_counts(g)
        alloc_stream: dict[str, int] = {}  # activation storage -> schedule stream that allocated it
        recorded: set[tuple[str, int]] = set()
        events: dict[str, Any] = {}
        note = getattr(be, "note_launch", None)
        for op in self.schedule.launch_order:
            s = self.schedule.streams[op]
            stream = self.streams[s]
            node = g.node(op)
            for u in self.host_waits.get(op, ()):
                be.synchronize_event(events[u])  # the host blocks: it runs no further ahead
            for u in self.waits.get(op, ()):
                be.wait_event(stream, events[u])
            for x in dict.fromkeys(node.inputs):
                key = storage_key(g, x)
                if (
                    self.schedule.record_stream  # else the schedule's waits order the reuse
                    and key is not None
                    and alloc_stream.get(key, s) != s
                    and (key, s) not in recorded
                ):
                    be.record_stream(env[x], stream, x)
                    recorded.add((key, s))
            if delays_s:
                be.delay(stream, delays_s[op], op)
            if note is not None:
                note(stream, op)
            with be.use_stream(stream):
                outputs = call_node(node, env, be.device)
            if op in self.needs_event:
                events[op] = be.record_event(stream, op)
            store_and_release(
                g,
                node,
                outputs,
                env,
                remaining,
                tracker,
                lambda _v, key, s=s: alloc_stream.setdefault(key, s),
            )
            del outputs  # a dead output is freed now, as the replay frees it, not after the next op
        for s, stream in self.streams.items():
            be.wait_event(caller, be.record_event(stream, f"join s{s}"))
        outputs = tuple(env[v] for v in g.outputs)
        for v in dict.fromkeys(g.outputs):
            key = storage_key(g, v)
            if key is not None and key in alloc_stream and (key, -1) not in recorded:
                be.record_stream(env[v], caller, v)
                recorded.add((key, -1))
        return outputs


@dataclass(frozen=True)
class CudaMeasurement:
    """What ``measure_cuda`` measured: outputs, per-run times, live and allocator peaks."""

    outputs: tuple[Any, ...]
    times_ms: tuple[float, ...]
    peak_bytes: int  # live activation bytes, as the executor counted them
    max_memory_allocated_bytes: int
    max_memory_reserved_bytes: int
    resident_bytes: int  # allocated when the peak stats were reset (inputs, params, workspaces)


def measure_cuda(
    graph: Graph,
    schedule: StreamSchedule,
    env: dict[str, Any],
    *,
    repeat: int,
    warmup: int,
    cuda_graph: bool = False,
    chaos_seed: int | None = None,
    before_run: Callable[[], None] | None = None,
) -> CudaMeasurement:
    """Time ``repeat`` runs with CUDA events after ``warmup`` runs; read the allocator's peaks.

    Before the timed runs the cache is emptied and the peak stats reset, so
    ``max_memory_reserved`` describes a fresh allocator with the inputs and params
    already resident (they count in both figures; ``resident_bytes`` is what was
    allocated at that point). Without CUDA graphs the cuBLAS workspaces that earlier
    work left on any stream are released first, so the workspaces the timed runs hold
    are those of the schedule's own streams (what ``OpMemory`` models). ``chaos_seed``
    adds chaos delays (``torch.cuda._sleep`` on the op's stream; not with CUDA
    graphs). With ``cuda_graph`` the schedule is captured once (side streams forked
    from the capture stream) and replayed. ``before_run`` is called before every run,
    outside the timed region (it puts back what a training step updates in place).
    """
    import torch

    from streamplan.runtime.backend_api import TorchCudaBackend

    executor = StreamExecutor(graph, schedule, TorchCudaBackend())
    tracker = LiveBytes()
    outputs: tuple[Any, ...] = ()
    replay = None
    reset = before_run or (lambda: None)
    if cuda_graph:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        reset()
        with torch.cuda.stream(side):  # torch wants one eager run off the default stream first
            executor.launch(dict(env))
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        cg = torch.cuda.CUDAGraph()
        reset()  # a device runs nothing while capturing; a fake one may
        with torch.cuda.graph(cg):
            outputs = executor.launch(dict(env), tracker)
        replay = cg.replay
    for _ in range(warmup):
        reset()
        if replay is not None:
            replay()
        else:
            outputs = ()
            outputs = executor.launch(dict(env))
    torch.cuda.synchronize()
    if replay is None:
        outputs = ()  # warm-up outputs must not count as resident
        _clear_blas_workspaces()  # the timed runs make their streams' workspaces, as the replay does
        torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    resident_bytes = int(torch.cuda.memory_allocated())  # inputs, params, cuBLAS workspaces...
    times_ms: list[float] = []
    for r in range(max(1, repeat)):
        delays = chaos_delays_s(schedule, chaos_seed + r) if chaos_seed is not None else None
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if replay is None:
            outputs = ()
        reset()
        start.record()
        if replay is not None:
            replay()
        else:
            outputs = executor.launch(dict(env), tracker, delays)
        end.record()
        torch.cuda.synchronize()
        times_ms.append(start.elapsed_time(end))
    return CudaMeasurement(
        outputs=tuple(o.clone() if cuda_graph else o for o in outputs),
        times_ms=tuple(times_ms),
        peak_bytes=tracker.peak_bytes,
        max_memory_allocated_bytes=int(torch.cuda.max_memory_allocated()),
        max_memory_reserved_bytes=int(torch.cuda.max_memory_reserved()),
        resident_bytes=resident_bytes,
    )


def _clear_blas_workspaces() -> None:
    """Release the cuBLAS/cuBLASLt workspaces torch keeps per (handle, stream), where torch can."""
    import torch

    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is not None:
        torch.cuda.synchronize()
        clear()
