"""What the host does at each launch of a schedule: the static plan a generated module follows.

The rules are those of the CUDA executor (``runtime/cuda.py``), decided here once,
ahead of time, instead of at every run:

* before op v is launched, the host blocks on the event of every op it waits for before
  launching v (``host_waits``), then v's stream waits for the event of every op v waits for;
* the first time a storage allocated on one stream is used by an op on another,
  the tensor is handed to that stream's allocator queue (``record_stream``) before
  the op is launched, so that its block is not reused before that stream is done
  (unless the schedule says ``record_stream=False``: its waits then order the reuse);
* after op u is launched, an event is recorded on u's stream if some op (or the host)
  waits for u;
* after each launch, every value whose last reader that was (in launch order) is
  dropped, and so are outputs nobody reads: the frees of the host-order memory
  analysis; graph outputs are kept, and those made on a side stream are handed to
  the caller's stream, which reads them afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamplan.ir.collectives import is_collective
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule, check_structure


@dataclass(frozen=True, slots=True)
class LaunchStep:
    """One launch: ``op`` on ``stream``, what precedes it and what follows it."""

    op: str
    stream: int
    waits_for: tuple[str, ...]  # ops whose events the stream waits for first
    record_on_stream: tuple[str, ...]  # values handed to this stream's allocator queue first
    records_event: bool  # an event is recorded after the op (someone waits for it)
    frees: tuple[str, ...]  # values dropped right after the launch
    host_waits_for: tuple[str, ...] = ()  # ops whose events the host blocks on before the launch


@dataclass(frozen=True)
class LaunchPlan:
    """Every launch in order, the streams used, the outputs handed to the caller's stream, and
    the streams that run collectives (in order: each gets a process group of its own)."""

    steps: tuple[LaunchStep, ...]
    streams: tuple[int, ...]
    outputs_to_caller: tuple[str, ...]
    communication_streams: tuple[int, ...] = ()


def _activation_storage(graph: Graph, value_id: str) -> str | None:
    """The storage a value lives in when it is an activation (what the allocator frees)."""
    v = graph.values.get(value_id)
    if v is None:
        return None
    root = graph.values.get(v.storage)
    return v.storage if root is not None and root.kind == "activation" else None


def launch_plan(graph: Graph, schedule: StreamSchedule) -> LaunchPlan:
    """The plan of ``schedule`` (structurally checked against ``graph``)."""
    check_structure(graph, schedule)
    waits = schedule.waits_before()
    host_waits = schedule.host_waits_before()
    waited = {w.after for w in (*schedule.waits, *schedule.host_waits)}
    remaining: dict[str, int] = {}
    for n in graph.nodes:
        for v in dict.fromkeys(n.inputs):
            remaining[v] = remaining.get(v, 0) + 1
    for v in graph.outputs:
        remaining[v] = remaining.get(v, 0) + 1  # never reaches 0: outputs are returned
    alloc_stream: dict[str, int] = {}
    recorded: set[tuple[str, int]] = set()
    steps = []
    for op in schedule.launch_order:
        s = schedule.streams[op]
        node = graph.node(op)
        handed = []
        for x in dict.fromkeys(node.inputs):
            key = _activation_storage(graph, x)
            if (
                schedule.record_stream
                and key is not None
                and alloc_stream.get(key, s) != s
                and (key, s) not in recorded
            ):
                handed.append(x)
                recorded.add((key, s))
        for y in node.outputs:
            key = _activation_storage(graph, y)
            if key is not None:
                alloc_stream.setdefault(key, s)
        frees = []
        for x in dict.fromkeys(node.inputs):
            remaining[x] -= 1
            if remaining[x] == 0 and graph.producer(x) is not None:
                frees.append(x)
        frees.extend(y for y in node.outputs if remaining.get(y, 0) == 0)
        steps.append(
            LaunchStep(
                op,
                s,
                tuple(waits.get(op, ())),
                tuple(handed),
                op in waited,
                tuple(frees),
                tuple(host_waits.get(op, ())),
            )
        )
    to_caller = []
    caller_recorded: set[str] = set()
    for v in dict.fromkeys(graph.outputs):
        key = _activation_storage(graph, v)
        if key is not None and key in alloc_stream and key not in caller_recorded:
            to_caller.append(v)
            caller_recorded.add(key)
    streams = tuple(sorted({schedule.streams[op] for op in schedule.launch_order}))
    # as runtime.collectives.Communicator numbers them: one process group per stream, in order
    comm = tuple(sorted({schedule.streams[n.id] for n in graph.nodes if is_collective(n)}))
    return LaunchPlan(tuple(steps), streams, tuple(to_caller), comm)
