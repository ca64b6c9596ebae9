"""The text of the ``memory``, ``explain`` and ``run`` commands, from the application's results."""

from __future__ import annotations

from streamplan.app.explain import ExplainResult
from streamplan.app.memory import MemoryAnalysis
from streamplan.app.run import RunReport
from streamplan.report.units import MiB, fmt_bytes, fmt_ms


def memory_lines(a: MemoryAnalysis) -> list[str]:
    """Every memory figure, the allocator replays, then the host-order trace (one line per launch)."""
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
    lines.append("")
    lines.extend(a.report.host_order.lines())
    return lines


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
    if e.fusion is not None:
        lines.append("")
        lines.extend(e.fusion.lines())
    elif e.run.fusion is not None:
        lines.append(fusion_line(e.run.fusion_mode, e.run.fusion.summary()))
    return lines


def fusion_line(mode: str, summary: dict) -> str:
    """``fusion stream-aware: 314 ops (313 kernels) run as 216 kernels, 97 of them fused``."""
    return (
        f"fusion {mode}: {summary['ops']} ops ({summary['kernels_unfused']} kernels) run as "
        f"{summary['kernels']} kernels, {summary['fused_kernels']} of them fused"
        + (
            f", {summary['concats_in_place']} concatenations written in place"
            if summary["concats_in_place"]
            else ""
        )
    )


def run_lines(r: RunReport, *, target: str, repeat: int) -> list[str]:
    """A run's verdict (outputs vs eager) and its measurements beside the predictions (rich markup)."""
    cmp = r.comparison
    ok = "[green]yes[/green]" if cmp.matches_eager else "[red]NO[/red]"
    fused = f", fusion {r.fusion_mode} ({r.kernels} kernels)" if r.fused else ""
    lines = [
        f"{r.graph.name} / {cmp.policy} on {target}{' with chaos delays' if r.chaos else ''}: "
        f"{r.schedule.num_streams} streams, {r.schedule.num_events} events{fused}",
        f"  outputs match eager: {ok} (max abs error {cmp.max_abs_error:.3g}, max rel {cmp.max_rel_error:.3g})",
    ]
    rel_ms, rel_b = r.latency_relative_error, r.peak_relative_error
    lines.append(
        f"  latency   measured {fmt_ms(cmp.measured_ms)} (median of {repeat}"
        + (", chaos delays included: run without chaos to time it" if r.chaos else "")
        + f"), predicted {fmt_ms(r.simulated.makespan_ms)} on the {r.profile} profile"
        + (f" ({rel_ms:+.0%})" if rel_ms is not None else "")
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
