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
- ``drift``: how much the machine's speed varied while ``calibrate`` measured it (a
  small fixed model timed at every phase: (max - min) / median); a calibration on a
  busy machine carries that much uncertainty, and ``latency_error`` includes it;
- ``sources``: for each constant, where it came from (a micro-benchmark, a fit to
  named published measurements, a vendor figure); ``measured``: the host, versions
  and date of a calibration run.

Every field is immutable and hashable, so a calibrated profile is a value that can
sit in a settings object or a cache key.
"""

from __future__ import annotations

import bisect
import functools
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


# The output tiles (rows x columns of the implicit GEMM) a GPU library chooses among, in both
# orientations: large square tiles reuse each loaded element most, narrow ones keep small GEMMs busy.
TILES = ((128, 128), (128, 64), (64, 128), (64, 64), (64, 32), (32, 64), (32, 32))
SPLIT_K_CHUNK = 256  # shortest reduction slice a split-K GEMM gives one tile (as cost.opcost's estimate)


@functools.lru_cache(maxsize=65536)
def tiled_fraction(
    m: int,
    n: int,
    k: int,
    sms: int,
    half_k: float,
    tile_half: float,
    per_sm: float = 1.0,
    split_k: bool = True,
) -> float:
    """Fraction of a GPU's GEMM peak an M x N x K GEMM reaches with its best output tile.

    For each tile in ``TILES`` (the library picks the fastest): the output is cut into
    ``ceil(M / tm) x ceil(N / tn)`` tiles; an SM reaches its peak only with ``per_sm``
    tiles resident (fewer leave its memory latency unhidden), so the device runs
    ``sms x per_sm`` tiles at once; when there are fewer tiles than that and ``split_k``
    (cuBLAS's matmuls; cuDNN's forward convolutions keep one tile per output block) the
    reduction is split (slices of at least ``SPLIT_K_CHUNK``) to fill more slots; the
    tiles run in waves of ``sms x per_sm``, the last one partly idle (wave
    quantisation), and padded rows and columns of the edge tiles are computed for
    nothing. A tile runs at ``i / (i + tile_half)`` of its SM's peak, ``i = tm tn / (tm +
    tn)`` being the multiply-adds per element it loads, times ``kc / (kc + half_k)`` for
    its reduction length ``kc`` (the prologue and epilogue amortised over it). The
    result is symmetric in M and N: a GEMM with few rows and many columns spreads over
    the SMs as well as its transpose."""
    best = 0.0
    slots = sms * per_sm
    for tm, tn in TILES:
        tiles = -(-m // tm) * -(-n // tn)
        split = max(1, min(int(slots // tiles), k // SPLIT_K_CHUNK)) if split_k and tiles < slots else 1
        kc = -(-k // split)
        waves = math.ceil(tiles * split / slots)
        intensity = tm * tn / (tm + tn)
        per_tile = intensity / (intensity + tile_half) * kc / (kc + half_k)
        best = max(best, per_tile * (m * n * k) / (slots * waves * tm * tn * kc))
    return best


@dataclass(frozen=True, slots=True)
class GemmCurve:
    """Achieved FLOP/s of a GEMM-like kind as a function of the implicit GEMM's M, N and K.

    Two forms. Measured (``sms == 0``, what ``calibrate`` fits on a CPU):
    ``peak x s(M) x s(N) x s(K)``, ``s(x) = x / (x + half)``, each factor a saturation
    curve (too few rows to fill the cores, too few columns for a full tile, too short a
    reduction to amortise loading the tiles). Tiled (``sms > 0``, the GPU profiles):
    ``peak x tiled_fraction(M, N, K, sms, half_k, tile_half, tiles_per_sm)``, how the output's tiles
    fill the ``sms`` streaming multiprocessors (``half_m`` and ``half_n`` unused; the
    reduction is split to fill them for the ``gemm`` kind only).
    ``precision`` is the precision class the curve was measured or fitted in; an op of
    another class runs at the curve's rate scaled by the ratio of the device's peaks.
    ``winograd_speedup`` divides the time of a convolution cuDNN can run with a Winograd
    algorithm (``cost.kinds.winograd_eligible``): it does fewer multiplications than the
    direct count its FLOPs are counted in. 1 (no change) on every curve but the GPU
    profiles' ``conv`` curve; a measured curve already holds whatever algorithm ran.
    """

    kind: str
    peak_flops_per_s: float
    half_m: float
    half_n: float
    half_k: float
    precision: str = "fp32"
    sms: int = 0
    tile_half: float = 0.0
    tiles_per_sm: float = 1.0
    winograd_speedup: float = 1.0

    def rate(self, m: float, n: float, k: float) -> float:
        if self.sms:
            return self.peak_flops_per_s * tiled_fraction(
                max(1, int(m)),
                max(1, int(n)),
                max(1, int(k)),
                self.sms,
                self.half_k,
                self.tile_half,
                self.tiles_per_sm,
                self.kind == "gemm",
            )
        return (
            self.peak_flops_per_s
            * (m / (m + self.half_m))
            * (n / (n + self.half_n))
            * (k / (k + self.half_k))
        )

    def time_ms(self, flops: float, mnk: tuple[int, int, int], winograd: bool = False) -> float:
        """Body time of ``flops`` (direct count) on an implicit GEMM of shape ``mnk``; ``winograd``:
        the op is a convolution cuDNN can run with a Winograd algorithm."""
        if flops <= 0:
            return 0.0
        t = 1e3 * flops / max(self.rate(*mnk), 1.0)
        return t / self.winograd_speedup if winograd and self.winograd_speedup != 1.0 else t

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "kind": self.kind,
            "peak_flops_per_s": self.peak_flops_per_s,
            "half_m": self.half_m,
            "half_n": self.half_n,
            "half_k": self.half_k,
            "precision": self.precision,
        }
        if self.sms:
            d.update(sms=self.sms, tile_half=self.tile_half, tiles_per_sm=self.tiles_per_sm)
        if self.winograd_speedup != 1.0:
            d["winograd_speedup"] = self.winograd_speedup
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> GemmCurve:
        c = GemmCurve(
            str(d["kind"]),
            float(d["peak_flops_per_s"]),
            float(d["half_m"]),
            float(d["half_n"]),
            float(d["half_k"]),
            str(d.get("precision", "fp32")),
            int(d.get("sms", 0)),
            float(d.get("tile_half", 0.0)),
            float(d.get("tiles_per_sm", 1.0)),
            float(d.get("winograd_speedup", 1.0)),
        )
        if not (
            c.peak_flops_per_s > 0 and min(c.half_m, c.half_n, c.half_k, c.tile_half) >= 0 and c.sms >= 0
        ):
            raise ValueError(f"GEMM curve {c.kind!r}: peak must be > 0, halves and sms >= 0")
        if not c.tiles_per_sm > 0:
            raise ValueError(f"GEMM curve {c.kind!r}: tiles_per_sm must be > 0")
        if not (math.isfinite(c.winograd_speedup) and c.winograd_speedup >= 1.0):
            raise ValueError(f"GEMM curve {c.kind!r}: winograd_speedup must be >= 1")
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
    view_ms: float = 0.0  # a view op's time where it costs host work on its stream (the CPU runtime)
    drift: float | None = None  # how much the machine's speed varied while calibrating (None: not measured)

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
            "view_ms": self.view_ms,
            "drift": self.drift,
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
            view_ms=opt("view_ms") or 0.0,
            drift=opt("drift"),
        )
