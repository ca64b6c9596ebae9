"""The common steps of most commands: schedule (verified), then simulate."""

from __future__ import annotations

from streamplan.cost.timeline import Timeline
from streamplan.ir.graph import Graph
from streamplan.schedule.schedule import StreamSchedule


def scheduled(
    graph: Graph, policy: str, *, max_streams: int = 8, device: str = "v100", progress: bool = False
) -> StreamSchedule:
    """A verified schedule of ``graph`` by ``policy`` (the IOS search is costed on ``device``)."""
    from streamplan.schedule.registry import make_schedule
    from streamplan.schedule.verify import verify_schedule

    options = {"device": device, "progress": progress} if policy == "ios" else {}
    s = make_schedule(graph, policy, max_streams=max_streams, **options)
    verify_schedule(graph, s)
    return s


def scheduled_and_simulated(
    graph: Graph, policy: str, *, max_streams: int = 8, device: str = "v100", progress: bool = False
) -> tuple[StreamSchedule, Timeline]:
    from streamplan.cost.simulate import simulate

    s = scheduled(graph, policy, max_streams=max_streams, device=device, progress=progress)
    return s, simulate(graph, s, device)
