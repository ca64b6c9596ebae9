"""``SimulationReport``: one run's simulated timeline in figures (the ``simulate`` command's result)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streamplan.app.analysis import PolicyRun
from streamplan.app.context import MeasuredCoverage
from streamplan.app.display import Shown
from streamplan.cost.opcost import CostModel
from streamplan.cost.overlap import CommOverlap, comm_overlap
from streamplan.fusion.transform import kernel_count
from streamplan.ir.collectives import is_collective
from streamplan.ir.frozen import freeze
from streamplan.ir.graph import Graph


@dataclass(frozen=True)
class SimulationReport(Shown):
    """Makespan, streams, events and each stream's busy time of one run on one cost model;
    with a measured table, how much of the graph it timed (``measured``)."""

    model: str
    run: PolicyRun
    device: str
    cuda_graphs: bool
    kernels: int
    measured: MeasuredCoverage | None = None
    communication: CommOverlap | None = None  # a rank program: how much communication is hidden

    @staticmethod
    def of(
        graph: Graph, run: PolicyRun, cost: CostModel, *, device: str, cuda_graphs: bool
    ) -> SimulationReport:
        """The report of ``run`` (of ``graph``, simulated on ``cost``)."""
        g = run.scheduled_graph(graph)
        comm = comm_overlap(g, run.timeline) if any(is_collective(n) for n in g.nodes) else None
        return SimulationReport(
            graph.name, run, device, cuda_graphs, kernel_count(g), MeasuredCoverage.of(cost, g), comm
        )

    @property
    def stream_busy_ms(self) -> Mapping[int, float]:
        return freeze(dict(sorted(self.run.timeline.stream_busy_ms.items())))

    def to_dict(self) -> dict[str, Any]:
        s, tl = self.run.schedule, self.run.timeline
        d: dict[str, Any] = {
            "model": self.model,
            "policy": s.policy,
            "device": self.device,
            "cuda_graphs": self.cuda_graphs,
            "streams": s.num_streams,
            "events": s.num_events,
            "makespan_ms": tl.makespan_ms,
            "stream_busy_ms": {str(k): v for k, v in self.stream_busy_ms.items()},
            "fusion": self.run.fusion_mode,
            "kernels": self.kernels,
        }
        if self.measured is not None:
            d["measured"] = self.measured.to_dict()
        if self.communication is not None:
            d["communication"] = self.communication.to_dict()
        return d

    def __str__(self) -> str:
        s, tl = self.run.schedule, self.run.timeline
        busy = ", ".join(f"stream {k} {v:.3f} ms" for k, v in self.stream_busy_ms.items())
        return (
            f"{self.model} / {s.policy} on {self.device}: makespan {tl.makespan_ms:.3f} ms, "
            f"{s.num_streams} streams, {s.num_events} events ({busy})"
        )
