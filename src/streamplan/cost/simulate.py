"""Discrete-event simulation of a ``StreamSchedule`` under a cost model.

Semantics (``docs/simulator.md``):

- the host issues ops in launch order, paying each op's launch overhead, and never
  blocks on the device; an op can start once its launch is done;
- each stream runs its ops in launch order, one at a time; streams beyond the
  device's hardware queues (8 by default) share a queue and so serialise in issue
  order, as CUDA's connections do;
- a wait blocks its stream until the op it names has finished; a host wait blocks the
  host (and so every later launch) until the op it names has finished;
- with CUDA graphs (``DeviceFacts.cuda_graphs``) the host issues one graph launch
  before anything runs and nothing per op; cross-stream waits are graph edges with
  a device-side latency (the ops' per-node overhead is in their times);
- ops running at once contend for the device (``cost.contention``): each running op
  demands a share of the SM slots (its occupancy), of the DRAM bandwidth and, on the
  CPU runtime, of the interpreter lock; each resource is shared max-min fairly and
  co-runners' memory traffic slows an op further (the profile's ``interference``).
  An op with standalone time T progresses at ``rate / T`` per ms; the rates of the
  running ops are recomputed whenever one starts or ends, so each event costs
  O(q log q) for q ops running at once (at most one per hardware queue), and a
  stretch where one op runs alone costs O(1);
- collectives are not SM-bound: they demand the links between devices (``Demand.link``),
  shared max-min fairly among the collectives in flight, and leave the SMs to the
  kernels running beside them.
"""

from __future__ import annotations

import contextlib
import gc
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from streamplan.cost.contention import Demand, Supply, corun_rates
from streamplan.cost.devices import DeviceProfile
from streamplan.cost.opcost import CostModel, DeviceFacts, resolve_cost
from streamplan.cost.timeline import OpSpan, Timeline
from streamplan.errors import ScheduleError
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule, check_structure

_EPS = 1e-12


@dataclass(frozen=True, slots=True)
class OpCosts:
    """Per-op cost facts in launch order (what the event loop consumes).

    ``demands`` (what each op asks of the device while it runs) may be left empty:
    each op then demands its occupancy of the SMs and nothing else.
    """

    time_ms: tuple[float, ...]
    occupancy: tuple[float, ...]
    launch_ms: tuple[float, ...]
    demands: tuple[Demand, ...] = ()

    def demand_list(self) -> list[Demand]:
        if self.demands:
            return list(self.demands)
        return [Demand(sm=o) for o in self.occupancy]


def op_costs(graph: Graph, ops: Sequence[str], cost: CostModel) -> OpCosts:
    """Standalone time, occupancy, launch overhead and demand of ``ops`` (view ops: zero time)."""
    times, occ, launch, demands = [], [], [], []
    idle = Demand(sm=0.0)
    for op in ops:
        node = graph.node(op)
        t, o, la, d = cost.op_facts(graph, node)
        t = max(0.0, float(t))
        times.append(t)
        o = min(1.0, max(0.0, float(o))) if t > 0 else 0.0
        occ.append(o)
        launch.append(max(0.0, float(la)))
        if t <= 0:
            d = idle
        elif d.link > 0:  # a collective: on the links, whatever its occupancy says
            d = Demand(sm=min(1.0, max(0.0, d.sm)), link=min(1.0, d.link))
        elif d.sm != o or not (0.0 <= d.dram <= 1.0 and 0.0 <= d.lock <= 1.0):
            d = Demand(sm=o, dram=min(1.0, max(0.0, d.dram)), lock=min(1.0, max(0.0, d.lock)))
        demands.append(d)
    return OpCosts(tuple(times), tuple(occ), tuple(launch), tuple(demands))


def critical_path_ms(graph: Graph, cost: CostModel | str = "v100") -> float:
    """Longest dependency path of standalone op times (a lower bound on any makespan)."""
    model = resolve_cost(cost)
    finish = [0.0] * len(graph.nodes)
    for i, (node, preds) in enumerate(zip(graph.nodes, graph.pred_positions(), strict=True)):
        ready = max((finish[j] for j in preds), default=0.0)
        finish[i] = ready + max(0.0, model.op_time_ms(graph, node))
    return max(finish, default=0.0)


