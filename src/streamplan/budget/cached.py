"""Helpers of the budget search: cost answers computed once per op, and schedules made as
``make_schedule`` leaves every policy's output (redundant waits dropped, verified)."""

from __future__ import annotations

from streamplan.cost.opcost import CostModel, DeviceFacts
from streamplan.ir.graph import Graph, Node
from streamplan.ir.schedule import StreamSchedule
from streamplan.schedule.events import prune_waits
from streamplan.schedule.verify import verify_schedule


class CachedCost(CostModel):
    """A cost model's answers per op, computed once (a search simulates the same ops many times).

    The answers are remembered per graph (the same op id in another graph, a fused or a
    rewritten one, is another op), and the cache changes no answer: a ``CachedCost`` equals
    the model it wraps, so a context holding it is the same value as one holding that model.
    """

    def __init__(self, inner: CostModel):
        self.inner = inner
        self.device_name = inner.device_name
        self._facts = inner.device_facts
        # by id(graph); the graph is kept so that its id is not reused while it is remembered
        self._memo: dict[int, tuple[Graph, dict[str, tuple[float, float, float, bool]]]] = {}

    def __eq__(self, other: object) -> bool:
        other = other.inner if isinstance(other, CachedCost) else other
        return self.inner == other

    def __hash__(self) -> int:
        return hash(self.inner)

    @property
    def device_facts(self) -> DeviceFacts:
        return self._facts

    def _get(self, graph: Graph, node: Node) -> tuple[float, float, float, bool]:
        entry = self._memo.get(id(graph))
        if entry is None or entry[0] is not graph:
            entry = self._memo[id(graph)] = (graph, {})
        memo = entry[1]
        got = memo.get(node.id)
        if got is None:
            c = self.inner
            got = (
                c.op_time_ms(graph, node),
                c.occupancy(graph, node),
                c.launch_overhead_ms(graph, node),
                c.is_kernel(graph, node),
            )
            memo[node.id] = got
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
