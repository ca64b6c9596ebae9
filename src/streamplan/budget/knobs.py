"""Prescribing a parallel plan's knobs under a memory budget, and their Pareto front.

For a training step and a plan (``fsdp=N`` or ``ddp=N``), every setting of the knobs people
tune is made into a rank program, scheduled by ``overlap`` and simulated:

- FSDP: reshard-after-forward (true, false) x prefetch depth (0, 1, 2, forward and backward
  alike) x the way cross-stream frees are made: ``record_stream`` with an in-flight limit
  of 1, 2, 4 or none, or event waits (no ``record_stream``; the limit then holds nothing);
- DDP: bucket size (1, 4, 25, 100 MiB) x ``record_stream`` or event waits.

Each setting's memory is the **worst-case allocator peak**: the ``torch-cuda`` replay's
reserved bytes under maximal run-ahead (``memory.launch_time``: the device as far behind
the host as the host waits allow, every ``record_stream`` hold as long as it can last),
counting the parameters (shards), optimizer state and inputs. Its time is the simulated
step. ``prescribe`` keeps the fastest setting whose peak fits the budget, and the front of
settings no other beats on both. The grid is small enough to evaluate whole, so the
choice is the fastest that fits, not an estimate of it.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any

from streamplan.cost.overlap import comm_overlap
from streamplan.cost.simulate import simulate
from streamplan.errors import BudgetError
from streamplan.ir.frozen import FrozenDict
from streamplan.ir.graph import Graph
from streamplan.ir.includes import EVERYTHING
from streamplan.memory.allocators import replay
from streamplan.memory.launch_time import held_peak
from streamplan.memory.liveness import liveness
from streamplan.parallel import ParallelPlan, rank_program
from streamplan.progress import ProgressFn, no_progress
from streamplan.schedule.context import DEFAULT_CONTEXT, ScheduleContext
from streamplan.schedule.registry import make_schedule

PREFETCH = (0, 1, 2)
IN_FLIGHT = (1, 2, 4, None)
BUCKETS_MIB = (1, 4, 25, 100)
MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class KnobPoint:
    """One setting of the knobs (``plan``, in the grammar) and what it costs."""

    plan: str
    knobs: str
    step_ms: float
    exposed_comm_ms: float
    peak_bytes: int  # worst-case torch-cuda reserved, residents included
    held_bytes: int  # worst-case held bytes (exact sizes), residents included
    fits: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan": self.plan,
            "knobs": self.knobs,
            "step_ms": self.step_ms,
            "exposed_comm_ms": self.exposed_comm_ms,
            "peak_bytes": self.peak_bytes,
            "held_bytes": self.held_bytes,
            "fits": self.fits,
        }


@dataclass(frozen=True)
class KnobPlan:
    """Every setting evaluated, the Pareto front (by step, then peak) and the chosen one (the
    fastest that fits ``budget_bytes``; None when none does)."""

    graph: str
    budget_bytes: int | None
    points: tuple[KnobPoint, ...]
    front: tuple[KnobPoint, ...]
    chosen: KnobPoint | None
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "graph": self.graph,
            "budget_bytes": self.budget_bytes,
            "chosen": None if self.chosen is None else self.chosen.to_dict(),
            "front": [p.to_dict() for p in self.front],
            "points": [p.to_dict() for p in self.points],
            "seconds": self.seconds,
        }

    def lines(self) -> list[str]:
        gib = 1 << 30
        budget = "no budget" if self.budget_bytes is None else f"budget {self.budget_bytes / gib:.2f} GiB"
        out = [
            f"knobs for {self.graph} ({budget}; worst-case torch-cuda reserved under maximal run-ahead, "
            f"parameters and optimizer state included; {len(self.points)} settings in {self.seconds:.1f} s):"
        ]
        if self.chosen is not None:
            c = self.chosen
            out.append(f"  chosen: {c.plan}")
            out.append(f"    step {c.step_ms:.2f} ms, worst-case peak {c.peak_bytes / gib:.2f} GiB")
        elif self.budget_bytes is not None:
            least = min(self.points, key=lambda p: p.peak_bytes)
            out.append(
                f"  no setting fits: the smallest peak is {least.peak_bytes / gib:.2f} GiB ({least.knobs}); "
                "rematerialization or more ranks are needed"
            )
        out.append("  Pareto front (step ms, peak GiB, exposed communication ms):")
        for p in self.front:
            mark = "  <- chosen" if p == self.chosen else ("" if p.fits else "  (over budget)")
            out.append(
                f"    {p.step_ms:10.2f} {p.peak_bytes / gib:8.2f} {p.exposed_comm_ms:8.2f}  {p.plan}{mark}"
            )
        return out


def knob_settings(plan: ParallelPlan) -> list[ParallelPlan]:
    """The grid of settings of ``plan``'s knobs (module docstring)."""
    out = []
    if plan.strategy == "ddp":
        for mib, rs in itertools.product(BUCKETS_MIB, (True, False)):
            out.append(plan.replace(bucket_bytes=mib * MIB, record_stream=rs))
        return out
    for reshard, depth in itertools.product((True, False), PREFETCH):
        base = plan.replace(reshard_after_forward=reshard, forward_prefetch=depth, backward_prefetch=depth)
        out += [base.replace(record_stream=True, in_flight=k) for k in IN_FLIGHT]
        out.append(base.replace(record_stream=False, in_flight=None))
    return out


