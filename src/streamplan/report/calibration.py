"""How a calibration looks on the terminal: the constants it measured and how well the fit holds."""

from __future__ import annotations

from streamplan.app.calibrate import CalibrationResult
from streamplan.report.units import fmt_ms

DRIFT_WARN = 0.15  # a calibration whose probe varied more than this is flagged


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.0f}%"


def calibration_lines(r: CalibrationResult, path: str | None = None) -> list[str]:
    """The profile's measured constants, its fit to the micro-benchmarks, and how to use it."""
    p, cal = r.profile, r.profile.calibration
    m = r.measured
    sup = cal.contention
    lines = [
        f"calibrated {p.name} on {m['device_name']} in {r.elapsed_s:.0f} s "
        f"({m['meta'].get('mode', '?')} mode, median of {m['meta'].get('repetitions', '?')} repetitions)",
    ]
    if r.target == "cpu":
        lines.append(
            f"  per op: {fmt_ms(p.kernel_fixed_ms)} of interpreter work (shared by all streams: one lock), "
            f"a cross-stream wait adds {fmt_ms(p.event_resume_ms)} (a worker thread waking up)"
        )
    else:
        lines.append(
            f"  per op: host launch {fmt_ms(p.launch_overhead_ms)}, device {fmt_ms(p.kernel_fixed_ms)}; "
            f"events {fmt_ms(p.event_record_ms + p.event_wait_ms)} host, resume {fmt_ms(p.event_resume_ms)}"
        )
        lines.append(
            f"  CUDA graph: launch {fmt_ms(p.graph_launch_ms)}, per node {fmt_ms(p.graph_node_ms)}, "
            f"cross-stream edge {fmt_ms(p.graph_edge_ms)}"
        )
    bw = cal.stream_bandwidth_bytes_per_s
    gemm = ", ".join(f"{g.kind} {g.peak_flops_per_s / 1e9:.0f}" for g in cal.gemm_curves)
    lines.append(
        f"  {r.fit.op_samples} ops timed over {len(r.fit.kinds)} kinds (median error of the fitted curves "
        f"{100 * r.fit.op_median_error:.0f}%); peak GFLOP/s per op: {gemm or '-'}; "
        f"best bandwidth {bw / 1e9:.1f} GB/s"
        if bw
        else "  no bandwidth measured"
    )
    lines.append(
        f"  contention: concurrent ops get {100 * sup.sm:.0f}% of the {'cores' if r.target == 'cpu' else 'SMs'}, "
        f"{sup.dram:.2f}x one op's bandwidth, interference {sup.interference:.2f} per co-runner's bandwidth"
    )
    lines.append("  micro-benchmarks, simulated with the fitted profile against measured:")
    for f in r.fit.runs:
        speed = ""
        if f.speedup_measured is not None:
            speed = (
                f", speedup {f.speedup_simulated:.2f}x vs {f.speedup_measured:.2f}x ({_pct(f.speedup_error)})"
            )
        lines.append(
            f"    {f.name:<34} {fmt_ms(f.simulated_ms):>10} vs {fmt_ms(f.measured_ms):>10} ({_pct(f.error)}){speed}"
        )
    probe = m.get("probe_ms") or []
    if len(probe) > 1:
        lines.append(
            f"  steadiness: a small fixed model took {fmt_ms(min(probe))} to {fmt_ms(max(probe))} over the "
            f"{len(probe)} phases (drift {100 * (cal.drift or 0.0):.0f}%"
            + (
                "; see the warning"
                if (cal.drift or 0.0) > DRIFT_WARN
                else f": within the {DRIFT_WARN:.0%} tolerated"
            )
            + ")"
        )
    lat, spd = cal.latency_error, cal.speedup_error
    lines.append(
        f"  typical error (in sample): latency {_pct(lat).lstrip('+')}, speedup {_pct(spd).lstrip('+')} "
        "(explain states speedups with this uncertainty)"
    )
    if path:
        lines.append(f"  wrote {path}: use it as --device {path} (simulate, compare, explain, run ...)")
    return lines


def drift_warning(r: CalibrationResult) -> str | None:
    """A warning when the machine's speed moved while it was measured (None: it held still)."""
    drift = r.profile.calibration.drift
    if drift is None or drift <= DRIFT_WARN:
        return None
    probe = r.measured.get("probe_ms") or []
    lat = r.profile.calibration.latency_error
    return (
        f"warning: this machine's speed varied by {100 * drift:.0f}% while it was calibrated (a small fixed "
        f"model took {fmt_ms(min(probe))} to {fmt_ms(max(probe))} across {len(probe)} phases): is something "
        "else running on it? The profile's latencies are that uncertain"
        + (f" (typical error {100 * lat:.0f}%, drift included)" if lat is not None else "")
        + "; calibrate again when the machine is quiet."
    )
