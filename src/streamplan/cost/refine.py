"""Refine a calibrated profile on whole models' measured latencies (one time scale per op family).

Micro-benchmarks time each op kind in isolation; inside a model the same op may run a
little faster or slower (its inputs already in cache, a different library path for a
shape the benchmarks did not cover). ``refine_profile(profile, runs)`` takes one-stream
runs of some models, ``(graph, schedule, measured_ms)``, and fits one multiplicative
scale per op family (``cost.kinds.FAMILIES``) so that the simulated latencies match:
a one-stream makespan is the sum of what every op pays plus each family's body time,
so the scales solve a small linear least-squares problem (relative errors, bounded
to [0.25, 4], pulled towards 1 so that a family seen little stays near its
micro-benchmark). A family absent from the runs keeps scale 1.

Used with the runs of *other* models only, this is the leave-one-model-out refinement
``bench/cpu_lomo.py`` reports beside the plain calibration.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from streamplan.cost.calibration import TimeCurve
from streamplan.cost.kinds import op_features
from streamplan.cost.op_classes import is_view_op
from streamplan.cost.opcost import AnalyticCostModel
from streamplan.cost.profile import DeviceProfile
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule

PULL_TO_ONE = 0.05  # weight of the pull of each scale towards 1 (per model run)


def family_times(profile: DeviceProfile, graph: Graph) -> tuple[float, dict[str, float]]:
    """(what every op pays in total, body time per op family) of ``graph`` under ``profile``."""
    model = AnalyticCostModel(profile)
    fixed, bodies = 0.0, {}
    for node in graph.nodes:
        if is_view_op(graph, node):
            continue
        fixed += model.fixed_ms
        fam = op_features(graph, node).family
        bodies[fam] = bodies.get(fam, 0.0) + model.body_ms(graph, node)
    return fixed, bodies


def refine_profile(
    profile: DeviceProfile, runs: Sequence[tuple[Graph, StreamSchedule, float]]
) -> DeviceProfile:
    """``profile`` with each measured family's curves scaled to fit ``runs`` (see the module doc)."""
    if not runs or not profile.calibration.is_measured:
        return profile
    import numpy as np
    from scipy.optimize import lsq_linear

    parts = [family_times(profile, g) for g, _, _ in runs]
    families = sorted({f for _, bodies in parts for f in bodies})
    rows, rhs = [], []
    for (fixed, bodies), (_, _, measured) in zip(parts, runs, strict=True):
        rows.append([bodies.get(f, 0.0) / measured for f in families])
        rhs.append(1.0 - fixed / measured)
    k = len(families)
    a = np.vstack([np.array(rows), PULL_TO_ONE * np.eye(k)])
    b = np.concatenate([np.array(rhs), PULL_TO_ONE * np.ones(k)])
    scale = dict(zip(families, lsq_linear(a, b, bounds=(0.25, 4.0)).x, strict=True))
    cal = profile.calibration

    def family(kind: str) -> str:
        from streamplan.cost.kinds import family_of

        return kind if kind in scale else family_of(kind)

    curves = tuple(
        TimeCurve(c.kind, c.unit, tuple((w, t * scale.get(family(c.kind), 1.0)) for w, t in c.points))
        for c in cal.curves
    )
    gemm = tuple(
        dataclasses.replace(g, peak_flops_per_s=g.peak_flops_per_s / scale.get(g.kind, 1.0))
        for g in cal.gemm_curves
    )
    note = ", ".join(f"{f} x{s:.2f}" for f, s in scale.items())
    sources = tuple(
        sorted({**dict(cal.sources), "refined": f"scaled on {len(runs)} model runs: {note}"}.items())
    )
    return profile.replace(
        calibration=dataclasses.replace(cal, curves=curves, gemm_curves=gemm, sources=sources),
    )
