"""Training steps in the application layer: a step's memory by category, and the answer to
"does multi-stream raise the training peak, where, and why?" for a set of policies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streamplan.app.analysis import PolicyRow
from streamplan.ir.frozen import freeze
from streamplan.ir.graph import Graph
from streamplan.ir.training import training_step
from streamplan.memory.breakdown import MemoryBreakdown, memory_breakdown
from streamplan.schedule.events import with_derived_waits
from streamplan.schedule.registry import BASELINE_POLICY

MIB = 1 << 20


def step_breakdown(graph: Graph) -> MemoryBreakdown:
    """Totals by category and the peak's composition in the graph's own order (one stream)."""
    order = graph.node_ids
    schedule = with_derived_waits(graph, order, dict.fromkeys(order, 0), "graph order")
    return memory_breakdown(graph, schedule)


@dataclass(frozen=True)
class StepSummary:
    """What ``show`` says about a training step: its loss, its optimizer update, and its memory
    by category (every storage, and the peak in the graph's own order)."""

    loss: str
    loss_is_default: bool
    optimizer: str
    breakdown: MemoryBreakdown

    def to_dict(self) -> dict[str, Any]:
        return {
            "train": True,
            "loss": self.loss,
            "loss_is_default": self.loss_is_default,
            "optimizer": self.optimizer,
            "memory_breakdown": self.breakdown.to_dict(),
        }


def describe_step(graph: Graph) -> StepSummary | None:
    """``show``'s summary of a training step (None for inference)."""
    step = training_step(graph)
    if step is None:
        return None
    return StepSummary(step.loss_fn, step.loss_is_default, step.optimizer, step_breakdown(graph))


@dataclass(frozen=True)
class TrainingAnswer:
    """Per policy, how its worst-case training peak compares with the baseline's, in words."""

    baseline: str
    lines: tuple[str, ...]
    raises: Mapping[str, int]  # policy -> worst-case bytes above the baseline's (upper bounds when not exact)

    def __post_init__(self) -> None:
        object.__setattr__(self, "raises", freeze(self.raises))

    def to_dict(self) -> dict[str, Any]:
        return {"baseline": self.baseline, "raises_bytes": dict(self.raises), "answer": list(self.lines)}


def training_answer(rows: Sequence[PolicyRow]) -> TrainingAnswer | None:
    """Whether and where each policy raises the training peak over the baseline, and why.

    Needs rows of a training step with memory figures (``compare_policies``); None otherwise.
    """
    ok = [r for r in rows if r.memory is not None and r.breakdown is not None]
    if not ok:
        return None
    base = next((r for r in ok if r.policy == BASELINE_POLICY), ok[0])
    b_wc = base.breakdown.peak("worst-case")
    lines = []
    if b_wc is not None and b_wc.total_bytes:
        saved = b_wc.composition["saved_activations"]
        lines.append(
            f"{base.policy}: the step peaks in the {'/'.join(b_wc.phases) or 'step'} at "
            f"{b_wc.total_bytes / MIB:.1f} MiB (parameters and inputs included), {saved / MIB:.1f} MiB of it "
            f"({100 * saved / b_wc.total_bytes:.0f}%) saved activations still held for the backward: what the "
            "forward keeps, not concurrency, sets the training peak"
        )
    raises: dict[str, int] = {}
    for r in ok:
        if r is base:
            continue
        delta = r.memory.worst_case.upper_bytes - base.memory.worst_case.upper_bytes
        raises[r.policy] = delta
        wc = r.breakdown.peak("worst-case")
        if delta <= 0 or wc is None or b_wc is None:
            lines.append(f"{r.policy}: does not raise the worst-case peak ({delta / MIB:+.2f} MiB)")
            continue
        change = ", ".join(
            f"{name.replace('_', ' ')} {(wc.composition[name] - b_wc.composition[name]) / MIB:+.2f}"
            for name in ("saved_activations", "gradients", "temporaries")
        )
        pct = 100 * delta / max(1, base.memory.worst_case.upper_bytes)
        up_to = "" if r.memory.worst_case.exact and base.memory.worst_case.exact else "up to "
        lines.append(
            f"{r.policy}: raises the worst case by {up_to}{delta / MIB:.2f} MiB ({pct:+.1f}% of the activations), in "
            f"the {'/'.join(wc.phases)} while {', '.join(wc.ops[:4])} may run at once; against "
            f"{base.policy}'s peak instant (MiB): {change}"
        )
    lines += _allocator_lines(base, [r for r in ok if r is not base])
    hosts = {r.memory.host_order_peak_bytes for r in ok}
    if len(hosts) == 1 and any(v > 0 for v in raises.values()):
        lines.append(
            f"a program-order (host-order) estimate reports {next(iter(hosts)) / MIB:.2f} MiB for every "
            "policy: it cannot see these overlaps"
        )
    return TrainingAnswer(base.policy, tuple(lines), raises)


def _allocator_lines(base: PolicyRow, others: list[PolicyRow]) -> list[str]:
    """What PyTorch's caching allocator would reserve, where it grows more than the tensors do."""
    if base.memory.torch_cuda is None:
        return []
    reserved0 = base.memory.torch_cuda.reserved_peak_bytes
    out = []
    for r in others:
        tc = r.memory.torch_cuda
        if tc is None or tc.reserved_peak_bytes <= 1.05 * reserved0:
            continue
        out.append(
            f"{r.policy}: PyTorch's caching allocator would reserve {tc.reserved_peak_bytes / MIB:.0f} MiB "
            f"against {reserved0 / MIB:.0f} MiB on one stream (torch-cuda replay): each stream allocates from "
            "its own pool, so memory freed on one stream cannot serve allocations on "
            "another, and frees of blocks used across streams wait for those streams to catch up"
        )
    return out
