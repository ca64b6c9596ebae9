"""The exact budget formulation (OR-Tools CP-SAT) for small graphs: proven optimal, or a proven gap.

The model, stated:

- **latency**: every op takes its standalone time under the context's cost model
  (rounded up to ticks of about 1/20000 of the total; an op that launches nothing
  takes one tick); at most ``max_streams`` ops run at once; ops running together
  never need more than the whole device (their occupancies sum to at most 1, so none
  slows another down); host launches and events cost nothing. The objective is the
  plan's makespan.
- **memory**: a counted storage is live from its creator's start to the end of its
  last user (graph outputs: to the end); at every instant the live bytes plus the
  resident inputs/params counted stay within the budget.

The plan becomes a schedule whose happens-before is exactly the plan's interval
order: launched by start time, streams by greedy interval colouring (at most
``max_streams``), and a wait wherever one op ends before another starts on another
stream (the redundant ones dropped). For an interval order, every realisable
instant of every timing has at most the live bytes of some instant of the plan (take
the latest start among the started ops: everything that ended before it has
finished), so the schedule's worst case over all timings is within the budget. With
no launch or event costs, its simulated makespan is at most the plan's.

CP-SAT stops at ``time_limit_s``; the result then carries the proven lower bound and
the gap.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from streamplan.budget.figures import memory_floor
from streamplan.cost.simulate import op_costs
from streamplan.errors import BudgetError
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.position_bound import counted_storages
from streamplan.schedule.context import MemoryBudget, ScheduleContext
from streamplan.schedule.events import derive_waits

TICKS = 20_000  # resolution of the time grid: the total op time spans this many ticks
OCCUPANCY_UNITS = 1000
MODEL = (
    "standalone op times; at most max_streams ops at once, occupancies summing to at most 1; "
    "no launch or event costs; storages live from their creator's start to their last user's end"
)


@dataclass(frozen=True)
class ExactResult:
    """The exact solver's schedule, its plan makespan and the proven lower bound."""

    schedule: StreamSchedule
    plan_makespan_ms: float
    lower_bound_ms: float
    optimal: bool
    status: str
    solve_time_s: float
    tick_ms: float

    @property
    def gap(self) -> float:
        """(plan - proven lower bound) / plan: 0 when proven optimal."""
        if self.optimal or self.plan_makespan_ms <= 0:
            return 0.0
        return max(0.0, (self.plan_makespan_ms - self.lower_bound_ms) / self.plan_makespan_ms)

    def meta(self) -> dict[str, Any]:
        return {
            "exact_optimal": self.optimal,
            "exact_status": self.status,
            "exact_plan_ms": self.plan_makespan_ms,
            "exact_lower_bound_ms": self.lower_bound_ms,
            "exact_gap": self.gap,
            "exact_solve_time_s": self.solve_time_s,
            "exact_model": MODEL,
        }


def exact_budget_schedule(
    graph: Graph,
    ctx: ScheduleContext,
    limit_bytes: int,
    *,
    time_limit_s: float = 10.0,
    workers: int = 8,
    hint: StreamSchedule | None = None,
) -> ExactResult:
    """The fastest plan under the stated model whose live bytes stay within ``limit_bytes``.

    ``hint``: a schedule within the budget to start from (its earliest-start timing under the
    model); by default the memory-optimal one-stream order. ``workers``: CP-SAT's parallel
    portfolio (its strength on these models; it runs interleaved on fewer cores)."""
    from ortools.sat.python import cp_model

    from streamplan.memory.cp_sat import solve

    t0 = time.perf_counter()
    budget = ctx.budget or MemoryBudget(limit_bytes=limit_bytes)
    ops = graph.node_ids
    n = len(ops)
    costs = op_costs(graph, ops, ctx.cost)
    total = sum(costs.time_ms)
    tick = total / TICKS if total > 0 else 1e-6
    dur = [max(1, math.ceil(t / tick - 1e-9)) for t in costs.time_ms]
    horizon = sum(dur)
    facts = counted_storages(graph, includes=budget.includes)
    capacity = limit_bytes - facts.resident_bytes
    if capacity < 0:
        raise BudgetError(
            f"the resident inputs/params alone ({facts.resident_bytes} bytes) exceed the budget",
            where=graph.name,
        )
    m = cp_model.CpModel()
    preds_all = graph.pred_positions()
    head, tail = [0] * n, [0] * n  # longest chain of durations before / after each op
    for i, ps in enumerate(preds_all):
        head[i] = max((head[p] + dur[p] for p in ps), default=0)
    for i in range(n - 1, -1, -1):
        for p in preds_all[i]:
            tail[p] = max(tail[p], tail[i] + dur[i])
    start = [m.NewIntVar(head[i], horizon - tail[i] - dur[i], f"s{i}") for i in range(n)]
    end = [m.NewIntVar(head[i] + dur[i], horizon - tail[i], f"e{i}") for i in range(n)]
    iv = [m.NewIntervalVar(start[i], dur[i], end[i], f"op{i}") for i in range(n)]
    makespan = m.NewIntVar(0, horizon, "makespan")
    m.Add(makespan >= max((head[i] + dur[i] + tail[i] for i in range(n)), default=0))
    for i, preds in enumerate(preds_all):
        for p in preds:
            m.Add(end[p] <= start[i])
        m.Add(end[i] <= makespan)
    m.AddCumulative(iv, [1] * n, max(1, ctx.max_streams))
    occ = [max(1, round(o * OCCUPANCY_UNITS)) for o in costs.occupancy]
    kernels = [i for i in range(n) if costs.time_ms[i] > 0]
    m.AddCumulative([iv[i] for i in kernels], [occ[i] for i in kernels], OCCUPANCY_UNITS)
    _memory(m, graph, facts, start, end, makespan, horizon, capacity)
    m.Minimize(makespan)
    _hint(m, graph, budget, start, dur, hint)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.05, time_limit_s)
    solver.parameters.num_workers = max(1, workers)
    status = solve(solver, m)  # Ctrl-C stops the command, not only the search
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise BudgetError(
            f"the exact solver found no plan within {limit_bytes} bytes in {time_limit_s:g} s "
            f"({solver.StatusName(status).lower()})",
            where=graph.name,
            hint="give it more time, or use the scalable search (solver=search)",
        )
    s_val = [solver.Value(x) for x in start]
    e_val = [solver.Value(x) for x in end]
    schedule = plan_to_schedule(graph, s_val, e_val, solver.StatusName(status))
    return ExactResult(
        schedule=schedule,
        plan_makespan_ms=solver.Value(makespan) * tick,
        lower_bound_ms=solver.BestObjectiveBound() * tick,
        optimal=status == cp_model.OPTIMAL,
        status=solver.StatusName(status).lower(),
        solve_time_s=time.perf_counter() - t0,
        tick_ms=tick,
    )


