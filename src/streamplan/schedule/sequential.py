"""``sequential``: every op on stream 0 in the graph's order (the baseline; what eager PyTorch does)."""

from __future__ import annotations

from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.schedule.context import DEFAULT_CONTEXT, ScheduleContext


def schedule_sequential(graph: Graph, ctx: ScheduleContext = DEFAULT_CONTEXT) -> StreamSchedule:
    """One stream, graph order, no waits (the context is accepted for a uniform signature)."""
    order = graph.node_ids
    return StreamSchedule(order, dict.fromkeys(order, 0), (), "sequential", {})
