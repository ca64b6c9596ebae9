"""How much communication a timeline hides behind compute.

For the collectives of a timeline (``ir.collectives``), ``comm_ms`` is the time at least one
of them runs, ``exposed_ms`` the part of it when no compute op runs (what the step waits
for), ``hidden_ms`` the rest. ``step_ms`` is the makespan; ``compute_ms`` the time some
compute op runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamplan.cost.timeline import Timeline
from streamplan.ir.collectives import is_collective
from streamplan.ir.graph import Graph


@dataclass(frozen=True)
class CommOverlap:
    """Communication time on a timeline, hidden and exposed (module docstring)."""

    step_ms: float
    compute_ms: float
    comm_ms: float
    hidden_ms: float
    exposed_ms: float
    collectives: int

    @property
    def hidden_fraction(self) -> float:
        return self.hidden_ms / self.comm_ms if self.comm_ms > 0 else 1.0

    def to_dict(self) -> dict[str, float]:
        return {
            "step_ms": self.step_ms,
            "compute_ms": self.compute_ms,
            "comm_ms": self.comm_ms,
            "hidden_ms": self.hidden_ms,
            "exposed_ms": self.exposed_ms,
            "hidden_fraction": self.hidden_fraction,
            "collectives": self.collectives,
        }

    def __str__(self) -> str:
        return (
            f"step {self.step_ms:.3f} ms: communication {self.comm_ms:.3f} ms, {self.hidden_ms:.3f} ms hidden "
            f"behind compute ({100 * self.hidden_fraction:.0f}%), {self.exposed_ms:.3f} ms exposed"
        )


def comm_overlap(graph: Graph, timeline: Timeline) -> CommOverlap:
    """The communication of ``timeline`` (of a schedule of ``graph``), hidden and exposed."""
    comm, compute = [], []
    for s in timeline.spans:
        if s.end_ms <= s.start_ms:
            continue
        (comm if is_collective(graph.node(s.op)) else compute).append((s.start_ms, s.end_ms))
    comm_u, compute_u = _union(comm), _union(compute)
    return CommOverlap(
        step_ms=timeline.makespan_ms,
        compute_ms=_length(compute_u),
        comm_ms=_length(comm_u),
        hidden_ms=_length(_intersect(comm_u, compute_u)),
        exposed_ms=_length(comm_u) - _length(_intersect(comm_u, compute_u)),
        collectives=sum(1 for n in graph.nodes if is_collective(n)),
    )


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _intersect(xs: list[tuple[float, float]], ys: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out, i, j = [], 0, 0
    while i < len(xs) and j < len(ys):
        a, b = max(xs[i][0], ys[j][0]), min(xs[i][1], ys[j][1])
        if a < b:
            out.append((a, b))
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return out


def _length(spans: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in spans)
