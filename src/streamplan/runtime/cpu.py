"""Execute a schedule on the CPU: one worker thread per schedule stream.

Each worker runs its stream's ops in launch order. Before an op it waits for the
``threading.Event`` of every op the schedule says it waits for; after an op that
someone waits for, it sets that op's event. Nothing else orders the threads: the
executor never waits for data by itself, so a schedule with a missing wait fails
loudly ("%v ran before its input %x was produced") or gives a wrong result, instead
of being silently repaired. ``chaos`` adds seeded random delays (0-2 ms) before
every op so that such races show up.

Values are released when their last consumer has finished (reference counts under
one lock); graph outputs are kept.

The first failure stops the run: an op that raises (reported with its stream), a
missing input, or the caller's Ctrl-C. Every worker checks for it before each op
and while waiting, so all threads have ended when ``execute_cpu`` returns or raises.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import torch

from streamplan.cost.timeline import OpSpan, Timeline
from streamplan.errors import ExecutionError
from streamplan.ir.graph import Graph, Node
from streamplan.ir.schedule import StreamSchedule
from streamplan.runtime.interpret import call_node
from streamplan.runtime.measure import AllocatedBytes, LiveBytes

CHAOS_MAX_DELAY_S = 0.002
WAIT_POLL_S = 0.05
DEADLOCK_TIMEOUT_S = 120.0
ABORT_JOIN_S = 30.0  # a worker stops after its current op; no op takes longer than this


def use_counts(graph: Graph) -> dict[str, int]:
    """How many releases each value gets before it is dropped (consumers; outputs pinned)."""
    counts: dict[str, int] = {}
    for n in graph.nodes:
        for v in dict.fromkeys(n.inputs):
            counts[v] = counts.get(v, 0) + 1
    for v in graph.outputs:
        counts[v] = counts.get(v, 0) + 1  # never reaches 0: outputs are returned
    return counts


def chaos_delays_s(schedule: StreamSchedule, seed: int) -> dict[str, float]:
    """A seeded random delay in [0, 2 ms] before each op."""
    rng = random.Random(seed)
    return {op: rng.uniform(0.0, CHAOS_MAX_DELAY_S) for op in schedule.launch_order}


def storage_key(graph: Graph, value_id: str) -> str | None:
    """The storage a value lives in if it is an activation storage (what peaks count), else None."""
    v = graph.values.get(value_id)
    if v is None:
        return None
    root = graph.values.get(v.storage)
    return v.storage if root is not None and root.kind == "activation" else None


def tensor_storage_bytes(t: Any) -> int:
    try:
        return int(t.untyped_storage().nbytes())
    except (AttributeError, RuntimeError):
        return 0


def store_and_release(
    graph: Graph,
    node: Node,
    outputs: tuple[Any, ...],
    env: dict[str, Any],
    remaining: dict[str, int],
    tracker: LiveBytes,
    on_store: Callable[[str, str], None] | None = None,
) -> None:
    """Put ``node``'s outputs in ``env``; drop its inputs whose last use this was, and dead outputs.

    ``on_store(value_id, storage)`` is called for each output in an activation storage.
    """
    for vid, t in zip(node.outputs, outputs, strict=True):
        env[vid] = t
        key = storage_key(graph, vid)
        if key is not None:
            tracker.produced(key, tensor_storage_bytes(t))
            if on_store is not None:
                on_store(vid, key)
    released = []
    for x in dict.fromkeys(node.inputs):
        remaining[x] -= 1
        if remaining[x] == 0 and graph.producer(x) is not None:
            released.append(x)
    released.extend(v for v in node.outputs if remaining.get(v, 0) == 0)  # nobody reads it
    for x in released:
        del env[x]
        key = storage_key(graph, x)
        if key is not None:
            tracker.dropped(key)


class _State:
    """Shared by the workers: the environment, use counts, events, and the first error."""

    def __init__(self, graph: Graph, schedule: StreamSchedule, env: dict[str, Any], tracker: LiveBytes):
        self.graph = graph
        self.schedule = schedule
        self.env = env
        self.remaining = use_counts(graph)
        self.lock = threading.Lock()
        self.tracker = tracker
        ordering = schedule.ordering_waits()  # host waits order the threads as they order streams
        self.events = {w.after: threading.Event() for w in ordering}
        self.waits: dict[str, list[str]] = {}
        for w in ordering:
            self.waits.setdefault(w.before, []).append(w.after)
        self.abort = threading.Event()
        self.errors: list[BaseException] = []
        self.t0 = time.perf_counter()
        self.spans: list[OpSpan] = []  # appended by the workers (list.append is atomic)

    def fail(self, error: BaseException) -> None:
        with self.lock:
            self.errors.append(error)
        self.abort.set()

    def take_inputs(self, node_id: str) -> dict[str, Any]:
        node = self.graph.node(node_id)
        with self.lock:
            for x in node.inputs:
                if x not in self.env:
                    raise ExecutionError(
                        f"%{node_id} ran before its input %{x} was produced: a wait is missing",
                        where=self.graph.name,
                        hint=f"add a wait on %{self.graph.producer(x)} before %{node_id} (run the verifier)",
                    )
            return {x: self.env[x] for x in node.inputs}

    def finish(self, node_id: str, outputs: tuple[Any, ...]) -> None:
        with self.lock:
            store_and_release(
                self.graph, self.graph.node(node_id), outputs, self.env, self.remaining, self.tracker
            )


def _worker(
    state: _State,
    stream: int,
    delays: dict[str, float],
    device: Any,
    grad: bool,
    allocations: AllocatedBytes | None,
) -> None:
    torch.set_grad_enabled(grad)  # grad mode is per thread: follow the caller's
    try:
        with allocations.mode() if allocations is not None else contextlib.nullcontext():
            _run_ops(state, stream, delays, device)
    except BaseException as e:  # noqa: BLE001 - handed to the main thread
        state.fail(e)


def _run_ops(state: _State, stream: int, delays: dict[str, float], device: Any) -> None:
    for op in state.schedule.ops_on_stream(stream):
        reached = time.perf_counter()
        for u in state.waits.get(op, ()):
            ev = state.events[u]
            waited = 0.0
            while not ev.wait(WAIT_POLL_S):
                if state.abort.is_set():
                    return
                waited += WAIT_POLL_S
                if waited > DEADLOCK_TIMEOUT_S:
                    raise ExecutionError(
                        f"%{op} waited {DEADLOCK_TIMEOUT_S:.0f} s for %{u}: deadlock",
                        where=state.graph.name,
                        hint="the schedule's waits cannot be met",
                    )
        if state.abort.is_set():
            return
        if delays:
            time.sleep(delays[op])
        inputs = state.take_inputs(op)
        start = time.perf_counter()
        try:
            outputs = call_node(state.graph.node(op), inputs, device)
        except Exception as e:  # name the op and its stream: the run stops here
            what = (
                e.message
                if isinstance(e, ExecutionError)
                else f"while executing %{op}: {type(e).__name__}: {e}"
            )
            raise ExecutionError(
                f"{what} (on stream {stream})",
                where=state.graph.name,
                hint=e.hint if isinstance(e, ExecutionError) else "the op itself failed",
            ) from e
        end = time.perf_counter()
        state.finish(op, outputs)
        state.spans.append(OpSpan(op, stream, *((t - state.t0) * 1e3 for t in (reached, start, end))))
        del inputs, outputs  # what finish released must not stay alive here while we wait
        ev = state.events.get(op)
        if ev is not None:
            ev.set()


def execute_cpu(
    graph: Graph,
    schedule: StreamSchedule,
    env: dict[str, Any],
    *,
    chaos: bool = False,
    seed: int = 0,
    tracker: LiveBytes | None = None,
    allocations: AllocatedBytes | None = None,
    timeline: list[Timeline] | None = None,
) -> tuple[Any, ...]:
    """Run ``schedule`` once on threads; ``env`` holds the leaf tensors (it is consumed).

    Returns the outputs in ``graph.outputs`` order. Raises ``ExecutionError`` for the
    first failure (an op's own error, or an input not yet produced). ``allocations``
    counts every storage the kernels allocate (each worker runs under its mode).
    ``timeline`` receives the measured ``Timeline`` (per op: when its thread reached
    it, started and ended it, in ms from the start; the same form as a simulation).
    """
    tracker = tracker if tracker is not None else LiveBytes()
    state = _State(graph, schedule, env, tracker)
    delays = chaos_delays_s(schedule, seed) if chaos else {}
    streams = sorted(set(schedule.streams[op] for op in schedule.launch_order))
    threads = [
        threading.Thread(
            target=_worker,
            args=(state, s, delays, "cpu", torch.is_grad_enabled(), allocations),
            name=f"streamplan-s{s}",
            daemon=True,
        )
        for s in streams
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    except BaseException:  # Ctrl-C (KeyboardInterrupt) in the caller: stop the workers first
        state.abort.set()
        for t in threads:
            if t.ident is not None:  # the interrupt may come before every worker has started
                t.join(ABORT_JOIN_S)
        raise
    if state.errors:
        raise state.errors[0]
    if timeline is not None:
        timeline.append(_measured_timeline(state, schedule))
    return tuple(env[v] for v in graph.outputs)


def _measured_timeline(state: _State, schedule: StreamSchedule) -> Timeline:
    order = {op: i for i, op in enumerate(schedule.launch_order)}
    spans = tuple(sorted(state.spans, key=lambda s: order[s.op]))
    busy: dict[int, float] = {}
    for s in spans:
        busy[s.stream] = busy.get(s.stream, 0.0) + (s.end_ms - s.start_ms)
    return Timeline(spans, max((s.end_ms for s in spans), default=0.0), busy, "cpu (measured)")
