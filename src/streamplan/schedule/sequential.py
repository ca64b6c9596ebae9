"""``sequential``: every op on stream 0 in the graph's order (the baseline; what eager PyTorch does)."""

from __future__ import annotations

from typing import Any

from streamplan.ir.graph import Graph
from streamplan.schedule.schedule import StreamSchedule


def schedule_sequential(graph: Graph, *, max_streams: int = 8, **options: Any) -> StreamSchedule:
    """One stream, graph order, no waits. ``max_streams`` is accepted for a uniform signature."""
    order = graph.node_ids
    return StreamSchedule(order, dict.fromkeys(order, 0), (), "sequential", {})
