"""What fusing before scheduling cost a schedule (the fusion part of ``explain``).

When ops are fused first, a kernel may run branches a stream scheduler would have run
in parallel. The note names those kernels and their branches, says how the widest set
of independent ops shrank, and sets beside it what scheduling first and then fusing
along each stream keeps: kernels, streams, makespan and worst-case peak of both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamplan.app.analysis import PolicyRun, run_policy
from streamplan.fusion.branches import MergedBranches, merged_branches
from streamplan.fusion.plan import fuses_before_scheduling
from streamplan.fusion.transform import kernel_count
from streamplan.ir.analysis import max_parallelism
from streamplan.ir.graph import Graph
from streamplan.memory.worst_case import worst_case_peak
from streamplan.schedule.context import ScheduleContext

SHOWN_KERNELS = 8
MiB = 1 << 20


@dataclass(frozen=True)
class FusionFigures:
    """One fused schedule in numbers."""

    mode: str
    kernels: int
    streams: int
    makespan_ms: float
    worst_case_peak_bytes: int

    @staticmethod
    def of(run: PolicyRun, source: Graph) -> FusionFigures:
        g = run.scheduled_graph(source)
        return FusionFigures(
            run.fusion_mode,
            kernel_count(g),
            run.schedule.num_streams,
            run.makespan_ms,
            worst_case_peak(g, run.schedule).upper_bytes,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "kernels": self.kernels,
            "streams": self.streams,
            "makespan_ms": self.makespan_ms,
            "worst_case_peak_bytes": self.worst_case_peak_bytes,
        }


@dataclass(frozen=True)
class FusionNote:
    """The kernels that merged parallel branches when fusing first, and what the stream-aware
    order keeps instead (``first`` and ``stream_aware`` figures of the same policy)."""

    policy: str
    ops: int
    duplicates: tuple[tuple[str, str], ...]  # (op, the earlier identical op it reuses)
    merged: tuple[MergedBranches, ...]
    parallelism_ops: int  # the widest set of mutually independent ops, as captured
    parallelism_kernels: int  # the same after fusing first
    first: FusionFigures
    stream_aware: FusionFigures

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "ops": self.ops,
            "duplicates": {op: kept for op, kept in self.duplicates},
            "merged_branches": [m.to_dict() for m in self.merged],
            "parallelism_ops": self.parallelism_ops,
            "parallelism_kernels": self.parallelism_kernels,
            "first": self.first.to_dict(),
            "stream_aware": self.stream_aware.to_dict(),
        }

    def lines(self) -> list[str]:
        f, sa = self.first, self.stream_aware
        out = [
            f"fusion first: {_n(self.ops, 'op')} became {_n(f.kernels, 'kernel')} before {self.policy} "
            "scheduled them."
        ]
        if self.duplicates:
            shown = ", ".join(f"{op} = {kept}" for op, kept in self.duplicates[:SHOWN_KERNELS])
            more = (
                f" and {len(self.duplicates) - SHOWN_KERNELS} more"
                if len(self.duplicates) > SHOWN_KERNELS
                else ""
            )
            out.append(f"  {len(self.duplicates)} op(s) repeat earlier ones and run once: {shown}{more}")
        for m in self.merged[:SHOWN_KERNELS]:
            out.append(
                f"  kernel {m.kernel} runs branches "
                + " | ".join("[" + ", ".join(b) + "]" for b in m.branches)
            )
        if len(self.merged) > SHOWN_KERNELS:
            out.append(f"  ... and {len(self.merged) - SHOWN_KERNELS} more kernels that merge branches")
        lost = self.parallelism_kernels < self.parallelism_ops
        out.append(
            f"  the widest set of independent ops was {self.parallelism_ops}, of kernels it is "
            f"{self.parallelism_kernels}: "
            + (
                "fusing first removed parallelism the scheduler could have used."
                if lost
                else "no parallelism lost."
            )
        )
        out.append(
            f"  stream-aware (schedule, then fuse along each stream) keeps: {_n(sa.kernels, 'kernel')} on "
            f"{_n(sa.streams, 'stream')}, makespan {sa.makespan_ms:.4f} ms and worst-case peak "
            f"{sa.worst_case_peak_bytes / MiB:.2f} MiB; first: {_n(f.kernels, 'kernel')} on "
            f"{_n(f.streams, 'stream')}, "
            f"{f.makespan_ms:.4f} ms and {f.worst_case_peak_bytes / MiB:.2f} MiB."
        )
        return out


def fusion_note(graph: Graph, run: PolicyRun, ctx: ScheduleContext) -> FusionNote | None:
    """The note for a run fused ``first`` (None for any other run)."""
    if run.fusion is None or not fuses_before_scheduling(run.schedule):
        return None
    ctx.progress("fusion: the stream-aware order for comparison", None, None)
    aware = run_policy(graph, run.policy, ctx.replace(fusion="stream-aware"))
    return FusionNote(
        policy=run.policy,
        ops=len(graph.nodes),
        duplicates=tuple(run.fusion.duplicates.items()),
        merged=tuple(merged_branches(run.fusion)),
        parallelism_ops=max_parallelism(graph).width,
        parallelism_kernels=max_parallelism(run.scheduled_graph(graph)).width,
        first=FusionFigures.of(run, graph),
        stream_aware=FusionFigures.of(aware, graph),
    )


def _n(k: int, noun: str) -> str:
    """``1 kernel``, ``2 kernels``."""
    return f"{k} {noun}" + ("" if k == 1 else "s")
