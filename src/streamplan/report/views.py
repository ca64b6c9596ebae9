"""The text of the ``memory``, ``explain``, ``simulate`` and ``run`` commands, from the application's results."""

from __future__ import annotations

from streamplan.app.explain import LITTLE_GAIN, ExplainResult, LatencyNote
from streamplan.app.memory import MemoryAnalysis
from streamplan.app.run import RunReport
from streamplan.app.simulation import SimulationReport
from streamplan.app.training import StepSummary, TrainingAnswer
from streamplan.cost.benchmarks import relative_range
from streamplan.cost.devices import DEVICES
from streamplan.memory.breakdown import Composition
from streamplan.report.calibration import DRIFT_WARN
from streamplan.report.safe_text import quoted
from streamplan.report.units import MiB, fmt_bytes, fmt_ms

TRACE_LAUNCHES = 40  # launches of the host-order trace shown around its peak by default


def memory_lines(a: MemoryAnalysis, *, trace_launches: int | None = TRACE_LAUNCHES) -> list[str]:
    """Every memory figure, the allocator replays, then the host-order trace (one line per launch:
    ``trace_launches`` of them around the peak, with a note of how many more; None for all)."""
    lines = list(a.report.lines())
    if a.run.fusion is not None:
        lines.insert(1, f"  {fusion_line(a.run.fusion_mode, a.run.fusion.summary())}")
    if a.measured is not None:
        extra = " and op scratch/workspaces in torch-cuda" if a.op_memory else ""
        lines.append(f"  {a.measured.text()}{extra}")
    lines.append("  allocator replays of the host order (allocated / reserved peak):")
    for m, r in a.allocators.items():
        oom = (
            f"  OUT OF MEMORY at {r.oom.op} ({r.oom.requested_bytes / MiB:.2f} MiB requested)"
            if r.oom
            else ""
        )
        lines.append(
            f"    {m:11} {r.allocated_peak_bytes / MiB:10.3f} MiB / {r.reserved_peak_bytes / MiB:.3f} MiB{oom}"
        )
    if a.breakdown is not None:
        lines.append("")
        lines.extend(a.breakdown.lines())
    lines.append("")
    trace = a.report.host_order
    lines.extend(trace.lines(trace_launches))
    if trace_launches is not None and len(trace.entries) > trace_launches:
        lines.append(
            f"  ({trace_launches} of {len(trace.entries)} launches, around the peak: --full-trace shows every one)"
        )
    return lines


def step_lines(step: StepSummary) -> list[str]:
    """``show``'s lines for a training step: loss, optimizer, memory by category, the peak."""

    def parts(c: Composition) -> str:
        return ", ".join(f"{n.replace('_', ' ')} {fmt_bytes(b)}" for n, b in c.bytes_by_category if b)

    lines = [
        f"training step: loss = {step.loss}; optimizer update: {step.optimizer}",
        "  every storage, by category: " + parts(step.breakdown.totals),
    ]
    peak = step.breakdown.peak("host-order")
    if peak:
        lines.append(
            f"  peak in graph order (one stream), during the {'/'.join(peak.phases)} at {peak.ops[0]}: "
            f"{fmt_bytes(peak.total_bytes)} = " + parts(peak.composition)
        )
    return lines


def training_answer_lines(a: TrainingAnswer) -> list[str]:
    """Whether and where multi-stream raises the training peak, and why (``compare --train``)."""
    return ["training peak, policy by policy (worst case over all timings):"] + [
        f"  {line}" for line in a.lines
    ]


def explain_lines(e: ExplainResult) -> list[str]:
    """The peaks explained (and, comparing, the chosen schedule's own), then the notes."""
    lines = list(e.explanation.lines())
    other = getattr(e.explanation, "other", None)
    if other is not None:  # a comparison: also explain the chosen schedule's own peaks
        lines.append("")
        lines.extend(other.lines())
    if e.serial_peak_note:
        lines.append(e.serial_peak_note)
    lines.append(e.simulated.text)
    for i, b in enumerate(e.breakdowns):
        lines.append("")
        lines.extend(b.lines(totals=i == 0))
    if e.fusion is not None:
        lines.append("")
        lines.extend(e.fusion.lines())
    elif e.run.fusion is not None:
        lines.append(fusion_line(e.run.fusion_mode, e.run.fusion.summary()))
    if e.comm is not None:
        lines.append("")
        lines.extend(e.comm.lines())
        if e.overlap is not None:
            lines.append(f"  communication on the simulated timeline: {e.overlap}")
    if e.latency is not None:
        lines.append("")
        lines.extend(latency_lines(e.latency))
    return lines


def speedup_text(n: LatencyNote) -> str:
    """``1.04x``, or with the profile's uncertainty ``1.04x ± 0.06: may be a loss on this device``."""
    u = n.speedup_uncertainty
    if u is None:
        return f"{n.speedup:.2f}x"
    text = f"{n.speedup:.2f}x ± {u:.2f}"
    if n.verdict.startswith("may"):
        text += f": {n.verdict} on this device"
    return text


