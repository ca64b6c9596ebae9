"""Measure this machine's device and fit a profile to it (the ``calibrate`` command's result).

``calibrate("cpu")`` runs the micro-benchmarks of ``runtime.calibrate`` on the CPU
runtime (or ``"cuda"`` on the GPU) and fits a ``DeviceProfile`` (``cost.fit``); the
profile file it writes works wherever a profile name does (``--device FILE.json``,
``AnalyticCostModel("FILE.json")``, ``make_context(device="FILE.json")``).
Calibration changes op times and contention only: every memory figure of a given
schedule (host order, worst case, arena, allocator replays in host order) is the
same under any profile.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from streamplan.cost.fit import ProfileFit, fit_profile
from streamplan.cost.profile import DeviceProfile, profile_to_json
from streamplan.progress import ProgressFn, no_progress

TARGETS = ("cpu", "cuda")


@dataclass(frozen=True)
class CalibrationResult:
    """The fitted profile, how well it reproduces the micro-benchmarks, and what was measured."""

    profile: DeviceProfile
    fit: ProfileFit
    measured: dict[str, Any]  # DeviceMeasurements.summary()
    elapsed_s: float

    @property
    def target(self) -> str:
        return str(self.measured["target"])

    def profile_json(self) -> str:
        """The text of the profile file."""
        return profile_to_json(self.profile)

    def to_dict(self) -> dict[str, Any]:
        cal = self.profile.calibration
        return {
            "profile": self.profile.name,
            "target": self.target,
            "device": self.measured["device_name"],
            "elapsed_s": self.elapsed_s,
            "per_op_ms": self.profile.kernel_fixed_ms,
            "launch_overhead_ms": self.profile.launch_overhead_ms,
            "event_resume_ms": self.profile.event_resume_ms,
            "graph_node_ms": self.profile.graph_node_ms if self.profile.has_cuda_graphs else None,
            "graph_edge_ms": self.profile.graph_edge_ms if self.profile.has_cuda_graphs else None,
            "contention": cal.contention.to_dict(),
            "stream_bandwidth_bytes_per_s": cal.stream_bandwidth_bytes_per_s,
            "latency_error": cal.latency_error,
            "speedup_error": cal.speedup_error,
            "kinds": list(self.fit.kinds),
            "measured": self.measured,
            "fit": self.fit.to_dict(),
        }


def calibrate(
    target: str = "cpu",
    *,
    quick: bool = False,
    name: str | None = None,
    repeat: int | None = None,
    progress: ProgressFn = no_progress,
) -> CalibrationResult:
    """Measure ``target`` (``cpu`` or ``cuda``) and fit a profile (``quick``: seconds, fewer sizes)."""
    from streamplan.errors import ModelSpecError

    if target not in TARGETS:
        raise ModelSpecError(f"unknown calibration target {target!r}", hint="use --on cpu or --on cuda")
    if target == "cuda":
        from streamplan.app.run import check_target

        check_target("cuda")
    from streamplan.runtime.calibrate import measure_device

    t0 = time.perf_counter()
    measurements = measure_device(target, quick=quick, repeat=repeat, progress=progress)
    progress("calibrate: fitting the profile", None, None)
    fit = fit_profile(measurements, name=name)
    return CalibrationResult(fit.profile, fit, measurements.summary(), time.perf_counter() - t0)
