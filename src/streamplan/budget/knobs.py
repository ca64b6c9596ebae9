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
step. A setting **fits** a budget when that replay, given the budget as its device memory,
never runs out: its peak may be above the budget if returning cached segments (what
PyTorch's allocator does before it reports out of memory) keeps it within. Each such
return synchronises the device, which the simulated step leaves out, so ``prescribe``
keeps the fastest setting that fits **without** returning its cache, and only when none
does, the fastest that fits by returning it; and the front of settings no other beats on
both step and peak. The grid is small enough to evaluate whole, so the choice is the
fastest that fits, not an estimate of it. ``remat.knobs`` adds rematerialization to the
knobs.
"""

from __future__ import annotations

import dataclasses
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
    fits: bool  # never out of memory with the budget as the device memory
    recomputed_ops: int = 0  # rematerialization on top of the knobs (``remat.knobs``)
    added_compute_ms: float = 0.0  # the recomputations' own time, part of ``step_ms``
    cache_releases: int = 0  # times the allocator returned its cache to stay within the budget
    needed_bytes: int | None = None  # the least device memory it runs in (``needed_bytes``)

    @property
    def fit_class(self) -> int:
        """0: fits without returning cached memory, 1: fits by returning it, 2: does not fit."""
        return 2 if not self.fits else (1 if self.cache_releases else 0)

    @property
    def label(self) -> str:
        """The knobs, and the recomputations when there are some."""
        if not self.recomputed_ops:
            return self.knobs
        return f"{self.knobs} remat={self.recomputed_ops}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan": self.plan,
            "knobs": self.knobs,
            "step_ms": self.step_ms,
            "exposed_comm_ms": self.exposed_comm_ms,
            "peak_bytes": self.peak_bytes,
            "held_bytes": self.held_bytes,
            "fits": self.fits,
            "recomputed_ops": self.recomputed_ops,
            "added_compute_ms": self.added_compute_ms,
            "cache_releases": self.cache_releases,
            "needed_bytes": self.needed_bytes,
        }


@dataclass(frozen=True)
class KnobPlan:
    """Every setting evaluated, the Pareto front (by step, then peak) and the chosen one (the
    fastest that fits ``budget_bytes``, preferring those that need not return cached memory;
    None when none fits)."""

    graph: str
    budget_bytes: int | None
    points: tuple[KnobPoint, ...]
    front: tuple[KnobPoint, ...]
    chosen: KnobPoint | None
    seconds: float
    remat_tried: int = 0  # settings the rematerialization search was run on (``remat.knobs``)

    def to_dict(self) -> dict[str, Any]:
        return {
            "graph": self.graph,
            "budget_bytes": self.budget_bytes,
            "chosen": None if self.chosen is None else self.chosen.to_dict(),
            "front": [p.to_dict() for p in self.front],
            "points": [p.to_dict() for p in self.points],
            "seconds": self.seconds,
            "remat_tried": self.remat_tried,
        }

    def with_points(self, extra: tuple[KnobPoint, ...], seconds: float, remat_tried: int) -> KnobPlan:
        """This plan with ``extra`` settings evaluated too: the front and the choice made again."""
        points = self.points + extra
        front, chosen = front_and_choice(points, self.budget_bytes)
        return KnobPlan(self.graph, self.budget_bytes, points, front, chosen, seconds, remat_tried)

    def lines(self) -> list[str]:
        sizes = [p.peak_bytes for p in self.points] + [self.budget_bytes or 0]
        unit, gib = ("GiB", 1 << 30) if max(sizes) >= 1 << 30 else ("MiB", 1 << 20)  # the table's unit
        budget = "no budget" if self.budget_bytes is None else f"budget {self.budget_bytes / gib:.2f} {unit}"
        remat = f", rematerialization tried on {self.remat_tried}" if self.remat_tried else ""
        out = [
            f"knobs for {self.graph} ({budget}; worst-case torch-cuda reserved under maximal run-ahead, "
            f"parameters and optimizer state included; {len(self.points)} settings{remat} "
            f"in {self.seconds:.1f} s):"
        ]
        if self.chosen is not None:
            c = self.chosen
            out.append(f"  chosen: {c.plan}")
            if c.recomputed_ops:
                out.append(
                    f"    with rematerialization: {c.recomputed_ops} ops recomputed "
                    f"(+{c.added_compute_ms:.2f} ms of compute; `streamplan remat` shows which)"
                )
            needs = "" if c.needed_bytes is None else f", runs in {c.needed_bytes / gib:.2f} {unit}"
            out.append(f"    step {c.step_ms:.2f} ms, worst-case peak {c.peak_bytes / gib:.2f} {unit}{needs}")
            if c.cache_releases:
                out.append(
                    f"    within the budget only by returning cached memory to the device "
                    f"{c.cache_releases} times a step (each a synchronisation the step time leaves out)"
                )
        elif self.budget_bytes is not None:
            tried = " even with rematerialization" if self.remat_tried else ""
            known = [p for p in self.points if p.needed_bytes is not None]
            if known:  # what a budget must be, not the peak with nothing limiting the cache
                least = min(known, key=lambda p: p.needed_bytes)
                figure = f"the least device memory a setting on the front runs in is {least.needed_bytes / gib:.2f} {unit}"
            else:
                least = min(self.points, key=lambda p: p.peak_bytes)
                figure = f"the smallest peak is {least.peak_bytes / gib:.2f} {unit}"
            out.append(
                f"  no setting fits{tried}: {figure} ({least.label}); more ranks or a smaller batch are needed"
            )
        out.append(f"  Pareto front (step ms, peak {unit}, runs in {unit}, exposed communication ms):")
        shown = list(self.front)
        if self.chosen is not None and self.chosen not in shown:
            shown.append(self.chosen)  # chosen for fitting under the cap, not for its peak
        for p in shown:
            mark = (
                "  <- chosen"
                if p == self.chosen
                else ("", "  (returns its cache)", "  (does not fit)")[p.fit_class]
            )
            remat = f" + remat of {p.recomputed_ops} ops" if p.recomputed_ops else ""
            needs = "-" if p.needed_bytes is None else f"{p.needed_bytes / gib:.2f}"
            out.append(
                f"    {p.step_ms:10.2f} {p.peak_bytes / gib:8.2f} {needs:>8} {p.exposed_comm_ms:8.2f}  "
                f"{p.plan}{remat}{mark}"
            )
        out.append(
            "  (peak: reserved when nothing limits the cache; runs in: a device memory in which the "
            "allocator never runs out, returning its cache when it must)"
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


def knob_context(plan: ParallelPlan, ctx: ScheduleContext) -> ScheduleContext:
    """``ctx`` with ``plan``'s knobs as the ``overlap`` policy's options."""
    options = {
        "forward_prefetch": plan.forward_prefetch,
        "backward_prefetch": plan.backward_prefetch,
        "in_flight": plan.in_flight,
        "record_stream": plan.record_stream,
    }
    return ctx.replace(options=FrozenDict(options))


def evaluate(program: Graph, plan: ParallelPlan, ctx: ScheduleContext, budget_bytes: int | None) -> KnobPoint:
    """One setting: scheduled by ``overlap`` with ``plan``'s knobs, simulated, its peaks replayed.

    It fits ``budget_bytes`` when the allocator, replayed with the budget as its device memory,
    never runs out: a setting whose cache grows past the budget when nothing stops it may still
    fit, because PyTorch's allocator returns its cached free segments to the device (after
    waiting for every pending ``record_stream`` event) before it reports out of memory.
    ``cache_releases`` counts those returns; each is a device synchronisation the simulated
    step does not include."""
    s = make_schedule(program, "overlap", knob_context(plan, ctx))
    tl = simulate(program, s, ctx.cost)
    live = liveness(program, s, includes=EVERYTHING)
    tc = replay(program, s, "torch-cuda", includes=EVERYTHING, live=live, run_ahead=True)
    held = held_peak(live, s).peak_bytes
    fits, releases = True, 0
    if budget_bytes is not None and tc.reserved_peak_bytes > budget_bytes:
        capped = _capped(program, s, live, budget_bytes)
        fits, releases = capped.oom is None, capped.alloc_retries
    return KnobPoint(
        plan.describe(),
        plan.knobs(),
        tl.makespan_ms,
        comm_overlap(program, tl).exposed_ms,
        tc.reserved_peak_bytes,
        held,
        fits,
        cache_releases=releases,
    )


def needed_bytes(
    program: Graph, plan: ParallelPlan, ctx: ScheduleContext, *, tolerance_bytes: int = MIB
) -> int:
    """A device memory in which ``plan``'s setting of ``program`` runs without the allocator
    running out, under maximal run-ahead: the smallest a bisection (to ``tolerance_bytes``)
    finds between its allocated peak and its reserved peak when nothing stops the cache
    growing. The allocator is not monotone in its device memory (with less, it returns its
    cache sooner and may place blocks better), so a smaller one can work too: it is a
    device memory shown to work, not proven the least."""
    s = make_schedule(program, "overlap", knob_context(plan, ctx))
    live = liveness(program, s, includes=EVERYTHING)
    free = replay(program, s, "torch-cuda", includes=EVERYTHING, live=live, run_ahead=True)
    # nothing runs in less than its allocated peak; blocks held back by record_stream are not a
    # floor: short of memory, the allocator waits for their events and takes them back
    high, low = free.reserved_peak_bytes, free.allocated_peak_bytes - 1
    while high - low > tolerance_bytes:
        mid = (low + high) // 2
        if _capped(program, s, live, mid).oom is None:
            high = mid
        else:
            low = mid
    return high


def _capped(program: Graph, schedule, live, capacity_bytes: int):
    return replay(
        program, schedule, "torch-cuda", includes=EVERYTHING, live=live, run_ahead=True,
        device_memory_bytes=capacity_bytes,
    )  # fmt: skip


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
    front, chosen = front_and_choice(tuple(points), budget_bytes)
    # what the front's settings (and the choice) need at least: a few replays each, so only for those
    by_plan = {s.describe(): s for s in settings}
    shown = {p.plan for p in front} | ({chosen.plan} if chosen is not None else set())
    for k, p in enumerate(points):
        if p.plan in shown:
            setting = by_plan[p.plan]
            program = programs[(setting.reshard_after_forward, setting.bucket_bytes)]
            needs = needed_bytes(program, setting, ctx)
            if p.fits and budget_bytes is not None:
                needs = min(needs, budget_bytes)  # shown to run within the budget too
            points[k] = dataclasses.replace(p, needed_bytes=needs)
    front, chosen = front_and_choice(tuple(points), budget_bytes)
    return KnobPlan(step.name, budget_bytes, tuple(points), front, chosen, time.perf_counter() - t0)


def front_and_choice(
    points: tuple[KnobPoint, ...], budget_bytes: int | None
) -> tuple[tuple[KnobPoint, ...], KnobPoint | None]:
    """The settings no other beats on both step and peak (fastest first), and the fastest that
    fits ``budget_bytes`` (the fastest of all without a budget; None when none fits)."""
    ordered = sorted(points, key=lambda p: (p.step_ms, p.peak_bytes, p.recomputed_ops))
    front: list[KnobPoint] = []
    best_peak = None
    for p in ordered:
        if best_peak is None or p.peak_bytes < best_peak:
            front.append(p)
            best_peak = p.peak_bytes
    if budget_bytes is None:
        return tuple(front), ordered[0]
    fitting = [p for p in ordered if p.fits]
    chosen = min(fitting, key=lambda p: p.fit_class) if fitting else None  # stable: fastest of its class
    return tuple(front), chosen
