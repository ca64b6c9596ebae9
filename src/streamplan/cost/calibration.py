"""The calibrated part of a device profile: measured time curves, contention and their sources.

``Calibration`` groups everything ``streamplan calibrate`` measures (or a fit to
published measurements sets) beyond a profile's spec sheet:

- ``curves``: the measured time of each op kind against its work (``TimeCurve``,
  interpolated log-log between measured points: an efficiency curve, not one
  constant) and, for GEMM-like kinds, the achieved FLOP/s as a function of the
  implicit GEMM's shape (``GemmCurve``);
- ``contention``: what concurrent kernels compete for (``cost.contention.Supply``);
- ``stream_bandwidth_bytes_per_s``: the best DRAM bandwidth a kernel achieved, the
  unit in which an op's bandwidth demand is counted;
- ``fixed_holds_lock``: the per-op fixed time is interpreter work that holds one
  lock shared by every stream (the CPU runtime's Python per op), so concurrent
  streams queue for it;
- ``latency_error`` and ``speedup_error``: the typical relative error of a
  predicted latency and of a predicted speedup on this profile, from the evaluation
  named in ``sources`` (``explain`` prints a speedup with this uncertainty);
- ``sources``: for each constant, where it came from (a micro-benchmark, a fit to
  named published measurements, a vendor figure); ``measured``: the host, versions
  and date of a calibration run.

Every field is immutable and hashable, so a calibrated profile is a value that can
sit in a settings object or a cache key.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any

from streamplan.cost.contention import Supply


@dataclass(frozen=True, slots=True)
class TimeCurve:
    """Measured body time (ms, fixed per-kernel time excluded) of one op kind against its work.

    ``points`` are (work, ms) with work ascending; ``unit`` says whether work is FLOPs
    or bytes moved. Between points the time is interpolated log-log (a power law per
    segment); beyond the ends the achieved rate of the nearest point is kept.
    """

    kind: str
    unit: str  # "flops" or "bytes"
    points: tuple[tuple[float, float], ...]

    def time_ms(self, work: float) -> float:
        pts = self.points
        if not pts or work <= 0:
            return 0.0
        xs = [p[0] for p in pts]
        i = bisect.bisect_left(xs, work)
        if i == 0:
            return pts[0][1] * work / pts[0][0]
        if i >= len(pts):
            return pts[-1][1] * work / pts[-1][0]
        (x0, t0), (x1, t1) = pts[i - 1], pts[i]
        if x1 <= x0 or t0 <= 0 or t1 <= 0:
            return t1
        f = (math.log(work) - math.log(x0)) / (math.log(x1) - math.log(x0))
        return math.exp(math.log(t0) + f * (math.log(t1) - math.log(t0)))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "unit": self.unit, "points": [list(p) for p in self.points]}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> TimeCurve:
        pts = tuple(sorted((float(w), float(t)) for w, t in d["points"]))
        if any(not (w > 0 and t > 0 and math.isfinite(w) and math.isfinite(t)) for w, t in pts):
            raise ValueError(f"curve {d.get('kind')!r}: every point needs work > 0 and time > 0")
        if d["unit"] not in ("flops", "bytes"):
            raise ValueError(f"curve {d.get('kind')!r}: unit must be 'flops' or 'bytes'")
        return TimeCurve(str(d["kind"]), str(d["unit"]), pts)


@dataclass(frozen=True, slots=True)
class GemmCurve:
    """Achieved FLOP/s of a GEMM-like kind: ``peak x s(M) x s(N) x s(K)``, ``s(x) = x / (x + half)``.

    Each factor is a saturation curve: a dimension much larger than its ``half`` runs
    at full rate, one equal to it at half (too few rows to fill the cores, too few
    columns for a full tile, too short a reduction to amortise loading the tiles).
    ``precision`` is the precision class the curve was measured or fitted in; an op of
    another class runs at the curve's rate scaled by the ratio of the device's peaks.
    """

    kind: str
    peak_flops_per_s: float
    half_m: float
    half_n: float
    half_k: float
    precision: str = "fp32"

    def rate(self, m: float, n: float, k: float) -> float:
        return (
            self.peak_flops_per_s
            * (m / (m + self.half_m))
            * (n / (n + self.half_n))
            * (k / (k + self.half_k))
        )

    def time_ms(self, flops: float, mnk: tuple[int, int, int]) -> float:
        if flops <= 0:
            return 0.0
        return 1e3 * flops / max(self.rate(*mnk), 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "peak_flops_per_s": self.peak_flops_per_s,
            "half_m": self.half_m,
            "half_n": self.half_n,
            "half_k": self.half_k,
            "precision": self.precision,
        }

    @staticmethod
    def from_dict(d: dict[str, Any]) -> GemmCurve:
        c = GemmCurve(
            str(d["kind"]),
            float(d["peak_flops_per_s"]),
            float(d["half_m"]),
            float(d["half_n"]),
            float(d["half_k"]),
            str(d.get("precision", "fp32")),
        )
        if not (c.peak_flops_per_s > 0 and min(c.half_m, c.half_n, c.half_k) >= 0):
            raise ValueError(f"GEMM curve {c.kind!r}: peak must be > 0 and halves >= 0")
        return c


def _pairs(d: Any) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in dict(d or {}).items()))


@dataclass(frozen=True, slots=True)
class Calibration:
    """Measured or fitted constants of a profile beyond its spec sheet (see the module doc)."""

    curves: tuple[TimeCurve, ...] = ()
    gemm_curves: tuple[GemmCurve, ...] = ()
    contention: Supply = field(default_factory=Supply)
    stream_bandwidth_bytes_per_s: float | None = None
    fixed_holds_lock: bool = False
    latency_error: float | None = None
    speedup_error: float | None = None
    sources: tuple[tuple[str, str], ...] = ()
    measured: tuple[tuple[str, str], ...] = ()

    @property
    def is_measured(self) -> bool:
        """True when op times come from measured curves (a profile written by ``calibrate``)."""
        return bool(self.curves or self.gemm_curves)

    def source(self, constant: str) -> str | None:
        """Where ``constant`` came from, if recorded."""
        return dict(self.sources).get(constant)

    def to_dict(self) -> dict[str, Any]:
        return {
            "curves": [c.to_dict() for c in self.curves],
            "gemm_curves": [c.to_dict() for c in self.gemm_curves],
            "contention": self.contention.to_dict(),
            "stream_bandwidth_bytes_per_s": self.stream_bandwidth_bytes_per_s,
            "fixed_holds_lock": self.fixed_holds_lock,
            "latency_error": self.latency_error,
            "speedup_error": self.speedup_error,
            "sources": dict(self.sources),
            "measured": dict(self.measured),
        }

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Calibration:
        def opt(key: str) -> float | None:
            v = d.get(key)
            if v is None:
                return None
            v = float(v)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{key} must be a number >= 0")
            return v

        return Calibration(
            curves=tuple(TimeCurve.from_dict(c) for c in d.get("curves", ())),
            gemm_curves=tuple(GemmCurve.from_dict(c) for c in d.get("gemm_curves", ())),
            contention=Supply.from_dict(d.get("contention", {})),
            stream_bandwidth_bytes_per_s=opt("stream_bandwidth_bytes_per_s"),
            fixed_holds_lock=bool(d.get("fixed_holds_lock", False)),
            latency_error=opt("latency_error"),
            speedup_error=opt("speedup_error"),
            sources=_pairs(d.get("sources")),
            measured=_pairs(d.get("measured")),
        )