def latency_lines(n: LatencyNote) -> list[str]:
    """The latency part of ``explain``: the bound, why it sits where it does, what would move it."""
    us = 1000.0
    b = n.bound
    mode = "as one CUDA graph" if n.cuda_graphs else "launching kernel by kernel (no CUDA graphs)"
    head = (
        f"latency on {n.device}, {mode}: sequential {fmt_ms(n.sequential_ms)}, {n.policy} {fmt_ms(n.policy_ms)} "
        f"({speedup_text(n)}). "
        + (
            f"Latencies on this profile are typically off by {100 * n.latency_error:.0f}%. "
            if n.latency_error is not None
            else ""
        )
        + f"No schedule can take less than {fmt_ms(b.bound_ms)} ({b.binding} bound), "
        f"so none beats sequential by more than {100 * (n.max_speedup - 1):.0f}%."
    )
    lines = [head]
    if n.max_speedup < LITTLE_GAIN:
        lines.append("  why no schedule can gain much:")
    elif n.little_to_gain:
        lines.append(f"  why {n.policy} gains little here:")
    else:
        lines.append("  where the time goes:")
    if n.launch_bound:
        lines.append(
            f"  - launch-bound: the host needs {fmt_ms(b.launch_total_ms)} to issue the {b.kernels} kernel launches "
            f"({n.launch_per_kernel_ms * us:.1f} us each), {100 * b.launch_total_ms / max(n.sequential_ms, 1e-12):.0f}% "
            f"of the sequential time, while the kernels take {fmt_ms(b.kernel_ms)} on one stream "
            f"({b.kernel_ms / max(b.kernels, 1) * us:.1f} us each on average): streams can only hide the "
            f"{fmt_ms(max(b.kernel_ms - b.launch_total_ms, 0.0))} by which kernel time exceeds launch time, and "
            f"every cross-stream wait costs the host more ({n.policy}: {n.events} events)."
        )
    else:
        lines.append(
            f"  - kernels take {fmt_ms(b.kernel_ms)} of device time on one stream against "
            f"{fmt_ms(b.launch_total_ms)} of host launches: the device, not the host, sets the pace."
        )
    width = f"{n.max_width}" if n.width_exact else f"at least {n.max_width}"
    if n.max_width <= 1:
        lines.append(
            "  - no parallel branches: every op depends on the one before it, one stream is optimal."
        )
    else:
        lines.append(f"  - parallel branches: up to {width} ops are mutually independent.")
    frac = n.critical_path_ms / b.kernel_ms if b.kernel_ms else 1.0
    lines.append(
        f"  - the longest dependency chain alone takes {fmt_ms(n.critical_path_ms)}, {100 * frac:.0f}% of all "
        f"kernel time{': most of the work is on it' if frac >= 0.6 else ''}; the device's capacity alone "
        f"allows {fmt_ms(b.device_work_ms)}."
    )
    helps = []
    if n.graphs is not None:
        g = n.graphs
        helps.append(
            f"CUDA graphs (the host launches the whole schedule once): sequential {fmt_ms(g.sequential_ms)}, "
            f"{n.policy} {fmt_ms(g.policy_ms)} ({g.sequential_ms / max(g.policy_ms, 1e-12):.2f}x over a "
            f"sequential graph), bound {fmt_ms(g.bound_ms)}"
        )
    if n.launch_bound:
        ratio = n.launch_per_kernel_ms / max(b.kernel_ms / max(b.kernels, 1), 1e-12)
        helps.append(
            f"a larger batch: kernels now average {b.kernel_ms / max(b.kernels, 1) * us:.1f} us against "
            f"{n.launch_per_kernel_ms * us:.1f} us of launch; once they run several times longer than a launch "
            f"(now {1 / max(ratio, 1e-12):.1f}x), queued branches overlap"
        )
    if helps:
        lines.append("  what would help: " + "; ".join(helps) + ".")
    return lines


def _what_matched(r: RunReport) -> str:
    d = r.to_dict()
    if not d.get("train"):
        return "outputs"
    return " and ".join(d["compared"]) + f" after one step ({d['optimizer']} update)"


def fusion_line(mode: str, summary: dict) -> str:
    """``fusion stream-aware: 314 ops (313 kernels) run as 216 kernels, 97 of them fused``."""

    def n(k: int, noun: str) -> str:
        return f"{k} {noun}" + ("" if k == 1 else "s")

    return (
        f"fusion {mode}: {n(summary['ops'], 'op')} ({n(summary['kernels_unfused'], 'kernel')}) run as "
        f"{n(summary['kernels'], 'kernel')}, {summary['fused_kernels']} of them fused"
        + (
            f", {summary['concats_in_place']} concatenations written in place"
            if summary["concats_in_place"]
            else ""
        )
    )


NOISY_RUN = 0.25  # repetitions further apart than this (range over median) are flagged
FAR_OFF = 0.25  # a prediction further than this from the measured latency is explained


