"""Scheduling contexts from what a user chooses: a device profile, perhaps a measured table."""

from __future__ import annotations

from dataclasses import dataclass

from streamplan.cost.measured import MeasuredCostModel
from streamplan.cost.opcost import CostModel
from streamplan.ir.graph import Graph
from streamplan.ir.includes import ACTIVATIONS
from streamplan.progress import ProgressFn, no_progress
from streamplan.schedule.context import MemoryBudget, ScheduleContext
from streamplan.schedule.settings import Settings


def cost_model(device: str = "v100", measured: str | None = None, *, cuda_graphs: bool = False) -> CostModel:
    """The analytic model of ``device``, or a measured table (a path) over it; with
    ``cuda_graphs``, the schedule replayed as one captured CUDA graph (``Settings.cost_model``)."""
    return Settings(device=device, measured=measured, cuda_graphs=cuda_graphs).cost_model()


def make_context(
    *,
    device: str = "v100",
    measured: str | None = None,
    cuda_graphs: bool = False,
    max_streams: int = 8,
    budget: MemoryBudget | None = None,
    time_limit_s: float = 10.0,
    seed: int = 0,
    progress: ProgressFn = no_progress,
    fusion: str = "none",
) -> ScheduleContext:
    """A ``ScheduleContext`` on ``device``'s profile, or on a measured table over it (with
    ``cuda_graphs``: the schedule replayed as one CUDA graph), with the fusion mode
    (``none``, ``first`` or ``stream-aware``) the application applies: the context of
    ``Settings`` with these fields (the budget counting what it says it counts)."""
    settings = Settings(
        device=device,
        measured=measured,
        cuda_graphs=cuda_graphs,
        max_streams=max_streams,
        fusion=fusion,
        includes=budget.includes if budget is not None else ACTIVATIONS,
        budget=budget,
        time_limit_s=time_limit_s,
        seed=seed,
    )
    return settings.context(progress=progress)


@dataclass(frozen=True)
class MeasuredCoverage:
    """How much of a simulation a measured table covered (the rest came from the profile)."""

    table_device: str
    fallback_device: str
    hits: int
    misses: int

    @staticmethod
    def of(cost: CostModel, graph: Graph) -> MeasuredCoverage | None:
        """How much of ``graph`` (the graph simulated: the kernels, when fused) the table of
        ``cost`` times; None when ``cost`` is no measured table."""
        if not isinstance(cost, MeasuredCostModel):
            return None
        hits, misses = cost.coverage(graph)
        return MeasuredCoverage(cost.table.device, cost.fallback.device_name, hits, misses)

    def to_dict(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses}

    def text(self) -> str:
        total = self.hits + self.misses
        note = f"measured table ({self.table_device or 'no device named'}): {self.hits} of {total} op costs"
        if self.misses:
            note += f", the other {self.misses} from the {self.fallback_device} profile"
        return note