def simulate(
    graph: Graph,
    schedule: StreamSchedule,
    cost: CostModel | str | DeviceProfile = "v100",
    *,
    max_queues: int | None = None,
) -> Timeline:
    """Predict the timeline of ``schedule`` on a device (a name such as ``"v100"`` or a ``CostModel``).

    ``max_queues`` overrides the device's hardware queue count (streams beyond it
    share queues). Raises ``ScheduleError`` when the schedule does not match the
    graph, waits on an op launched later, or deadlocks.
    """
    with gc_paused():
        return _simulate(graph, schedule, resolve_cost(cost), max_queues)


@contextlib.contextmanager
def gc_paused():
    """The cyclic garbage collector paused for a computation that allocates millions of small
    objects which all stay alive until it returns and make almost no reference cycles (the
    simulator, the remat search): the collector would rescan them again and again
    (super-linear at 100k ops)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _simulate(graph: Graph, schedule: StreamSchedule, model: CostModel, max_queues: int | None) -> Timeline:
    order = schedule.launch_order
    index = _launch_index(graph, schedule)
    costs = op_costs(graph, order, model)
    facts = model.device_facts
    if max_queues is None:
        max_queues = facts.max_queues or len(order) or 1
    stream_ids = sorted(set(schedule.streams[op] for op in order))
    slot = {s: k % max_queues for k, s in enumerate(stream_ids)}
    queue = [slot[schedule.streams[op]] for op in order]
    waits: list[list[int]] = [[] for _ in order]
    # a CUDA graph is launched whole: what the host would wait for becomes edges of the graph
    device_waits = schedule.ordering_waits() if facts.cuda_graphs else schedule.waits
    for w in device_waits:
        waits[index[w.before]].append(index[w.after])
    host_waits: list[list[int]] | None = None
    if schedule.host_waits and not facts.cuda_graphs:
        host_waits = [[] for _ in order]
        for w in schedule.host_waits:
            host_waits[index[w.before]].append(index[w.after])
    costs = _with_event_costs(costs, waits, facts, host_waits or ())
    if facts.cuda_graphs and costs.launch_ms:
        costs = _with_graph_launch(costs, facts.graph_launch_ms)
    launch_done, start, end = run_events(costs, queue, waits, facts.supply, host_waits)
    stuck = [order[i] for i in range(len(order)) if math.isnan(end[i])]
    if stuck:
        raise ScheduleError(
            f"schedule deadlocks: {len(stuck)} ops never run, first {stuck[0]!r}",
            where=schedule.policy,
            hint="a wait names an op that is queued behind the waiting op on one hardware queue",
        )
    spans = tuple(
        OpSpan(op, schedule.streams[op], launch_done[i], start[i], end[i]) for i, op in enumerate(order)
    )
    busy: dict[int, float] = {}
    for s in spans:
        busy[s.stream] = busy.get(s.stream, 0.0) + (s.end_ms - s.start_ms)
    makespan = max((s.end_ms for s in spans), default=0.0)
    meta = {
        "policy": schedule.policy,
        "queues": len(set(queue)),
        "sum_op_ms": sum(costs.time_ms),
        "launch_ms": sum(costs.launch_ms),
        "cuda_graphs": facts.cuda_graphs,
    }
    return Timeline(spans, makespan, busy, model.device_name, meta)


def _with_event_costs(
    costs: OpCosts,
    waits: Sequence[Sequence[int]],
    facts: DeviceFacts,
    host_waits: Sequence[Sequence[int]] = (),
) -> OpCosts:
    """Charge events: the host records and waits (launch time), the released stream resumes late
    (a host wait costs the host a wait call too; its resumption is the host's own)."""
    rec, wait, resume = facts.event_record_ms, facts.event_wait_ms, facts.event_resume_ms
    if not (rec or wait or resume) or not (any(waits) or any(host_waits)):
        return costs
    launch, times = list(costs.launch_ms), list(costs.time_ms)
    recorded = {u for ws in (*waits, *host_waits) for u in ws}
    for u in recorded:
        launch[u] += rec
    for i, ws in enumerate(waits):
        if ws:
            launch[i] += wait * len(ws)
            if times[i] > 0:
                times[i] += resume
    for i, ws in enumerate(host_waits):
        launch[i] += wait * len(ws)
    return OpCosts(tuple(times), costs.occupancy, tuple(launch), costs.demands)


def _with_graph_launch(costs: OpCosts, graph_launch_ms: float) -> OpCosts:
    """The one graph launch comes before the first op can start (the host issues nothing else)."""
    launch = list(costs.launch_ms)
    launch[0] += graph_launch_ms
    return OpCosts(costs.time_ms, costs.occupancy, tuple(launch), costs.demands)


def run_events(
    costs: OpCosts,
    queue: Sequence[int],
    waits: Sequence[Sequence[int]],
    supply: Supply = Supply(),
    host_waits: Sequence[Sequence[int]] | None = None,
) -> tuple[list[float], list[float], list[float]]:
    """The event loop on plain arrays (ops numbered in launch order).

    ``queue[i]`` is op i's hardware queue, ``waits[i]`` the ops it waits for (each
    launched before i); ``supply`` is what running ops share (``cost.contention``);
    ``host_waits[i]`` the ops the host waits for before launching i (None: none).
    Returns (launch done, start, end) per op; ops that never ran (deadlock) have NaN
    times.
    """
    n = len(queue)
    times = costs.time_ms
    demands = costs.demand_list()
    if host_waits is None:  # the host never blocks: every launch time is known up front
        launch_done, t = [], 0.0
        for x in costs.launch_ms:
            t += x
            launch_done.append(t)
    else:
        launch_done = [math.nan] * n
    host_t = 0.0
    start = [math.nan] * n
    end = [math.nan] * n
    done = bytearray(n)
    nq = (max(queue) + 1) if n else 0
    pending: list[deque[int]] = [deque() for _ in range(nq)]
    running = [-1] * nq
    blocked_on: dict[int, list[int]] = {}
    active: list[int] = []  # ops running now
    left: dict[int, float] = {}  # standalone ms of work each running op has left
    rate: dict[int, float] = {}  # its progress per ms (1.0 = as fast as alone)
    now = 0.0
    next_launch = 0
    changed = False

    def launch_time() -> float:
        """When the host finishes the next launch (inf while a host wait is unmet)."""
        if next_launch >= n:
            return math.inf
        if host_waits is None:
            return launch_done[next_launch]
        ready = host_t
        for u in host_waits[next_launch]:
            if not done[u]:
                return math.inf
            ready = max(ready, end[u])
        return ready + costs.launch_ms[next_launch]

    def try_start(q: int, retry: list[int]) -> None:
        nonlocal changed
        while running[q] < 0 and pending[q]:
            i = pending[q][0]
            for w in waits[i]:
                if not done[w]:
                    blocked_on.setdefault(w, []).append(q)
                    return
            pending[q].popleft()
            start[i] = now
            if times[i] <= 0.0:
                end[i] = now
                done[i] = 1
                retry.extend(blocked_on.pop(i, ()))
                continue
            running[q] = i
            active.append(i)
            left[i] = times[i]
            changed = True

    while next_launch < n or active:
        if changed:
            if len(active) == 1:
                rate[active[0]] = min(1.0, _alone_rate(demands[active[0]], supply))
            else:
                for i, r in zip(active, corun_rates([demands[i] for i in active], supply), strict=True):
                    rate[i] = r
            changed = False
        t_launch = launch_time()
        if t_launch == math.inf and not active:
            break  # the host waits for an op that can never run: deadlock
        first, dt_finish = -1, math.inf
        for i in active:
            dt = left[i] / rate[i]
            if dt < dt_finish:
                first, dt_finish = i, dt
        retry: list[int] = []
        if t_launch <= now + dt_finish:
            dt = t_launch - now
            for i in active:
                left[i] -= dt * rate[i]
            now = t_launch
            launch_done[next_launch] = host_t = t_launch
            q = queue[next_launch]
            pending[q].append(next_launch)
            next_launch += 1
            retry.append(q)
        else:
            now += dt_finish
            finished = []
            for i in active:
                left[i] -= dt_finish * rate[i]
                if i == first or left[i] <= _EPS * max(1.0, times[i]):
                    finished.append(i)
            for i in finished:
                active.remove(i)
                del left[i], rate[i]
                end[i] = now
                done[i] = 1
                q = queue[i]
                running[q] = -1
                retry.append(q)
                retry.extend(blocked_on.pop(i, ()))
            changed = True
        while retry:
            try_start(retry.pop(), retry)
    return launch_done, start, end


def _alone_rate(d: Demand, supply: Supply) -> float:
    """An op running alone is slowed only where it asks for more than the device offers."""
    r = 1.0
    for asked, offered in (
        (d.sm, supply.sm),
        (d.dram, supply.dram),
        (d.lock, supply.lock),
        (d.link, supply.link),
    ):
        if asked > offered > 0:
            r = min(r, offered / asked)
    return r


def _launch_index(graph: Graph, schedule: StreamSchedule) -> dict[str, int]:
    """Launch index of every op, once the schedule is known to be structurally sound."""
    check_structure(graph, schedule)
    return {op: i for i, op in enumerate(schedule.launch_order)}
