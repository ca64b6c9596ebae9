"""The text of the ``remat`` command, from a ``RematPlan``."""

from __future__ import annotations

from streamplan.app.remat import RematPlan
from streamplan.report.units import fmt_ms

MIB = 1 << 20


def _mib(n: int) -> str:
    return f"{n / MIB:.4f} MiB"


def _change(new: float, old: float) -> str:
    if old <= 0:
        return ""
    return f"{(new / old - 1) * 100:+.1f}%"


def remat_lines(plan: RematPlan) -> list[str]:
    """Budget, peak and makespan against the baseline, what was recomputed, how it was found."""
    wc = plan.worst_case
    exact = "exact" if wc.exact else f"proven upper bound; at least {_mib(wc.lower_bytes)}"
    mode = "joint with the schedule" if plan.joint else "planned for one stream, then scheduled"
    gap = "" if plan.optimality_gap is None else f", optimality gap {plan.optimality_gap:.2%}"
    checkpointing = plan.solver.endswith("activation checkpointing")
    if checkpointing:  # a framework's policy priced, not a search
        mode = "a fixed policy over the model's numbered blocks, not a search"
        head = f"{plan.graph.name}: {plan.solver} ({plan.includes.brief()}), policy {plan.policy}"
    else:
        head = (
            f"{plan.graph.name}: rematerialization under {_mib(plan.budget_bytes)} "
            f"({plan.includes.brief()}), policy {plan.policy}, solver {plan.solver}{gap}"
        )
    lines = [
        head,
        f"  worst-case peak   {_mib(plan.worst_case_peak_bytes):>16}  ({exact})   baseline "
        f"{_mib(plan.baseline_worst_case_peak_bytes)}  {_change(plan.worst_case_peak_bytes, plan.baseline_worst_case_peak_bytes)}",
        f"  makespan          {fmt_ms(plan.makespan_ms):>16}   on {plan.device}, {plan.schedule.num_streams} streams "
        f"(cap {plan.max_streams})"
        f"   baseline {fmt_ms(plan.baseline_makespan_ms)}  {_change(plan.makespan_ms, plan.baseline_makespan_ms)}",
        f"  recomputed ops    {plan.recomputed_ops:>16}   +{fmt_ms(plan.added_compute_ms)} of compute, "
        f"{plan.recomputed_flops / 1e9:.3f} GFLOP",
        f"  floor             {_mib(plan.floor_bytes):>16}   ({plan.floor_reason})",
        f"  search            {plan.search_time_s:>14.2f} s   {plan.candidates} candidates, "
        f"{plan.evaluated} simulated, {plan.analyses} worst-case analyses"
        + ("" if plan.complete else " (stopped by --search-time-limit: the best plan found so far)"),
        f"  mode              {mode} (the answer was planned on the {plan.reference})",
    ]
    if plan.recomputed_ops == 0:
        lines.append("  the baseline already fits: nothing is recomputed")
    return lines
