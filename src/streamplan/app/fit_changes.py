"""The changes ``fit`` tries when a step does not fit, each with its predicted peak and step time.

Each change is a different way to run the same training (the same samples, the same
update), judged on the device as the step itself is (``fit_memory``: PyTorch's caching
allocator, cuBLAS workspaces, the usable memory):

- ``memory-order``: one stream, the order that minimises the peak (the ``memory`` policy);
- ``remat``: recompute some activations in the backward instead of keeping them
  (``plan_remat`` on one stream, under a budget of what is left once the workspace and the
  allocator's slack are set aside);
- ``budget``: the fastest multi-stream schedule whose worst case fits that budget (the
  ``budget`` policy);
- ``micro-batch``: the largest batch that fits, the requested batch reached by gradient
  accumulation (its time: one micro-step times the number of micro-steps; each micro-step's
  time includes an update, so it is an upper bound).

The searches behind the first three can take minutes on a 10k-op step: ``fit`` runs each
with a hard time limit (``app.bounded``) and says when one was cut short.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamplan.app.fit_memory import DevicePeak, device_peak, op_memory_for, out_of_memory, size_text
from streamplan.errors import StreamplanError
from streamplan.ir.graph import Graph
from streamplan.ir.includes import EVERYTHING
from streamplan.memory.allocators.report import AllocatorOOM

GIB = 1 << 30


@dataclass(frozen=True)
class FitChange:
    """One change: what it is, whether it fits, its predicted peak and times.

    ``fits`` is None when it could not be judged (cut short, refused, not applicable:
    ``detail`` says why). ``step_ms`` is one step as changed; ``batch_ms`` the time to
    process the requested batch (equal to ``step_ms`` except for micro-batches).
    """

    kind: str
    summary: str
    fits: bool | None
    reserved_peak_bytes: int | None = None
    step_ms: float | None = None
    batch_ms: float | None = None
    detail: str = ""
    cut_short: bool = False
    search_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def line(self) -> str:
        if self.fits is None:
            state = "cut short" if self.cut_short else "not applicable"
        else:
            state = "fits" if self.fits else "does not fit"
        figures = ""
        if self.reserved_peak_bytes is not None:
            figures += f" {size_text(self.reserved_peak_bytes)}"
        if self.batch_ms is not None:
            figures += f", {self.batch_ms:.1f} ms per batch"
        detail = f" — {self.detail}" if self.detail else ""
        return f"{self.kind:<13} {state}{',' if figures else ''}{figures}: {self.summary}{detail}"


@dataclass(frozen=True)
class Device:
    """What the changes are judged against: usable bytes and cuBLAS's per-stream workspace."""

    capacity_bytes: int
    workspace_bytes: int


def judge(graph: Graph, run: Any, device: Device) -> tuple[DevicePeak, AllocatorOOM | None]:
    """``run``'s device peak, and where PyTorch runs out of the device's memory (None: it fits,
    if only after the allocator emptied its cache and retried)."""
    opm = op_memory_for(graph, device.workspace_bytes)
    peak = device_peak(graph, run.schedule, run.timeline, op_memory=opm)
    if peak.reserved_peak_bytes <= device.capacity_bytes:
        return peak, None
    return peak, out_of_memory(
        graph, run.schedule, run.timeline, op_memory=opm, capacity_bytes=device.capacity_bytes
    )


def policy_change(session: Any, policy: str, kind: str, summary: str, device: Device) -> FitChange:
    """The step scheduled by ``policy`` (its settings may carry a budget), judged on ``device``."""
    run = session.schedule(policy)
    graph = run.scheduled_graph(session.graph)
    peak, oom = judge(graph, run, device)
    fits = oom is None
    streams = run.schedule.num_streams
    detail = f"{streams} stream{'s' if streams > 1 else ''}, tensors at most {size_text(run_worst_bytes(session, run))}"
    return FitChange(kind, summary, fits, peak.reserved_peak_bytes, run.makespan_ms, run.makespan_ms, detail)


def run_worst_bytes(session: Any, run: Any) -> int:
    """The worst-case peak over every timing of ``run``'s schedule, every storage counted."""
    from streamplan.memory.worst_case import worst_case_peak

    graph = run.scheduled_graph(session.graph)
    wc = worst_case_peak(
        graph,
        run.schedule,
        includes=EVERYTHING,
        time_limit_s=session.settings.time_limit_s,
    )
    return wc.upper_bytes


