"""Memory of a training step by what it is for: parameters, gradients, optimizer state,
saved activations and the rest — in total, and at the moment of each peak.

Every storage falls in one category: its training role (``Graph.roles``) when it has
one, else ``inputs`` (the batch) or ``buffers`` (buffers and constants); activations of
an inference graph, which carry no role, count as temporaries. ``totals`` sums every
storage of a category (no reuse); a ``PeakComposition`` splits the bytes live at one
instant — the host-order peak, the worst-case witness, the simulated peak — with the
resident storages (inputs, parameters, buffers, optimizer state) counted as live, so
its total is what the device holds then, before allocator rounding.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from streamplan.ir.graph import Graph
from streamplan.ir.includes import EVERYTHING
from streamplan.ir.schedule import StreamSchedule
from streamplan.ir.training import training_step
from streamplan.memory.host_order import trace_from_liveness
from streamplan.memory.liveness import liveness
from streamplan.memory.report import MemoryReport
from streamplan.memory.worst_case import live_bytes_at

MIB = 1 << 20
CATEGORIES: tuple[str, ...] = (
    "parameters",
    "gradients",
    "optimizer_state",
    "saved_activations",
    "temporaries",
    "inputs",
    "buffers",
)
_OF_ROLE = {
    "parameter": "parameters",
    "gradient": "gradients",
    "optimizer_state": "optimizer_state",
    "saved_activation": "saved_activations",
    "temporary": "temporaries",
}
_OF_KIND = {"input": "inputs", "param": "parameters", "buffer": "buffers", "constant": "buffers"}


def category(graph: Graph, storage: str) -> str:
    """The breakdown category of one storage (see the module docstring)."""
    role = graph.roles.get(storage)
    if role is not None:
        return _OF_ROLE[role]
    return _OF_KIND.get(graph.values[storage].kind, "temporaries")


@dataclass(frozen=True)
class Composition:
    """Bytes per category (``CATEGORIES``)."""

    bytes_by_category: tuple[tuple[str, int], ...]

    @staticmethod
    def of(graph: Graph, storages: Iterable[str]) -> Composition:
        sizes = dict.fromkeys(CATEGORIES, 0)
        all_storages = graph.storages()
        for sid in dict.fromkeys(storages):
            sizes[category(graph, sid)] += all_storages[sid].nbytes
        return Composition(tuple(sizes.items()))

    def __getitem__(self, name: str) -> int:
        return dict(self.bytes_by_category)[name]

    @property
    def total_bytes(self) -> int:
        return sum(b for _, b in self.bytes_by_category)

    @property
    def rest_bytes(self) -> int:
        """Everything but parameters, gradients, optimizer state and saved activations."""
        return self["temporaries"] + self["inputs"] + self["buffers"]

    def to_dict(self) -> dict[str, int]:
        return {f"{name}_bytes": b for name, b in self.bytes_by_category}

    def text(self) -> str:
        total = self.total_bytes or 1
        return ", ".join(
            f"{name.replace('_', ' ')} {b / MIB:.2f} MiB ({100 * b / total:.0f}%)"
            for name, b in self.bytes_by_category
            if b
        )


@dataclass(frozen=True)
class PeakComposition:
    """What is live at one peak: the figure, its instant (ops, phase) and its composition."""

    figure: str  # "host-order", "worst-case" or "simulated"
    composition: Composition
    ops: tuple[str, ...]  # launched (host order) or running at that instant
    phases: tuple[str, ...]  # the parts of the step those ops belong to

    @property
    def total_bytes(self) -> int:
        return self.composition.total_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "total_bytes": self.total_bytes,
            **self.composition.to_dict(),
            "ops": list(self.ops),
            "phases": list(self.phases),
        }

    def line(self) -> str:
        where = f" during the {'/'.join(self.phases)}" if self.phases else ""
        at = f" at {', '.join(self.ops[:3])}{' ...' if len(self.ops) > 3 else ''}" if self.ops else ""
        return (
            f"  {self.figure} peak{where}{at}: {self.total_bytes / MIB:.2f} MiB with residents = "
            f"{self.composition.text()}"
        )


@dataclass(frozen=True)
class MemoryBreakdown:
    """A step's memory by category: totals, and the composition of each peak of one schedule."""

    graph: str
    policy: str
    totals: Composition
    peaks: tuple[PeakComposition, ...]

    def peak(self, figure: str) -> PeakComposition | None:
        return next((p for p in self.peaks if p.figure == figure), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.totals.to_dict(),
            "policy": self.policy,
            "peaks": {p.figure: p.to_dict() for p in self.peaks},
        }

    def lines(self, *, totals: bool = True) -> list[str]:
        out = [f"memory of {self.graph} by category (every storage, no reuse): {self.totals.text()}"]
        if not totals:
            out = []
        out.append(f"composition of each peak under {self.policy} (resident storages included):")
        out += [p.line() for p in self.peaks]
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def memory_breakdown(
    graph: Graph, schedule: StreamSchedule, *, report: MemoryReport | None = None
) -> MemoryBreakdown:
    """Totals by category and the host-order peak's composition under ``schedule``; with
    ``report`` (``analyze_memory`` of the same schedule) also the worst-case witness's and
    the simulated peak's."""
    live = liveness(graph, schedule, includes=EVERYTHING)
    resident = [s.storage for s in live.lives if s.creator is None]
    step = training_step(graph)

    def phases(ops: Iterable[str]) -> tuple[str, ...]:
        if step is None:
            return ()
        return tuple(dict.fromkeys(step.phase(graph, op) for op in ops))

    host = trace_from_liveness(live, schedule)
    peaks = []
    if host.peak_launch_index >= 0:
        op = schedule.launch_order[host.peak_launch_index]
        finished = set(schedule.launch_order[: host.peak_launch_index])
        _, names = live_bytes_at(live, finished, finished | {op})
        peaks.append(PeakComposition("host-order", Composition.of(graph, names), (op,), phases([op])))
    if report is not None:
        wc = report.worst_case
        peaks.append(
            PeakComposition(
                "worst-case", Composition.of(graph, [*resident, *wc.live]), wc.running, phases(wc.running)
            )
        )
        if report.simulated is not None:
            sim = report.simulated
            peaks.append(
                PeakComposition(
                    "simulated",
                    Composition.of(graph, [*resident, *sim.live_at_peak]),
                    sim.running_at_peak,
                    phases(sim.running_at_peak),
                )
            )
    totals = Composition.of(graph, graph.storages())
    return MemoryBreakdown(graph.name, schedule.policy, totals, tuple(peaks))