def _memory(m, graph: Graph, facts, start, end, makespan, horizon: int, capacity: int) -> None:
    """Each storage occupies its bytes from its creator's start to its last user's end."""
    pos = {op: i for i, op in enumerate(graph.node_ids)}
    g = 0
    for b in facts.nbytes:
        g = math.gcd(g, b)
    g = max(g, 1)
    ivs, demands = [], []
    for k, (b, c, users, persistent) in enumerate(
        zip(facts.nbytes, facts.creator, facts.users, facts.persistent, strict=True)
    ):
        if b == 0:
            continue
        last = m.NewIntVar(0, horizon, f"free{k}")
        if persistent:
            m.Add(last == makespan)
        else:
            m.AddMaxEquality(last, [end[pos[u]] for u in users])
        size = m.NewIntVar(0, horizon, f"life{k}")
        ivs.append(m.NewIntervalVar(start[pos[c]], size, last, f"mem{k}"))
        demands.append(b // g)
    if ivs:
        m.AddCumulative(ivs, demands, capacity // g)


def _hint(m, graph: Graph, budget: MemoryBudget, start, dur, hint: StreamSchedule | None) -> None:
    """Start from ``hint``'s earliest-start timing, or from the memory-optimal one-stream order
    (feasible whenever the budget is above the floor)."""
    pos = {op: i for i, op in enumerate(graph.node_ids)}
    if hint is None:
        hint = memory_floor(graph, budget).schedule
    done: dict[str, int] = {}
    tails: dict[int, int] = {}
    waits = hint.waits_before()
    for op in hint.launch_order:
        i, stream = pos[op], hint.streams[op]
        t = max(
            [tails.get(stream, 0)]
            + [done[u] for u in waits.get(op, ())]
            + [done[graph.node_ids[p]] for p in graph.pred_positions()[i]]
        )
        m.AddHint(start[i], t)
        done[op] = tails[stream] = t + dur[i]


def plan_to_schedule(graph: Graph, start: list[int], end: list[int], status: str = "") -> StreamSchedule:
    """The schedule whose happens-before is the plan's interval order (see the module docstring)."""
    ops = graph.node_ids
    idx = sorted(range(len(ops)), key=lambda i: (start[i], end[i], i))
    stream_end: list[int] = []
    streams: dict[str, int] = {}
    for i in idx:
        free = [k for k, e in enumerate(stream_end) if e <= start[i]]
        if free:
            k = max(free, key=lambda k: (stream_end[k], -k))  # the stream that freed up last: least idle
            stream_end[k] = end[i]
        else:
            k = len(stream_end)
            stream_end.append(end[i])
        streams[ops[i]] = k
    order = [ops[i] for i in idx]
    extra = {ops[v]: [ops[u] for u in idx if end[u] <= start[v] and u != v] for v in idx}
    waits = derive_waits(graph, order, streams, extra_deps=extra)
    return StreamSchedule(tuple(order), streams, waits, "budget", {"exact_status": status.lower()})
