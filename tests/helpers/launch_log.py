"""An independent check of what the CUDA host loop asked of the device (the fake backend's log).

It knows nothing of ``runtime/cuda.py`` or of the schedule's waits. It replays the
log with CUDA's ordering rules only:

* each stream runs its items (launches, event records, event waits, delays) in
  the order they were issued;
* a ``wait_event`` makes everything issued later on that stream wait for what
  preceded the event's record on the recording stream.

Vector clocks give, for every launch, which items of every stream are certain to
have finished before it starts. Against that, and the graph alone, it checks:

1. **data**: every value an op reads was produced by a launch that happens before it;
2. **storage order**: within one storage (views and in-place writes included),
   accesses that the graph's own order puts around a write stay ordered on the device
   (read-after-write, write-after-read, write-after-write);
3. **inputs and outputs**: every launch happens after the caller's stream made the
   inputs (the fork), and the caller's stream, where results are read, ends up after
   every item issued on every stream (the join; CUDA-graph capture needs every
   stream that joined the capture to be joined back);
4. **frees**: a storage made on one stream and used on another was handed to the
   allocator for that stream (``record_stream``) before the first such use; outputs
   made on a side stream are also recorded on the caller's stream.

``check_launch_log`` returns the problems found as sentences (empty when sound).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from streamplan.ir.graph import Graph

CALLER = "default"


def check_launch_log(graph: Graph, calls: list[tuple[Any, ...]]) -> list[str]:
    clocks: dict[str, dict[str, int]] = defaultdict(dict)  # stream -> what it has seen of each stream
    counts: dict[str, int] = defaultdict(int)  # items issued per stream
    event_clock: dict[int, dict[str, int]] = {}
    launch_clock: dict[str, dict[str, int]] = {}
    launch_stream: dict[str, str] = {}
    launch_index: dict[str, int] = {}
    recorded: dict[str, list[tuple[str, int]]] = defaultdict(list)  # value -> (stream, at call index)

    def issue(stream: str) -> dict[str, int]:
        counts[stream] += 1
        clocks[stream][stream] = counts[stream]
        return dict(clocks[stream])

    inputs_ready = issue(CALLER)  # the caller made the inputs before the run
    for i, call in enumerate(calls):
        kind = call[0]
        if kind == "launch":
            _, stream, op = call
            launch_clock[op] = issue(stream)
            launch_stream[op] = stream
            launch_index[op] = i
        elif kind == "record_event":
            _, stream, event_id, _label = call
            event_clock[event_id] = issue(stream)
        elif kind == "wait_event":
            _, stream, event_id, _label = call
            issue(stream)
            seen = clocks[stream]
            for s, n in event_clock[event_id].items():
                seen[s] = max(seen.get(s, 0), n)
        elif kind == "delay":
            issue(call[1])
        elif kind == "record_stream":
            recorded[call[2]].append((call[1], i))
    outputs_read = issue(CALLER)

    def before(op: str, clock: dict[str, int]) -> bool:
        return launch_clock[op][launch_stream[op]] <= clock.get(launch_stream[op], 0)

    problems: list[str] = []
    missing = [n.id for n in graph.nodes if n.id not in launch_clock]
    if missing:
        problems.append(f"never launched: {', '.join(missing[:5])}")
        return problems
    # 1. data
    for node in graph.nodes:
        for x in dict.fromkeys(node.inputs):
            p = graph.producer(x)
            if p is not None and not before(p, launch_clock[node.id]):
                problems.append(f"{node.id} reads {x} but may start before its producer {p} ends")
    # 2. storage order, against the graph's own (sequential) order
    problems += _storage_order_problems(graph, launch_clock, before)
    # 3. fork and join
    for op, clock in launch_clock.items():
        if clock.get(CALLER, 0) < inputs_ready[CALLER]:
            problems.append(f"{op} may start before the caller's stream made the inputs (no fork)")
    for stream, n in counts.items():
        if stream != CALLER and outputs_read.get(stream, 0) < n:
            problems.append(f"stream {stream} is not joined back to the caller's stream at the end")
    # 4. frees of cross-stream storages
    problems += _record_stream_problems(graph, launch_stream, launch_index, recorded)
    return problems


def _accesses(graph: Graph) -> dict[str, list[tuple[str, bool]]]:
    """storage -> (node, writes?) in graph order; a producer writes the storage it creates."""
    acc: dict[str, list[tuple[str, bool]]] = defaultdict(list)
    for node in graph.nodes:
        touched: dict[str, bool] = {}
        for x in node.inputs:
            touched.setdefault(graph.storage_of(x), False)
        for x in node.mutates:
            touched[graph.storage_of(x)] = True
        for y in node.outputs:
            if not graph.values[y].is_alias:
                touched[graph.storage_of(y)] = True
        for sid, writes in touched.items():
            acc[sid].append((node.id, writes))
    return acc


def _storage_order_problems(graph: Graph, launch_clock, before) -> list[str]:
    problems = []
    for sid, accesses in _accesses(graph).items():
        last_write: str | None = None
        reads_since: list[str] = []
        for op, writes in accesses:
            if last_write is not None and not before(last_write, launch_clock[op]):
                problems.append(f"{op} touches storage {sid} but may start before {last_write} wrote it")
            if writes:
                for r in reads_since:
                    if not before(r, launch_clock[op]):
                        problems.append(f"{op} writes storage {sid} while {r} may still read it")
                last_write, reads_since = op, []
            else:
                reads_since.append(op)
    return problems


def _record_stream_problems(graph: Graph, launch_stream, launch_index, recorded) -> list[str]:
    problems = []
    home: dict[str, str] = {}
    for node in graph.nodes:
        for y in node.outputs:
            root = graph.values[graph.storage_of(y)]
            if root.kind == "activation":
                home.setdefault(root.id, launch_stream[node.id])
    values_of: dict[str, list[str]] = defaultdict(list)
    for vid in graph.values:
        values_of[graph.storage_of(vid)].append(vid)

    def recorded_before(sid: str, stream: str, index: int) -> bool:
        return any(s == stream and i < index for v in values_of[sid] for s, i in recorded.get(v, ()))

    for node in graph.nodes:
        s = launch_stream[node.id]
        for x in dict.fromkeys(node.inputs):
            sid = graph.storage_of(x)
            if sid in home and home[sid] != s and not recorded_before(sid, s, launch_index[node.id]):
                problems.append(
                    f"{node.id} on {s} uses {x} (storage made on {home[sid]}) with no record_stream first"
                )
    for v in dict.fromkeys(graph.outputs):
        sid = graph.storage_of(v)
        if sid in home and not recorded_before(sid, CALLER, 1 << 62):
            problems.append(f"output {v} (made on {home[sid]}) is not recorded on the caller's stream")
    return problems
