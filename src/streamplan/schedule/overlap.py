"""``overlap``: compute on one stream, collectives on communication streams, as FSDP and DDP run.

The rank program of a parallel plan (``streamplan.parallel``) marks its collectives;
this policy schedules it the way the frameworks do:

- every op runs on the compute stream (0) in graph order, except all-gathers, which run
  on the all-gather stream (1), and the reduction nodes (``attrs["comm_stream"]``:
  gradient flattening, reduce-scatters, all-reduces) on the reduction stream (2);
- **prefetch**: the all-gather of the k-th unit of a phase (forward or backward) is
  launched right before the first op that reads the (k - depth)-th unit's gathered
  parameters (``forward_prefetch``, ``backward_prefetch``; depth 0: right before its own
  unit); the first ones are launched when the phase starts;
- **in-flight limit** (``in_flight``, FSDP1's ``limit_all_gathers``): the host keeps a
  queue of *free events*, one recorded when it launches the last user of each gathered
  buffer; before launching an all-gather, if the queue holds ``in_flight`` events or more,
  it waits for the oldest (a host wait). ``None``: no host waits, unbounded run-ahead;
- **record_stream** (True): cross-stream frees are held by the caching allocator until the
  using streams are done. False: instead, the first op launched on a buffer's home
  stream after the host frees it waits for its last uses on the other streams (FSDP2's
  event waits), so the block is reusable at once.

The knobs default to the plan recorded in the graph (``meta["parallel"]``), and can be
overridden as policy options (``OverlapOptions``; ``"plan"``: the plan's value). Data
dependencies across streams get the usual waits.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass

from streamplan.ir.collectives import is_collective
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule, Wait
from streamplan.schedule.context import ScheduleContext
from streamplan.schedule.events import derive_waits

COMPUTE, UNSHARD, REDUCE = 0, 1, 2
KNOBS = ("forward_prefetch", "backward_prefetch", "in_flight", "record_stream")
DEFAULTS = {"forward_prefetch": 1, "backward_prefetch": 1, "in_flight": 2, "record_stream": True}


FROM_PLAN = "plan"


@dataclass(frozen=True)
class OverlapOptions:
    """The knobs of ``overlap``; each ``"plan"`` (the default) takes the value of the plan the
    rank program was made with. ``in_flight`` None: no host waits (unbounded run-ahead)."""

    forward_prefetch: int | str = FROM_PLAN
    backward_prefetch: int | str = FROM_PLAN
    in_flight: int | None | str = FROM_PLAN
    record_stream: bool | str = FROM_PLAN

    def __post_init__(self) -> None:
        for name in ("forward_prefetch", "backward_prefetch"):
            v = getattr(self, name)
            if v != FROM_PLAN and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ValueError(f"{name} must be an integer >= 0 or 'plan', got {v!r}")
        v = self.in_flight
        if v not in (FROM_PLAN, None) and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ValueError(f"in_flight must be an integer >= 1, None or 'plan', got {v!r}")
        if self.record_stream not in (FROM_PLAN, True, False):
            raise ValueError(f"record_stream must be true, false or 'plan', got {self.record_stream!r}")


def knobs_of(graph: Graph, options: OverlapOptions | None = None) -> dict:
    """The overlap knobs: policy options, else the graph's plan, else ``DEFAULTS``."""
    plan = (graph.meta.get("parallel") or {}).get("plan", {})
    out = {k: plan.get(k, v) for k, v in DEFAULTS.items()}
    if options is not None:
        out.update({k: getattr(options, k) for k in KNOBS if getattr(options, k) != FROM_PLAN})
    return out


def schedule_overlap(graph: Graph, ctx: ScheduleContext) -> StreamSchedule:
    knobs = knobs_of(graph, ctx.options_as(OverlapOptions))
    streams = {n.id: _stream_of(n) for n in graph.nodes}
    if ctx.max_streams < 3:
        streams = {op: min(s, ctx.max_streams - 1) for op, s in streams.items()}
    order = _launch_order(graph, knobs["forward_prefetch"], knobs["backward_prefetch"])
    host_waits = _in_flight_waits(graph, order, knobs["in_flight"])
    extra = {} if knobs["record_stream"] else _reuse_waits(graph, order, streams)
    waits = derive_waits(graph, order, streams, extra_deps=extra)
    return StreamSchedule(
        tuple(order),
        streams,
        waits,
        "overlap",
        {"knobs": dict(knobs)},
        host_waits=host_waits,
        record_stream=bool(knobs["record_stream"]),
    )


def _stream_of(node) -> int:
    if node.op == "comm.all_gather":
        return UNSHARD
    if is_collective(node) or node.attrs.get("comm_stream") == "reduce":
        return REDUCE
    return COMPUTE


