"""A lower bound on the makespan of *any* schedule of a graph, under one cost model.

Every valid schedule launches an op after all its ancestors (happens-before follows
launch order), an op starts only after its own launch and its inputs' producers have
finished, an op never runs faster than alone (processor sharing only slows it), and the
device delivers at most one unit of occupancy-time per millisecond. So, with ``t`` an
op's standalone time, ``L`` its host launch time, ``occ`` its occupancy and ``P`` the
one CUDA-graph launch (0 without graphs):

- **critical path with launches**: ``head(v) = max(P + sum of L over v and its
  ancestors, max over predecessors p of head(p) + t(p))``; the makespan is at least
  ``head(v) + t(v)`` for every v. Without CUDA graphs the launch term is what binds on
  a launch-bound device: a branch cannot start before the host has issued everything
  it depends on;
- **host launches**: the host issues every op one after another, and the last one it
  issues (always a sink) still has to run: ``P + sum(L) + min over sinks of t``;
- **device capacity**: ``P + min L + max over resources of sum(demand * t) / supply``:
  every resource concurrent ops share (``cost.contention``: SM slots, DRAM bandwidth,
  the CPU runtime's interpreter lock) delivers at most its supply per millisecond, and
  an op needs its demand of it for its standalone time (with only SMs shared and a
  supply of 1, this is the total occupancy-time of the ops).

The bound is the largest of the three; ``binding`` names it. Event costs (records,
waits, resume latency) depend on the schedule and only add time, so they are left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamplan.cost.devices import DeviceProfile
from streamplan.cost.opcost import CostModel, resolve_cost
from streamplan.cost.simulate import op_costs
from streamplan.ir.graph import Graph

EXACT_ANCESTOR_OPS = 5000  # above this, launches along the longest launch chain only (weaker, linear)


@dataclass(frozen=True)
class LatencyBound:
    """A lower bound on any schedule's makespan (``bound_ms``) and the three terms behind it."""

    bound_ms: float
    critical_path_ms: float  # longest dependency chain, each op after its ancestors' launches
    host_launch_ms: float  # every launch issued serially, then the last op runs
    device_work_ms: float  # the busiest shared resource: sum of demand x time over its supply
    kernel_ms: float  # sum of standalone op times (what one stream would spend on the device)
    launch_total_ms: float  # host time of all launches (the one graph launch with CUDA graphs)
    kernels: int
    cuda_graphs: bool

    @property
    def binding(self) -> str:
        """Which term sets the bound: "critical path", "host launches" or "device capacity"."""
        terms = {
            "critical path": self.critical_path_ms,
            "host launches": self.host_launch_ms,
            "device capacity": self.device_work_ms,
        }
        return max(terms, key=terms.__getitem__)

    def to_dict(self) -> dict[str, Any]:
        return {
            "bound_ms": self.bound_ms,
            "critical_path_ms": self.critical_path_ms,
            "host_launch_ms": self.host_launch_ms,
            "device_work_ms": self.device_work_ms,
            "kernel_ms": self.kernel_ms,
            "launch_total_ms": self.launch_total_ms,
            "kernels": self.kernels,
            "cuda_graphs": self.cuda_graphs,
            "binding": self.binding,
        }


def latency_bound(graph: Graph, cost: CostModel | str | DeviceProfile = "v100") -> LatencyBound:
    """The lower bound on the makespan of every valid schedule of ``graph`` under ``cost``."""
    model = resolve_cost(cost)
    facts = model.device_facts
    prologue = facts.graph_launch_ms if facts.cuda_graphs else 0.0
    costs = op_costs(graph, graph.node_ids, model)
    t, occ, launch = costs.time_ms, costs.occupancy, costs.launch_ms
    preds, succs = graph.pred_positions(), graph.succ_positions()
    n = len(t)
    if n == 0:
        return LatencyBound(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, facts.cuda_graphs)
    issued = _launches_before(preds, launch)
    head = [0.0] * n
    critical = 0.0
    for v in range(n):
        h = prologue + issued[v]
        for p in preds[v]:
            h = max(h, head[p] + t[p])
        head[v] = h
        critical = max(critical, h + t[v])
    sinks = [v for v in range(n) if not succs[v]]
    host = prologue + sum(launch) + min(t[v] for v in sinks)
    kernels = [v for v in range(n) if t[v] > 0]
    first = min((launch[v] for v in kernels), default=0.0)
    supply = facts.supply
    demands = costs.demand_list()
    need = max(
        sum(occ[v] * t[v] for v in range(n)) / supply.sm,
        sum(d.dram * tv for d, tv in zip(demands, t, strict=True)) / supply.dram,
        sum(d.lock * tv for d, tv in zip(demands, t, strict=True)) / supply.lock,
    )
    work = prologue + first + need
    return LatencyBound(
        bound_ms=max(critical, host, work),
        critical_path_ms=critical,
        host_launch_ms=host,
        device_work_ms=work,
        kernel_ms=sum(t),
        launch_total_ms=prologue + sum(launch),
        kernels=len(kernels),
        cuda_graphs=facts.cuda_graphs,
    )


def _launches_before(preds: tuple[tuple[int, ...], ...], launch: tuple[float, ...]) -> list[float]:
    """For each op, the host time of launching it and all its ancestors (a lower bound on when
    its launch can be done). Exact with ancestor bitsets up to ``EXACT_ANCESTOR_OPS`` ops; above,
    the launches along the heaviest chain of ancestors (still a lower bound, linear time)."""
    n = len(preds)
    if n > EXACT_ANCESTOR_OPS:
        chain = [0.0] * n
        for v in range(n):
            chain[v] = launch[v] + max((chain[p] for p in preds[v]), default=0.0)
        return chain
    # Ops with the same launch cost are counted together with one popcount.
    masks: dict[float, int] = {}
    for v, x in enumerate(launch):
        if x > 0:
            masks[x] = masks.get(x, 0) | (1 << v)
    anc = [0] * n
    out = [0.0] * n
    for v in range(n):
        a = 1 << v
        for p in preds[v]:
            a |= anc[p]
        anc[v] = a
        out[v] = sum(x * (a & m).bit_count() for x, m in masks.items())
    return out
