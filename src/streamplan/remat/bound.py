"""A lower bound on the simulated makespan of any schedule of a plan, from the plan alone.

The search ranks candidates by their simulated makespan; rewriting, scheduling and
simulating a plan on a 10,000-op step takes seconds, so a candidate whose bound is
already slower than an answer in hand is never built. The bound is the simulator's
own arithmetic (``cost.simulate``), so it holds for every policy:

- on one stream the ops run one after another, each at least its standalone time:
  the makespan is at least the sum of the standalone times;
- on several streams running ops share the device, which delivers at most one unit
  of occupancy-time per millisecond: the makespan is at least the sum of occupancy x
  time (what ``cost.bound`` calls the device capacity term).

A recomputation runs the same op on the same shapes as its original, so it costs what
the original costs. Launch overheads, waits and re-derived views only add time.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamplan.cost.opcost import CostModel
from streamplan.cost.simulate import op_costs
from streamplan.ir.graph import Graph
from streamplan.remat.problem import RematProblem, normalize


@dataclass(frozen=True)
class MakespanBound:
    """Per op (by id): standalone time and occupancy x time; the totals of the plain graph."""

    time_ms: dict[str, float]
    work_ms: dict[str, float]
    total_time_ms: float
    total_work_ms: float

    @staticmethod
    def of(graph: Graph, cost: CostModel) -> MakespanBound:
        c = op_costs(graph, graph.node_ids, cost)
        time_ms = dict(zip(graph.node_ids, c.time_ms, strict=True))
        work = {op: o * t for op, o, t in zip(graph.node_ids, c.occupancy, c.time_ms, strict=True)}
        return MakespanBound(time_ms, work, sum(c.time_ms), sum(work.values()))

    def plan_ms(self, problem: RematProblem, seq: tuple[int, ...], max_streams: int) -> float:
        """A lower bound on the makespan of the rewritten plan ``seq`` (``rewrite`` runs it
        normalised, so the bound counts the normalised plan) under any schedule with at most
        ``max_streams`` streams."""
        per_op, total = (
            (self.time_ms, self.total_time_ms) if max_streams <= 1 else (self.work_ms, self.total_work_ms)
        )
        seen: set[int] = set()
        added = 0.0
        for k in normalize(problem, seq):
            if k in seen:
                added += per_op[problem.order[k]]
            seen.add(k)
        return total + added

    def plain_ms(self, max_streams: int) -> float:
        """The same bound for the graph as it is."""
        return self.total_time_ms if max_streams <= 1 else self.total_work_ms
