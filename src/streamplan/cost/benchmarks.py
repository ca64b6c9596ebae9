"""What a calibration measured on a device: the input of ``cost.fit`` (plain data, no torch).

``runtime.calibrate.measure_device`` runs the micro-benchmarks of
``runtime.calibrate_graphs`` on the CPU runtime or on CUDA streams and returns a
``DeviceMeasurements``; ``cost.fit.fit_profile`` turns it into a ``DeviceProfile``.
Keeping the measurements as data between the two lets the fit be tested (and re-run)
without a device.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streamplan.ir.frozen import freeze
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule

PURPOSES = ("overhead", "events", "contention")


def relative_range(times: tuple[float, ...] | list[float]) -> float:
    """(max - min) / median of ``times``; 0 for fewer than two (or a zero median)."""
    if len(times) < 2:
        return 0.0
    mid = statistics.median(times)
    return (max(times) - min(times)) / mid if mid > 0 else 0.0


@dataclass(frozen=True)
class TimedRun:
    """One schedule of a micro-benchmark graph, run for real, and its median time.

    ``purpose`` says which constants it pins down: ``overhead`` (a chain of tiny ops),
    ``events`` (the chain bouncing between two streams), ``contention`` (independent
    chains on one stream and on several). ``pair`` names the run it is compared with
    (the same graph on one stream) for a speedup.
    """

    name: str
    purpose: str
    graph: Graph
    schedule: StreamSchedule
    measured_ms: float
    times_ms: tuple[float, ...] = ()
    cuda_graphs: bool = False
    pair: str | None = None

    def spread(self) -> float:
        """(max - min) / median of the repetitions: how noisy the machine was for this run."""
        if len(self.times_ms) < 2 or self.measured_ms <= 0:
            return 0.0
        return (max(self.times_ms) - min(self.times_ms)) / self.measured_ms


@dataclass(frozen=True)
class DeviceMeasurements:
    """Everything one calibration measured (see the module doc).

    ``op_ms`` maps each kernel of ``op_graph`` to its measured time (the CPU runtime:
    the op's own span inside the run, median over repetitions; CUDA: device time per
    call, timed back to back behind a sleep so the host is never the bottleneck).
    ``tiny_op_ms`` is the smallest op (one element) timed the same way: what every op
    pays beyond its work. ``per_op_ms`` is the chain's time per op through the runtime
    (the CPU runtime: interpreter overhead plus the tiny op). On CUDA ``launch_ms`` is
    the host's time to issue one op through the runtime, ``kernel_ms`` the device time
    of one tiny kernel back to back, ``graph_node_ms`` and ``graph_launch_ms`` the same
    chain replayed as a CUDA graph, ``event_host_ms`` one record plus one wait.
    ``probe_ms`` is a small fixed model's time at the start and after each phase of the
    calibration (``drift``: how much the machine's speed varied meanwhile).
    """

    target: str  # "cpu" or "cuda"
    device_name: str
    cores: int  # CPU cores, or the GPU's SMs
    op_graph: Graph
    op_ms: Mapping[str, float]
    tiny_op_ms: float
    per_op_ms: float
    runs: tuple[TimedRun, ...] = ()
    launch_ms: float | None = None
    kernel_ms: float | None = None
    graph_node_ms: float | None = None
    graph_launch_ms: float | None = None
    event_host_ms: float | None = None
    view_ms: float | None = None  # the CPU runtime: one view op (no kernel) through the runtime
    op_spread: float = 0.0  # median over ops of (max - min) / median of their repetitions
    probe_ms: tuple[float, ...] = ()  # the steadiness probe's time at each phase
    meta: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "op_ms", freeze(dict(self.op_ms)))
        object.__setattr__(self, "meta", freeze(dict(self.meta)))
        object.__setattr__(self, "probe_ms", tuple(float(t) for t in self.probe_ms))

    @property
    def drift(self) -> float:
        """(max - min) / median of the probe's times: 0 on a machine whose speed held still."""
        return relative_range(self.probe_ms)

    def run(self, name: str) -> TimedRun | None:
        return next((r for r in self.runs if r.name == name), None)

    def summary(self) -> dict[str, Any]:
        """The scalar measurements (JSON-ready), for reports."""
        return {
            "target": self.target,
            "device_name": self.device_name,
            "cores": self.cores,
            "ops_timed": len(self.op_ms),
            "tiny_op_ms": self.tiny_op_ms,
            "per_op_ms": self.per_op_ms,
            "launch_ms": self.launch_ms,
            "kernel_ms": self.kernel_ms,
            "graph_node_ms": self.graph_node_ms,
            "graph_launch_ms": self.graph_launch_ms,
            "event_host_ms": self.event_host_ms,
            "view_ms": self.view_ms,
            "op_spread": self.op_spread,
            "probe_ms": list(self.probe_ms),
            "drift": self.drift,
            "runs": {r.name: {"ms": r.measured_ms, "spread": r.spread()} for r in self.runs},
            "meta": dict(self.meta),
        }