def remat_change(session: Any, budget_bytes: int, device: Device) -> FitChange:
    """The fastest one-stream rematerialization plan whose peak fits ``budget_bytes``; when the
    allocator's rounding still pushes it over the device, once more under a budget lowered by
    the overshoot."""
    from streamplan.app.remat import plan_remat

    change = None
    for _ in range(2):
        summary = (
            f"recompute activations in the backward (one stream, tensors under {size_text(budget_bytes)})"
        )
        try:
            plan = plan_remat(
                session.graph,
                budget_bytes,
                policy="sequential",
                ctx=session.context("sequential"),
                includes=EVERYTHING,
            )
        except StreamplanError as e:  # nothing fits the budget: the message says how low plans go
            return FitChange("remat", summary, False, detail=e.message)
        peak, oom = judge(plan.graph, plan, device)
        fits = oom is None
        detail = (
            f"{plan.recomputed_ops} recomputations, +{plan.added_compute_ms:.1f} ms of compute, "
            f"tensors {size_text(plan.worst_case_peak_bytes)}"
        )
        change = FitChange(
            "remat", summary, fits, peak.reserved_peak_bytes, plan.makespan_ms, plan.makespan_ms, detail
        )
        if fits:
            break
        budget_bytes -= max(1, peak.reserved_peak_bytes - device.capacity_bytes)
    return change


def budget_change(session: Any, budget_bytes: int, device: Device) -> FitChange:
    """The fastest schedule (the ``budget`` policy) whose worst case, every storage counted, fits
    ``budget_bytes``; lowered once by the overshoot when the allocator pushes it over the device."""
    from streamplan.ir.includes import Includes
    from streamplan.schedule.context import MemoryBudget

    change = None
    for _ in range(2):
        budgeted = session.with_settings(
            includes=Includes(inputs=True, params=True), budget=MemoryBudget(limit_bytes=budget_bytes)
        )
        summary = f"the fastest schedule whose worst case stays under {size_text(budget_bytes)}"
        change = policy_change(budgeted, "budget", "budget", summary, device)
        if change.fits:
            break
        budget_bytes -= max(1, change.reserved_peak_bytes - device.capacity_bytes)
    return change


def micro_batch_change(
    batch: int,
    evaluate: Callable[[int], tuple[int, bool, float]],
    *,
    time_limit_s: float,
    baseline_reserved_bytes: int,
    capacity_bytes: int,
) -> FitChange:
    """The largest batch below ``batch`` that fits: ``evaluate(b)`` gives ``(reserved bytes,
    fits, step ms)`` at batch ``b`` (a capture at that batch). Batch 1 first (if it does not
    fit, none does); then guesses from the straight line through the two nearest known
    peaks (a step's peak grows about linearly with its batch), keeping the bracket
    [largest that fits, smallest that does not], until it closes or the time limit passes."""
    if batch <= 1:
        return FitChange("micro-batch", "micro-batch 1", None, detail="the step is already at batch 1")
    start = time.perf_counter()
    known: dict[int, tuple[int, bool, float]] = {}
    reserved_at = {batch: baseline_reserved_bytes}
    lo, hi, guess = 0, batch, 1  # lo fits (0: none yet), hi does not
    while hi - lo > 1:
        if known and time.perf_counter() - start > time_limit_s:
            break
        known[guess] = evaluate(guess)
        reserved_at[guess] = known[guess][0]
        lo, hi = (guess, hi) if known[guess][1] else (lo, guess)
        if lo == 0 or hi - lo <= 1:
            break
        slope = (reserved_at[hi] - reserved_at[lo]) / (hi - lo)
        estimate = lo + int((capacity_bytes - reserved_at[lo]) / slope) if slope > 0 else hi - 1
        guess = min(hi - 1, max(lo + 1, estimate))
    elapsed = time.perf_counter() - start
    cut = lo > 0 and hi - lo > 1
    if lo == 0:
        return FitChange(
            "micro-batch",
            "micro-batch 1",
            False,
            known[1][0],
            known[1][2],
            detail="even batch 1 does not fit",
            search_s=elapsed,
        )
    reserved, _, step_ms = known[lo]
    steps = math.ceil(batch / lo)
    detail = f"{len(known)} capture{'s' if len(known) > 1 else ''}"
    if hi < batch:
        detail += f"; batch {hi} does not fit"
    if cut:
        detail += f"; cut short at the time limit: a batch from {lo + 1} to {hi - 1} may fit too"
    return FitChange(
        "micro-batch",
        f"micro-batch {lo}, {steps} steps of gradient accumulation",
        True,
        reserved,
        step_ms,
        steps * step_ms,
        detail,
        cut_short=cut,
        search_s=elapsed,
    )