def _launch_order(graph: Graph, forward_prefetch: int, backward_prefetch: int) -> list[str]:
    """Graph order with each all-gather moved to right before its prefetch anchor."""
    gathers = [n for n in graph.nodes if n.op == "comm.all_gather"]
    if not gathers:
        return list(graph.node_ids)
    by_phase: dict[str, list] = {}
    for n in gathers:
        by_phase.setdefault(str(n.attrs.get("phase", "forward")), []).append(n)
    first_user: dict[str, str] = {}  # all-gather -> first op reading its buffer (views aside)
    readers = _buffer_readers(graph)
    for n in gathers:
        first_user[n.id] = readers.get(graph.storage_of(n.outputs[0]), n.id)
    anchor: dict[str, str] = {}  # op -> all-gathers launched right before it
    move: dict[str, list[str]] = {}
    step = graph.meta.get("training") or {}
    starts = {"forward": graph.node_ids[0], "backward": step.get("first_backward_op") or graph.node_ids[0]}
    for phase, seq in by_phase.items():
        depth = forward_prefetch if phase == "forward" else backward_prefetch
        for k, n in enumerate(seq):
            target = first_user[seq[k - depth].id] if k - depth >= 0 else starts.get(phase, n.id)
            # never later than where the graph has it (right before the views into its buffer)
            if graph.position(target) > graph.position(n.id):
                target = n.id
            anchor[n.id] = target
    moved = set(anchor)
    ids = graph.node_ids
    for n in gathers:
        at = graph.position(anchor[n.id])
        while ids[at] in moved:  # anchored to a gather (itself too): to the next op that stays
            at += 1
        move.setdefault(ids[at], []).append(n.id)
    order: list[str] = []
    for op in graph.node_ids:
        if op in moved:
            continue
        order.extend(move.get(op, ()))
        order.append(op)
    return order


def _buffer_readers(graph: Graph) -> dict[str, str]:
    """For each storage, the first op (in graph order) that reads it and is not a view into it."""
    out: dict[str, str] = {}
    for n in graph.nodes:
        if "unflatten" in n.attrs:
            continue
        for v in n.inputs:
            out.setdefault(graph.storage_of(v), n.id)
    return out


def _in_flight_waits(graph: Graph, order: list[str], limit: int | None) -> tuple[Wait, ...]:
    """FSDP1's rate limiter: a free event per gathered buffer; before an all-gather, with
    ``limit`` events queued, the host waits for the oldest."""
    if limit is None:
        return ()
    gathered = {graph.storage_of(n.outputs[0]) for n in graph.nodes if n.op == "comm.all_gather"}
    if not gathered:
        return ()
    at = {op: i for i, op in enumerate(order)}
    last_user: dict[str, str] = {}
    for n in graph.nodes:
        for v in (*n.inputs, *n.outputs):
            sid = graph.storage_of(v)
            if sid in gathered and (sid not in last_user or at[n.id] > at[last_user[sid]]):
                last_user[sid] = n.id
    frees_at: dict[str, list[str]] = {}
    for sid, op in last_user.items():
        frees_at.setdefault(op, []).append(sid)
    queue: deque[str] = deque()
    waits = []
    for op in order:
        if graph.node(op).op == "comm.all_gather" and len(queue) >= limit:
            waits.append(Wait(queue.popleft(), op))
        for _ in frees_at.get(op, ()):
            queue.append(op)  # the event recorded on the compute stream at the free
    return tuple(waits)


def _reuse_waits(graph: Graph, order: list[str], streams: dict[str, int]) -> dict[str, list[str]]:
    """Without record_stream: the first op launched on a buffer's home stream after its free
    waits for its uses on other streams, so the caching allocator may hand the block out again."""
    at = {op: i for i, op in enumerate(order)}
    users: dict[str, list[str]] = {}
    for n in graph.nodes:
        for v in dict.fromkeys((*n.outputs, *n.inputs, *n.mutates)):
            users.setdefault(graph.storage_of(v), []).append(n.id)
    outputs = {graph.storage_of(v) for v in graph.outputs}
    by_stream: dict[int, list[int]] = {}
    for i, op in enumerate(order):
        by_stream.setdefault(streams[op], []).append(i)
    extra: dict[str, list[str]] = {}
    for sid, ops in users.items():
        creator = graph.producer(sid)
        if creator is None or sid in outputs or graph.values[sid].kind != "activation":
            continue
        home = streams[creator]
        elsewhere = [u for u in ops if streams[u] != home]
        if not elsewhere:
            continue
        freed = max(at[u] for u in ops)
        line = by_stream[home]
        k = bisect.bisect_right(line, freed)
        if k < len(line):
            nxt = order[line[k]]
            extra.setdefault(nxt, []).extend(u for u in elsewhere if at[u] < at[nxt])
    return extra
