"""A device profile from a calibration's measurements (``streamplan calibrate``'s fit; no torch).

``fit_profile(measurements)`` sets, in this order:

1. what every op pays: on the CPU runtime, the chain's time per op (the executor's
   interpreter work, which holds the lock every stream needs: ``fixed_holds_lock``),
   with no separate host launch (each worker thread issues its own ops); on CUDA, the
   host's time to issue an op through the runtime (``launch_overhead_ms``), the device
   time of a tiny kernel (``kernel_fixed_ms``), the per-node time and launch of a CUDA
   graph, and the host cost of an event record and wait;
2. the time curves of every op kind (``cost.fit_curves``) from the timed ops, each
   op's time less the tiny op's (what every op pays is already in step 1), and the
   best bandwidth a pointwise op or copy achieved;
3. the latency a cross-stream wait adds (``event_resume_ms``, and ``graph_edge_ms``
   inside a CUDA graph), by bisection until the simulator reproduces the measured
   ping-pong chain;
4. contention (``Supply``: the share of cores or SMs and of bandwidth concurrent ops
   get, how much co-runners' memory traffic slows them and, on the CPU, how much their
   interpreter work slows each other's: ``lock_interference``), by minimising the
   error of the simulated *speedups* of the co-run cases over their one-stream runs
   (speedups, so that errors of the op curves do not leak into the contention
   constants);
5. the error estimates ``explain`` uses: the relative error of every one-stream run
   and of every speedup, simulated against measured, with the fitted profile (in
   sample: a lower bound on the error on models the calibration never ran); the
   latency error also holds the machine's drift while it was measured (half the
   probe's range, added in quadrature: constants measured on a machine whose speed
   moved by 40% are not better than ±20%, however well they fit each other). Speedups
   are ratios of runs timed alternately, which a drift moves far less.

Each constant's source is recorded in ``calibration.sources``.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from streamplan.cost.benchmarks import DeviceMeasurements, TimedRun
from streamplan.cost.calibration import Calibration
from streamplan.cost.contention import Supply
from streamplan.cost.devices import get_device
from streamplan.cost.fit_curves import fit_curves, log_errors
from streamplan.cost.kinds import OpFeatures, op_features
from streamplan.cost.op_classes import is_view_op
from streamplan.cost.opcost import AnalyticCostModel
from streamplan.cost.profile import DeviceProfile
from streamplan.cost.simulate import simulate

MIN_BODY_FRACTION = 0.02  # an op's body is at least this share of its measured time (noise floor)


@dataclass(frozen=True)
class RunFit:
    """One timed run beside its simulation under the fitted profile."""

    name: str
    purpose: str
    measured_ms: float
    simulated_ms: float
    speedup_measured: float | None = None
    speedup_simulated: float | None = None

    @property
    def error(self) -> float:
        return (self.simulated_ms - self.measured_ms) / self.measured_ms if self.measured_ms else 0.0

    @property
    def speedup_error(self) -> float | None:
        if self.speedup_measured is None or self.speedup_simulated is None:
            return None
        return (self.speedup_simulated - self.speedup_measured) / self.speedup_measured

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "purpose": self.purpose,
            "measured_ms": self.measured_ms,
            "simulated_ms": self.simulated_ms,
            "error": self.error,
            "speedup_measured": self.speedup_measured,
            "speedup_simulated": self.speedup_simulated,
            "speedup_error": self.speedup_error,
        }


@dataclass(frozen=True)
class ProfileFit:
    """The fitted profile and how well it reproduces what was measured."""

    profile: DeviceProfile
    runs: tuple[RunFit, ...]
    op_samples: int
    op_median_error: float  # median |log(predicted / measured)| over the timed ops
    kinds: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile.name,
            "runs": [r.to_dict() for r in self.runs],
            "op_samples": self.op_samples,
            "op_median_error": self.op_median_error,
            "kinds": list(self.kinds),
        }


def fit_profile(m: DeviceMeasurements, *, name: str | None = None) -> ProfileFit:
    """Fit a profile to ``m`` (see the module doc)."""
    base, sources = _base(m, name)
    samples = _op_samples(m)
    curves, gemm = fit_curves(samples)
    bandwidth = _stream_bandwidth(samples)
    cal = Calibration(
        curves=curves,
        gemm_curves=gemm,
        stream_bandwidth_bytes_per_s=bandwidth,
        fixed_holds_lock=m.target == "cpu",
        view_ms=(m.view_ms or 0.0) if m.target == "cpu" else 0.0,
        sources=(),
        measured=tuple(sorted(m.meta.items())),
    )
    profile = base.replace(calibration=cal)
    if m.target == "cpu" and bandwidth:
        # the roofline fallback for kinds nobody timed: one op runs on one core at the measured rates
        best = max((g.peak_flops_per_s for g in gemm), default=profile.peak("fp32") / m.cores)
        profile = profile.replace(
            peak_flops={"fp32": best * m.cores, "fp64": best * m.cores / 2},
            mem_bw_bytes_per_s=bandwidth * m.cores,
            gemm_efficiency=1.0,
            vector_efficiency=0.25,
            memory_efficiency=1.0,
        )
        sources["peak_flops"] = "the fastest GEMM-like curve's peak, times the cores (one op per core)"
        sources["mem_bw_bytes_per_s"] = "the best bandwidth a pointwise op or copy achieved, times the cores"
    profile = _fit_events(profile, m, sources)
    profile = _fit_contention(profile, m, sources)
    runs = _run_fits(profile, m)
    model = AnalyticCostModel(profile)
    errs = log_errors(samples, model.curve_time_ms)
    lat = [abs(r.error) for r in runs if r.speedup_measured is None]
    spd = [abs(r.speedup_error) for r in runs if r.speedup_error is not None]
    drift = m.drift if len(m.probe_ms) > 1 else None
    latency_error = _rms(lat)
    if latency_error is not None and drift:
        latency_error = math.hypot(latency_error, drift / 2)
    if m.target == "cpu" and m.view_ms:
        sources["view_ms"] = "the slope of a chain of transposes through the CPU runtime: a view's host work"
    if drift is not None:
        sources["drift"] = (
            f"a small fixed model timed {len(m.probe_ms)} times, once per phase: (max - min) / median"
        )
    sources.update(
        curves=f"{len(samples)} ops timed on this device ({', '.join(sorted({f.kind for f, _ in samples}))})",
        stream_bandwidth_bytes_per_s="the best bandwidth a pointwise op or copy achieved",
        latency_error="RMS relative error of the calibration's own one-stream runs (in sample)"
        + (", and half the machine's drift while calibrating, in quadrature" if drift else ""),
        speedup_error="RMS relative error of the co-run speedups the contention fit used (in sample)",
    )
    cal = profile.calibration
    profile = profile.replace(
        calibration=_with(
            cal,
            latency_error=latency_error,
            speedup_error=_rms(spd),
            drift=drift,
            sources=tuple(sorted(sources.items())),
        )
    )
    return ProfileFit(
        profile,
        tuple(runs),
        len(samples),
        statistics.median(errs) if errs else 0.0,
        tuple(sorted({f.kind for f, _ in samples})),
    )


def _rms(xs: list[float]) -> float | None:
    return math.sqrt(sum(x * x for x in xs) / len(xs)) if xs else None


def _base(m: DeviceMeasurements, name: str | None) -> tuple[DeviceProfile, dict[str, str]]:
    """The spec figures to start from and the per-op constants measured directly."""
    sources: dict[str, str] = {}
    when = f"{m.meta.get('host', '?')}, {m.meta.get('date', '?')}"
    if m.target == "cpu":
        base = get_device("cpu").replace(
            name=name or "cpu-calibrated",
            summary=f"calibrated on {m.device_name} ({when})",
            sms=m.cores,
            max_op_fraction=1.0 / m.cores,
            launch_overhead_ms=0.0,
            kernel_fixed_ms=m.per_op_ms,
            event_record_ms=0.0,
            event_wait_ms=0.0,
        )
        sources["kernel_fixed_ms"] = "a chain of one-element ops through the CPU runtime: time per op"
        sources["launch_overhead_ms"] = "0: each worker thread issues its own ops (no host thread)"
        sources["sms"] = "os.cpu_count(); one op runs on one core (torch at one thread per worker)"
        return base, sources
    family = next((f for f in ("h200", "h100", "a100", "v100") if f in m.device_name.lower()), "h100")
    base = get_device(family).replace(
        name=name or f"{family}-calibrated",
        summary=f"calibrated on {m.device_name} ({when})",
        sms=m.cores,
        launch_overhead_ms=m.launch_ms if m.launch_ms is not None else get_device(family).launch_overhead_ms,
        kernel_fixed_ms=m.kernel_ms if m.kernel_ms is not None else m.tiny_op_ms,
        graph_node_ms=m.graph_node_ms if m.graph_node_ms is not None else get_device(family).graph_node_ms,
        graph_launch_ms=m.graph_launch_ms
        if m.graph_launch_ms is not None
        else get_device(family).graph_launch_ms,
        event_record_ms=(m.event_host_ms or 0.0) / 2,
        event_wait_ms=(m.event_host_ms or 0.0) / 2,
    )
    sources.update(
        spec=f"the {family} profile's spec figures (peak FLOP/s, bandwidth) for kinds nobody timed",
        sms="the device's multiprocessor count",
        launch_overhead_ms="host time to issue one op through the runtime's CUDA host loop",
        kernel_fixed_ms="device time of a one-element kernel, back to back behind a sleep",
        graph_node_ms="the chain replayed as one CUDA graph: device time per node",
        graph_launch_ms="host time of one CUDAGraph.replay",
        event_record_ms="host time of an event record plus a wait, halved",
        event_wait_ms="host time of an event record plus a wait, halved",
    )
    return base, sources


def _op_samples(m: DeviceMeasurements) -> list[tuple[OpFeatures, float]]:
    """(features, body ms) of every timed kernel: its time less what the tiny op took."""
    g = m.op_graph
    out = []
    for node in g.nodes:
        ms = m.op_ms.get(node.id)
        if ms is None or is_view_op(g, node):
            continue
        body = max(ms - m.tiny_op_ms, MIN_BODY_FRACTION * ms)
        out.append((op_features(g, node), body))
    return out


def _stream_bandwidth(samples: list[tuple[OpFeatures, float]]) -> float | None:
    rates = sorted(
        f.bytes_moved / (ms * 1e-3)
        for f, ms in samples
        if f.family in ("pointwise", "copy") and f.bytes_moved >= 1 << 16
    )
    if not rates:
        return None
    return rates[int(0.9 * (len(rates) - 1))]  # near the best, not an outlier


def _makespan(profile: DeviceProfile, run: TimedRun) -> float:
    return simulate(
        run.graph, run.schedule, AnalyticCostModel(profile, cuda_graphs=run.cuda_graphs)
    ).makespan_ms


def _fit_events(profile: DeviceProfile, m: DeviceMeasurements, sources: dict[str, str]) -> DeviceProfile:
    """Bisect the resume latency (and the graph edge latency) until the ping-pong chain matches."""
    for graphs, field_name in ((False, "event_resume_ms"), (True, "graph_edge_ms")):
        run = next((r for r in m.runs if r.purpose == "events" and r.cuda_graphs == graphs), None)
        if run is None or (graphs and not profile.has_cuda_graphs):
            continue
        lo, hi = 0.0, max(1.0, run.measured_ms)
        for _ in range(40):
            mid = (lo + hi) / 2
            if _makespan(profile.replace(**{field_name: mid}), run) < run.measured_ms:
                lo = mid
            else:
                hi = mid
        profile = profile.replace(**{field_name: (lo + hi) / 2})
        sources[field_name] = f"bisected until the simulated '{run.name}' run matched its measured time"
    return profile


def _fit_contention(profile: DeviceProfile, m: DeviceMeasurements, sources: dict[str, str]) -> DeviceProfile:
    """Minimise the squared log error of the co-run speedups over (SM share, bandwidth, interference,
    and on the CPU the lock's interference)."""
    pairs = [(r, m.run(r.pair)) for r in m.runs if r.purpose == "contention" and r.pair and m.run(r.pair)]
    if not pairs:
        return profile
    from scipy.optimize import minimize

    cpu = m.target == "cpu"

    def with_supply(x) -> DeviceProfile:  # noqa: ANN001
        sm, dram, beta = _bounded(x, min_sm=1.0 / m.cores if cpu else 1.0)
        # the lock's hand-offs (module doc of cost.contention, step 5): only where ops hold a lock
        lock_beta = math.exp(min(x[3], 5.0)) if cpu else 0.0
        cal = profile.calibration
        supply = Supply(sm=sm, dram=dram, lock=1.0, interference=beta, lock_interference=lock_beta)
        return profile.replace(calibration=_with(cal, contention=supply))

    def loss(x) -> float:  # noqa: ANN001
        p = with_supply(x)
        total = 0.0
        for many, one in pairs:
            measured = one.measured_ms / many.measured_ms
            simulated = _makespan(p, one) / _makespan(p, many)
            total += math.log(simulated / measured) ** 2
        return total

    best = min(
        (minimize(loss, x0, method="Nelder-Mead", options={"xatol": 1e-3, "fatol": 1e-6, "maxiter": 300})
         for x0 in ([0.0, 0.0, -2.0, -2.0], [1.0, 1.0, -4.0, 0.0])),
        key=lambda r: r.fun,
    )  # fmt: skip
    sources["contention"] = (
        f"fitted to the speedups of {len(pairs)} co-run cases (compute- and memory-bound chains, and "
        "on the CPU chains of small ops, on several streams against one stream)"
    )
    return with_supply(best.x)


def _bounded(x, *, min_sm: float) -> tuple[float, float, float]:  # noqa: ANN001
    """Unconstrained optimiser coordinates -> (SM share, bandwidth, interference).

    The SM share lies in [min_sm, 1]: on the CPU, at least the one core an op runs on
    (less would slow an op running alone, whose time was measured alone); on a GPU
    it stays 1 (``min_sm`` = 1). The bandwidth lies in [1, 4] units of the best
    bandwidth one op achieved (the device offers at least that). Interference >= 0.
    """
    sm = min_sm + (1.0 - min_sm) * _sigmoid(x[0])
    dram = 4.0 ** _sigmoid(x[1])
    beta = math.exp(min(x[2], 5.0))
    return sm, dram, beta


def _sigmoid(v: float) -> float:
    """1 / (1 + e^-v), for any v the optimiser may wander to (no overflow)."""
    return 1.0 / (1.0 + math.exp(-min(max(v, -50.0), 50.0)))


def _with(cal: Calibration, **changes: Any) -> Calibration:
    import dataclasses

    return dataclasses.replace(cal, **changes)


def _run_fits(profile: DeviceProfile, m: DeviceMeasurements) -> list[RunFit]:
    fits: dict[str, RunFit] = {}
    for r in m.runs:
        fits[r.name] = RunFit(r.name, r.purpose, r.measured_ms, _makespan(profile, r))
    out = []
    for r in m.runs:
        f = fits[r.name]
        base = fits.get(r.pair) if r.pair and r.purpose == "contention" else None
        if base is not None:
            f = RunFit(
                f.name,
                f.purpose,
                f.measured_ms,
                f.simulated_ms,
                base.measured_ms / f.measured_ms,
                base.simulated_ms / f.simulated_ms,
            )
        out.append(f)
    return out
