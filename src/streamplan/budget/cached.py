"""Helpers of the budget search: cost answers computed once per op, and schedules made as
``make_schedule`` leaves every policy's output (redundant waits dropped, verified)."""

from __future__ import annotations

from streamplan.cost.opcost import CostModel, DeviceFacts
from streamplan.ir.graph import Graph, Node
from streamplan.ir.schedule import StreamSchedule
from streamplan.schedule.events import prune_waits
from streamplan.schedule.verify import verify_schedule


class CachedCost(CostModel):
    """A cost model's answers per op, computed once (a search simulates the same ops many times)."""

    def __init__(self, inner: CostModel):
        self.inner = inner
        self.device_name = inner.device_name
        self._facts = inner.device_facts
        self._memo: dict[str, tuple[float, float, float, bool]] = {}

    @property
    def device_facts(self) -> DeviceFacts:
        return self._facts

    def _get(self, graph: Graph, node: Node) -> tuple[float, float, float, bool]:
        got = self._memo.get(node.id)
        if got is None:
            c = self.inner
            got = (
                c.op_time_ms(graph, node),
                c.occupancy(graph, node),
                c.launch_overhead_ms(graph, node),
                c.is_kernel(graph, node),
            )
            self._memo[node.id] = got
        return got

    def op_time_ms(self, graph: Graph, node: Node) -> float:
        return self._get(graph, node)[0]

    def occupancy(self, graph: Graph, node: Node) -> float:
        return self._get(graph, node)[1]

    def launch_overhead_ms(self, graph: Graph, node: Node) -> float:
        return self._get(graph, node)[2]

    def is_kernel(self, graph: Graph, node: Node) -> bool:
        return self._get(graph, node)[3]


def make_schedule_like(graph: Graph, schedule: StreamSchedule) -> StreamSchedule:
    """A constructed schedule with its redundant waits dropped and verified, as ``make_schedule``
    leaves every policy's output."""
    s = prune_waits(graph, schedule) if schedule.waits else schedule
    verify_schedule(graph, s)
    return s
