"""``remat``: drop and recompute values so the worst-case peak of the final schedule fits a budget."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamplan.app.display import Shown
from streamplan.cost.timeline import Timeline
from streamplan.ir.graph import Graph
from streamplan.ir.includes import ACTIVATIONS, Includes
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.worst_case import WorstCasePeak
from streamplan.remat.search import DEFAULT_LEVELS, RematSearch, search
from streamplan.remat.solvers import DEFAULT_SOLVER
from streamplan.schedule.context import DEFAULT_CONTEXT, ScheduleContext


@dataclass(frozen=True)
class RematPlan(Shown):
    """The rewritten graph (recomputations are ordinary nodes marked ``recompute_of``), its
    schedule and timeline, and the figures that justify it.

    ``worst_case`` is the worst-case analysis of ``schedule`` on ``graph`` (its upper bound
    fits ``budget_bytes``); the ``baseline_*`` figures are the same graph and policy without
    rematerialization. ``optimality_gap`` is the exact solver's proven gap for the plan's
    own solve (0.0 when optimal), None when the method proves nothing or no solve was needed.
    ``recomputed_flops`` are the recomputations' FLOPs; ``candidates`` the plans the search
    made, ``evaluated`` those it scheduled and simulated (the others were ruled out by a
    bound on their makespan); ``complete`` is False when its time limit stopped it.
    """

    graph: Graph
    schedule: StreamSchedule
    timeline: Timeline
    worst_case: WorstCasePeak
    baseline_worst_case: WorstCasePeak
    baseline_makespan_ms: float
    budget_bytes: int
    added_compute_ms: float
    recomputed_ops: int
    solver: str
    policy: str
    optimality_gap: float | None
    floor_bytes: int
    floor_reason: str
    joint: bool
    reference: str
    level_bytes: int | None
    candidates: int
    analyses: int
    search_time_s: float
    device: str
    includes: Includes
    max_streams: int = 0  # the stream cap the answer's schedule ran under
    recomputed_flops: int = 0
    evaluated: int = 0
    complete: bool = True

    def __str__(self) -> str:
        mib = 1 << 20
        return (
            f"{self.graph.name}: worst-case peak {self.worst_case_peak_bytes / mib:.2f} MiB within the budget "
            f"{self.budget_bytes / mib:.2f} MiB (was {self.baseline_worst_case_peak_bytes / mib:.2f} MiB), "
            f"{self.recomputed_ops} ops recomputed, {self.makespan_ms:.3f} ms "
            f"(was {self.baseline_makespan_ms:.3f} ms) under {self.policy} ({self.solver})"
        )

    @property
    def makespan_ms(self) -> float:
        return self.timeline.makespan_ms

    @property
    def worst_case_peak_bytes(self) -> int:
        return self.worst_case.upper_bytes

    @property
    def baseline_worst_case_peak_bytes(self) -> int:
        return self.baseline_worst_case.upper_bytes

    @staticmethod
    def of(result: RematSearch, device: str, includes: Includes) -> RematPlan:
        c, b = result.chosen, result.baseline
        gap = c.solve.optimality_gap if c.solve is not None else None
        return RematPlan(
            graph=c.graph,
            schedule=c.schedule,
            timeline=c.timeline,
            worst_case=c.worst_case,
            baseline_worst_case=b.worst_case,
            baseline_makespan_ms=b.makespan_ms,
            budget_bytes=result.budget_bytes,
            added_compute_ms=c.added_compute_ms,
            recomputed_ops=c.recomputed_ops,
            solver=result.solver,
            policy=result.policy,
            optimality_gap=gap,
            floor_bytes=result.floor.bytes,
            floor_reason=result.floor.reason(),
            joint=result.joint,
            reference=c.reference,
            level_bytes=c.level_bytes,
            candidates=result.candidates,
            analyses=result.analyses,
            search_time_s=result.search_time_s,
            device=device,
            includes=includes,
            max_streams=c.max_streams,
            recomputed_flops=c.recomputed_flops,
            evaluated=result.evaluated,
            complete=result.complete,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.graph.name,
            "policy": self.policy,
            "solver": self.solver,
            "joint": self.joint,
            "device": self.device,
            "includes": self.includes.brief(),
            "budget_bytes": self.budget_bytes,
            "worst_case_peak_bytes": self.worst_case_peak_bytes,
            "worst_case_exact": self.worst_case.exact,
            "baseline_worst_case_peak_bytes": self.baseline_worst_case_peak_bytes,
            "floor_bytes": self.floor_bytes,
            "floor_reason": self.floor_reason,
            "makespan_ms": self.makespan_ms,
            "baseline_makespan_ms": self.baseline_makespan_ms,
            "added_compute_ms": self.added_compute_ms,
            "recomputed_ops": self.recomputed_ops,
            "recomputed_flops": self.recomputed_flops,
            "optimality_gap": self.optimality_gap,
            "streams": self.schedule.num_streams,
            "max_streams": self.max_streams,
            "ops": len(self.graph.nodes),
            "reference_order": self.reference,
            "target_bytes": self.level_bytes,
            "candidates": self.candidates,
            "evaluated": self.evaluated,
            "worst_case_analyses": self.analyses,
            "search_time_s": self.search_time_s,
            "search_complete": self.complete,
        }


def plan_remat(
    graph: Graph,
    budget: str | int | float,
    *,
    policy: str = "asap",
    solver: str = DEFAULT_SOLVER,
    ctx: ScheduleContext | None = None,
    includes: Includes = ACTIVATIONS,
    joint: bool = True,
    levels: int = DEFAULT_LEVELS,
    rounds: int | None = None,
    policy_time_limit_s: float | None = None,
    search_time_limit_s: float | None = None,
) -> RematPlan:
    """The fastest plan and ``policy`` schedule of ``graph`` whose worst-case peak fits ``budget``.

    ``budget``: bytes, ``"2GiB"``-style text, or a factor of the baseline worst case
    (``"0.4x"``). ``joint=False`` plans for one stream and then schedules the result
    (the separate approach, for comparison). ``rounds`` alternations of planning and
    scheduling (default: 2, or 1 on graphs of more than ``ROUNDS_MAX_OPS`` ops).
    ``policy_time_limit_s`` bounds each scheduling of a candidate (default:
    ``ctx.time_limit_s``); ``search_time_limit_s`` the whole search (default: none; when it
    stops the search, the best plan in hand is the answer and ``complete`` is False).
    Raises ``BudgetError`` when nothing fits, with the smallest peak found and the floor no
    plan can go below.
    """
    ctx = ctx or DEFAULT_CONTEXT
    result = search(
        graph,
        budget,
        policy=policy,
        solver=solver,
        ctx=ctx,
        includes=includes,
        levels=levels,
        rounds=rounds,
        joint=joint,
        policy_time_limit_s=policy_time_limit_s,
        search_time_limit_s=search_time_limit_s,
    )
    return RematPlan.of(result, ctx.cost.device_name, includes)


def plan_checkpointing(
    graph: Graph,
    checkpointing: str,
    *,
    policy: str = "asap",
    ctx: ScheduleContext | None = None,
    includes: Includes = ACTIVATIONS,
) -> RematPlan:
    """An activation-checkpointing policy of the training frameworks (``full``: each block keeps
    its input only; ``selective``: also every other matmul and fused attention) written as a
    plan and priced like the search's plans: its rewritten graph, ``policy`` schedule, worst
    case and simulated time (``remat.checkpoint``). ``budget_bytes`` is its own peak."""
    import time

    from streamplan.cost.simulate import simulate
    from streamplan.memory.worst_case import worst_case_peak
    from streamplan.remat.budget import peak_floor
    from streamplan.remat.price import price_checkpointing
    from streamplan.schedule.registry import make_schedule

    ctx = ctx or DEFAULT_CONTEXT
    t0 = time.perf_counter()
    inc = includes
    base_sched = make_schedule(graph, policy, ctx)
    base_wc = worst_case_peak(graph, base_sched, includes=inc, time_limit_s=ctx.time_limit_s)
    c = price_checkpointing(graph, checkpointing, policy=policy, ctx=ctx, includes=inc)
    floor = peak_floor(graph, inc)
    return RematPlan(
        graph=c.graph,
        schedule=c.schedule,
        timeline=c.timeline,
        worst_case=c.worst_case,  # type: ignore[arg-type]
        baseline_worst_case=base_wc,
        baseline_makespan_ms=simulate(graph, base_sched, ctx.cost).makespan_ms,
        budget_bytes=c.peak_bytes or 0,
        added_compute_ms=c.added_compute_ms,
        recomputed_ops=c.recomputed_ops,
        solver=f"{checkpointing} activation checkpointing",
        policy=policy,
        optimality_gap=None,
        floor_bytes=floor.bytes,
        floor_reason=floor.reason(),
        joint=False,
        reference=c.reference,
        level_bytes=None,
        candidates=1,
        analyses=2,
        search_time_s=time.perf_counter() - t0,
        device=ctx.cost.device_name,
        includes=includes,
        max_streams=ctx.max_streams,
        recomputed_flops=c.recomputed_flops,
        evaluated=1,
    )