def evaluate(program: Graph, plan: ParallelPlan, ctx: ScheduleContext, budget_bytes: int | None) -> KnobPoint:
    """One setting: scheduled by ``overlap`` with ``plan``'s knobs, simulated, its peaks replayed."""
    options = {
        "forward_prefetch": plan.forward_prefetch,
        "backward_prefetch": plan.backward_prefetch,
        "in_flight": plan.in_flight,
        "record_stream": plan.record_stream,
    }
    s = make_schedule(program, "overlap", ctx.replace(options=FrozenDict(options)))
    tl = simulate(program, s, ctx.cost)
    live = liveness(program, s, includes=EVERYTHING)
    tc = replay(program, s, "torch-cuda", includes=EVERYTHING, live=live, run_ahead=True)
    held = held_peak(live, s).peak_bytes
    fits = budget_bytes is None or tc.reserved_peak_bytes <= budget_bytes
    return KnobPoint(
        plan.describe(),
        plan.knobs(),
        tl.makespan_ms,
        comm_overlap(program, tl).exposed_ms,
        tc.reserved_peak_bytes,
        held,
        fits,
    )


def prescribe(
    step: Graph,
    plan: ParallelPlan | str,
    *,
    budget_bytes: int | None = None,
    ctx: ScheduleContext | None = None,
    progress: ProgressFn = no_progress,
) -> KnobPlan:
    """Evaluate every setting of ``plan``'s knobs on training step ``step`` and keep the fastest
    whose worst-case allocator peak fits ``budget_bytes`` (module docstring)."""
    ctx = ctx or DEFAULT_CONTEXT
    plan = ParallelPlan.parse(plan)
    if budget_bytes is not None and budget_bytes <= 0:
        raise BudgetError(f"a budget is a positive number of bytes, got {budget_bytes}")
    t0 = time.perf_counter()
    settings = knob_settings(plan)
    programs: dict[tuple, Graph] = {}  # the graph depends on reshard and bucket only
    points = []
    for k, setting in enumerate(settings):
        progress("knobs: evaluating settings", k, len(settings))
        key = (setting.reshard_after_forward, setting.bucket_bytes)
        if key not in programs:
            programs[key] = rank_program(step, setting)
        points.append(evaluate(programs[key], setting, ctx, budget_bytes))
    ordered = sorted(points, key=lambda p: (p.step_ms, p.peak_bytes))
    front, best_peak = [], None
    for p in ordered:
        if best_peak is None or p.peak_bytes < best_peak:
            front.append(p)
            best_peak = p.peak_bytes
    chosen = next((p for p in ordered if p.fits), None) if budget_bytes is not None else ordered[0]
    return KnobPlan(step.name, budget_bytes, tuple(points), tuple(front), chosen, time.perf_counter() - t0)
