"""Time curves from timed ops: a GEMM efficiency surface per GEMM-like kind, a monotone curve per other kind.

``fit_curves(samples)`` takes ``(OpFeatures, body_ms)`` pairs (an op's measured time
minus what every op pays) and returns the curves of a ``Calibration``:

- GEMM-like kinds (``gemm``, ``conv``, ``conv1x1``): the four numbers of a
  ``GemmCurve`` (peak FLOP/s and the half-saturation size of M, N and K), fitted by
  least squares on log time with a robust loss, so one noisy sample moves little, and
  each sample weighted by the square root of its time (``time_weights``: a model's
  latency is a sum of times, so its long ops are the ones the surface must get right);
- every other kind: its samples' median time at each work size, made monotone in
  the work (pool-adjacent-violators on the times: moving more bytes never takes
  less time), as a ``TimeCurve``;
- each family additionally gets a pooled curve from all its kinds' samples, which
  costs the kinds of that family the calibration did not time.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

from streamplan.cost.calibration import GemmCurve, TimeCurve
from streamplan.cost.kinds import GEMM_KINDS, OpFeatures, work_unit

MIN_GEMM_SAMPLES = 10  # below this the four GEMM parameters are not determined: a FLOPs curve instead


def fit_curves(
    samples: Iterable[tuple[OpFeatures, float]],
) -> tuple[tuple[TimeCurve, ...], tuple[GemmCurve, ...]]:
    """(time curves by kind and by family, GEMM curves by kind) from timed ops (see the module doc)."""
    by_kind: dict[str, list[tuple[OpFeatures, float]]] = {}
    for f, ms in samples:
        if ms > 0 and (f.flops > 0 or f.bytes_moved > 0):
            by_kind.setdefault(f.kind, []).append((f, ms))
    gemm: list[GemmCurve] = []
    curves: dict[str, TimeCurve] = {}
    family_points: dict[str, list[tuple[float, float]]] = {}
    for kind, group in sorted(by_kind.items()):
        if kind in GEMM_KINDS:
            if len(group) >= MIN_GEMM_SAMPLES:
                gemm.append(fit_gemm(kind, group))
                continue
        unit = work_unit(group[0][0].family)
        points = [(f.flops if unit == "flops" else f.bytes_moved, ms) for f, ms in group]
        points = [(float(w), ms) for w, ms in points if w > 0]
        if not points:
            continue
        curves[kind] = TimeCurve(kind, unit, monotone(points))
        family_points.setdefault(group[0][0].family, []).extend(points)
    for family, points in sorted(family_points.items()):
        if family not in curves:  # a kind named like its family already is that family's curve
            curves[family] = TimeCurve(family, work_unit(family), monotone(points))
    return tuple(curves.values()), tuple(gemm)


def monotone(points: Sequence[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    """Median time per distinct work, then pool-adjacent-violators: time never falls as work grows."""
    by_work: dict[float, list[float]] = {}
    for w, t in points:
        by_work.setdefault(w, []).append(t)
    xs = sorted(by_work)
    blocks: list[list[float]] = []  # [sum of log times, count, first index]
    for i, w in enumerate(xs):
        blocks.append([math.log(statistics.median(by_work[w])), 1.0, float(i)])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, c, _ = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += c
    out: list[tuple[float, float]] = []
    for k, (s, c, first) in enumerate(blocks):
        last = blocks[k + 1][2] if k + 1 < len(blocks) else len(xs)
        for i in range(int(first), int(last)):
            out.append((xs[i], math.exp(s / c)))
    return tuple(out)


def fit_gemm(kind: str, group: Sequence[tuple[OpFeatures, float]]) -> GemmCurve:
    """Least squares on log time of ``flops / (peak x s(M) s(N) s(K))`` (soft-L1 loss), each sample's
    error weighted by ``time_weights``."""
    import numpy as np
    from scipy.optimize import least_squares

    flops = np.array([float(f.flops) for f, _ in group])
    dims = np.array([f.gemm_mnk for f, _ in group], dtype=float)
    log_t = np.log(np.array([ms * 1e-3 for _, ms in group]))
    weights = np.array(time_weights([ms for _, ms in group]))
    best_rate = float(np.max(flops / np.exp(log_t)))

    def model(p: np.ndarray) -> np.ndarray:
        halves = np.exp(p[1:4])
        sat = np.prod(dims / (dims + halves), axis=1)
        return np.log(flops) - p[0] - np.log(sat)

    start = np.array([math.log(best_rate * 1.5), math.log(16.0), math.log(16.0), math.log(16.0)])
    lo = np.array([math.log(best_rate * 0.5), -3.0, -3.0, -3.0])
    hi = np.array([math.log(best_rate * 4.0), 12.0, 12.0, 12.0])
    fit = least_squares(
        lambda p: weights * (model(p) - log_t), start, bounds=(lo, hi), loss="soft_l1", f_scale=0.2
    )
    p = fit.x
    return GemmCurve(kind, float(math.exp(p[0])), *(float(math.exp(x)) for x in p[1:4]))


def time_weights(times_ms: Sequence[float]) -> list[float]:
    """The weight of each sample's log error in a GEMM fit: the square root of its time over the
    median time.

    A model's latency is a sum of op times, so an error on a 2 ms convolution costs a hundred
    times what the same relative error on a 20 µs one does. Unweighted, the four-number surface
    bends to the many small samples: on a 2-core x86 CPU it put the 1 x 1 convolutions' peak at
    260 GFLOP/s (2.6x the best any of them achieved) and predicted 140-160 GFLOP/s at the
    mid-size shapes where CNNs spend their time (M = 196-3136, N and K = 150-1000), which the
    calibration's own samples there measured at 85-100 (1.3-1.4x slower than their fit). The
    square root keeps the small samples in the fit (a linear weight would let the largest few
    decide it alone)."""
    if not times_ms:
        return []
    mid = statistics.median(times_ms)
    return [math.sqrt(t / mid) if mid > 0 else 1.0 for t in times_ms]


def log_errors(samples: Iterable[tuple[OpFeatures, float]], predict) -> list[float]:  # noqa: ANN001
    """|log(predicted / measured)| of each sample under ``predict(features) -> ms``."""
    out = []
    for f, ms in samples:
        p = predict(f)
        if p and p > 0 and ms > 0:
            out.append(abs(math.log(p / ms)))
    return out
