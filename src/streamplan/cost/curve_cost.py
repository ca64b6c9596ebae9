"""What a calibration's measured curves say an op's body costs (``cost.kinds`` names its kind).

``CurveCost(calibration).time_ms(features)`` looks an op up, in this order:

- attention: its parts, ``Q Kᵀ`` and ``P V`` on the measured ``gemm`` surface plus a softmax
  over its scores on the softmax curve (its FLOPs alone cannot say what it costs: narrow
  heads over long sequences spend their time on the scores' exponentials), where the
  calibration measured both;
- a GEMM-like kind: its own GEMM surface, else the ``gemm`` one;
- any other kind: its own curve, else (an in-place ``relu_``, ``silu_``, ``add_``) its
  out-of-place kind's, else its family's pooled curve.

``None`` when nothing measured fits: the caller falls back to the roofline.
"""

from __future__ import annotations

from streamplan.cost.calibration import Calibration, GemmCurve, TimeCurve
from streamplan.cost.kinds import AttentionShape, OpFeatures


class CurveCost:
    """A calibration's time curves by kind, and the lookup of an op's body time in them."""

    def __init__(self, calibration: Calibration):
        self.curves: dict[str, TimeCurve] = {c.kind: c for c in calibration.curves}
        self.gemm_curves: dict[str, GemmCurve] = {c.kind: c for c in calibration.gemm_curves}

    def __bool__(self) -> bool:
        return bool(self.curves or self.gemm_curves)

    def gemm_curve(self, kind: str) -> GemmCurve | None:
        """The GEMM surface of ``kind``, else the ``gemm`` one."""
        return self.gemm_curves.get(kind) or self.gemm_curves.get("gemm")

    def time_ms(self, f: OpFeatures) -> float | None:
        """The body time the measured curves give an op of these features (None: no curve)."""
        if f.attention is not None:
            parts = self._attention_ms(f.attention)
            if parts is not None:
                return parts
        if f.gemm_mnk is not None:
            gemm = self.gemm_curve(f.kind)
            return gemm.time_ms(f.flops, f.gemm_mnk, f.winograd) if gemm is not None else None
        c = self.curves
        curve = c.get(f.kind) or c.get(f.kind.rstrip("_")) or c.get(f.family)
        if curve is None:
            return None
        return curve.time_ms(float(f.flops if curve.unit == "flops" else f.bytes_moved))

    def _attention_ms(self, a: AttentionShape) -> float | None:
        gemm = self.gemm_curves.get("gemm")
        softmax = self.curves.get("_softmax") or self.curves.get("softmax")
        if gemm is None or gemm.sms or softmax is None:  # a spec profile, or nothing measured
            return None
        qk, pv = a.gemm_flops()
        return gemm.time_ms(qk, a.qk_mnk) + gemm.time_ms(pv, a.pv_mnk) + softmax.time_ms(float(a.score_bytes))
