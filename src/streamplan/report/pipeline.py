"""The common steps of most commands: schedule (verified), then simulate."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamplan.cost.timeline import Timeline
from streamplan.ir.graph import Graph
from streamplan.schedule.schedule import StreamSchedule

if TYPE_CHECKING:
    from streamplan.cost.measured import MeasuredCostModel
    from streamplan.cost.opcost import CostModel


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
    graph: Graph,
    policy: str,
    *,
    max_streams: int = 8,
    device: str = "v100",
    progress: bool = False,
    cost: CostModel | None = None,
) -> tuple[StreamSchedule, Timeline]:
    """``scheduled``, then simulated on ``cost`` (a measured table, say) or else ``device``."""
    from streamplan.cost.simulate import simulate

    s = scheduled(graph, policy, max_streams=max_streams, device=device, progress=progress)
    return s, simulate(graph, s, cost if cost is not None else device)


def measured_cost(path: str | None, device: str) -> MeasuredCostModel | None:
    """The ``--measured`` table as a cost model over ``device``'s profile (None without a path)."""
    if not path:
        return None
    from streamplan.cost.measured import MeasuredCostModel

    return MeasuredCostModel(path, fallback=device)


def measured_note(cost: MeasuredCostModel) -> str:
    """How much of the simulation the table covered."""
    total = cost.hits + cost.misses
    note = f"measured table ({cost.table.device or 'no device named'}): {cost.hits} of {total} op costs"
    if cost.misses:
        note += f", the other {cost.misses} from the {cost.fallback.device_name} profile"
    return note