def run_lines(r: RunReport, *, target: str, repeat: int) -> list[str]:
    """A run's verdict (outputs vs eager) and its measurements beside the predictions (rich markup:
    print them with markup on; the names in them are quoted)."""
    cmp = r.comparison
    ok = "[green]yes[/green]" if cmp.matches_eager else "[red]NO[/red]"
    fused = f", fusion {r.fusion_mode} ({r.kernels} kernels)" if r.fused else ""
    lines = [
        f"{quoted(r.graph.name)} / {quoted(cmp.policy)} on {target}{' with chaos delays' if r.chaos else ''}: "
        f"{r.schedule.num_streams} streams, {r.schedule.num_events} events{fused}",
        f"  {_what_matched(r)} match {getattr(cmp, 'reference', 'eager')}: {ok} "
        f"(max abs error {cmp.max_abs_error:.3g}, max rel {cmp.max_rel_error:.3g})",
    ]
    rel_ms, rel_b = r.latency_relative_error, r.peak_relative_error
    lines.append(
        f"  latency   measured {fmt_ms(cmp.measured_ms)} (median of {repeat}"
        + (", chaos delays included: run without chaos to time it" if r.chaos else "")
        + f"), predicted {fmt_ms(r.simulated.makespan_ms)} on the {r.profile} profile"
        + (f" ({rel_ms:+.0%})" if rel_ms is not None else "")
    )
    times = cmp.result.times_ms
    apart = relative_range(times)
    if len(times) >= 3 and apart > NOISY_RUN and not r.chaos:  # chaos delays vary on purpose
        lines.append(
            f"  the {len(times)} repetitions took {fmt_ms(min(times))} to {fmt_ms(max(times))} "
            f"({apart:.0%} apart): the machine's speed moved while it ran (other work on "
            "it?), so the measured median is that uncertain; run again when it is quiet, or with more --repeat"
        )
    far_off = rel_ms is not None and abs(rel_ms) > FAR_OFF
    if far_off and r.profile_drift is not None and r.profile_drift > DRIFT_WARN:
        lines.append(
            f"  the {quoted(r.profile)} profile was calibrated while the machine's speed varied by "
            f"{r.profile_drift:.0%}: its latencies are that uncertain; calibrate again when the machine is quiet"
        )
    if far_off and r.profile in DEVICES and target == "cpu":
        lines.append(
            f"  the built-in {quoted(r.profile)} profile is not this machine: "
            "`streamplan calibrate --on cpu -o profile.json`, then --device profile.json"
        )
    lines.append(
        f"  peak live activations measured {fmt_bytes(cmp.measured_peak_bytes)}, simulated "
        f"{fmt_bytes(r.simulated_peak_bytes)}"
        + (f" ({rel_b:+.1%})" if rel_b is not None else "")
        + f", worst case over all timings {fmt_bytes(r.worst_case.upper_bytes)}"
    )
    res = cmp.result
    if r.cuda is not None:
        lines.append(
            f"  max_memory_allocated measured {fmt_bytes(res.max_memory_allocated_bytes)}, predicted "
            f"{fmt_bytes(r.cuda.max_memory_allocated_bytes)}; reserved measured "
            f"{fmt_bytes(res.max_memory_reserved_bytes)}, predicted {fmt_bytes(r.cuda.max_memory_reserved_bytes)}"
            + (
                " (torch-cuda replay with the op scratch and stream workspaces measured first)"
                if r.cuda.includes_op_memory
                else ""
            )
        )
    if res.tracked_peak_bytes is not None:
        rel_t = r.tracked_peak_relative_error
        lines.append(
            f"  kernel allocations (op scratch included) measured {fmt_bytes(res.tracked_peak_bytes)}, "
            f"predicted {fmt_bytes(r.predicted_tracked_peak_bytes)} in host order with measured op scratch"
            + (f" ({rel_t:+.1%})" if rel_t is not None else "")
        )
    if target == "cpu" and r.schedule.num_streams > 1:
        lines.append(
            "  note: on this CPU each stream is a thread; with few cores, multi-stream runs are rarely faster."
        )
    return lines


def simulation_lines(r: SimulationReport) -> list[str]:
    """The makespan line, each stream's busy time, and the measured table's coverage."""
    s, tl = r.run.schedule, r.run.timeline
    graphs = " (CUDA graph)" if r.cuda_graphs else ""
    fused = f", fusion {r.run.fusion_mode} ({r.kernels} kernels)" if r.run.fusion is not None else ""
    out = [
        f"{r.model} / {s.policy} on {r.device}{graphs}: makespan {fmt_ms(tl.makespan_ms)}, "
        f"{s.num_streams} streams, {s.num_events} events{fused}"
    ]
    for k, v in r.stream_busy_ms.items():
        out.append(
            f"  stream {k}: busy {fmt_ms(v)} ({100 * v / tl.makespan_ms if tl.makespan_ms else 0:.0f}%)"
        )
    if r.measured is not None:
        out.append(f"  {r.measured.text()}")
    if r.communication is not None:
        out.append(f"  {r.communication}")
    return out
