"""What a given plan costs: rewritten, scheduled with a policy, simulated and proven.

The search prices the plans its solvers find; this prices a plan from elsewhere — an
activation-checkpointing policy (``remat.checkpoint``) — the same way, so the two can
be compared at equal worst-case peak.
"""

from __future__ import annotations

from streamplan.cost.simulate import simulate
from streamplan.ir.graph import Graph
from streamplan.ir.includes import Includes
from streamplan.memory.worst_case import worst_case_peak
from streamplan.remat.candidates import ONE_STREAM_ORDER, UPDATES_EARLY_ORDER, PlanCandidate
from streamplan.remat.checkpoint import checkpoint_plan
from streamplan.remat.orders import updates_early
from streamplan.remat.problem import RematProblem, evaluate
from streamplan.remat.rewrite import recomputations, rewrite
from streamplan.schedule.context import ScheduleContext
from streamplan.schedule.registry import make_schedule


def price(
    problem: RematProblem, seq: tuple[int, ...], *, policy: str, ctx: ScheduleContext, reference: str
) -> PlanCandidate:
    """Plan ``seq`` of ``problem`` as a scheduled, simulated candidate with its worst case."""
    graph = rewrite(problem, seq)
    sched = make_schedule(graph, policy, ctx)
    inc = problem.includes
    wc = worst_case_peak(
        graph,
        sched,
        includes=inc,
        time_limit_s=ctx.time_limit_s,
        seed=ctx.seed,
    )
    recomputed = recomputations(graph)
    added = sum(ctx.cost.op_time_ms(graph, n) for n in recomputed)
    return PlanCandidate(
        graph,
        sched,
        simulate(graph, sched, ctx.cost),
        wc,
        added,
        len(recomputed),
        level_bytes=None,
        reference=reference,
        max_streams=ctx.max_streams,
    )


def price_checkpointing(
    graph: Graph, checkpointing: str, *, policy: str, ctx: ScheduleContext, includes: Includes = Includes()
) -> PlanCandidate:
    """The activation-checkpointing policy ``checkpointing`` (``full``, ``selective``) as a plan,
    priced on the graph's order and, for a step with an optimizer, on the updates-early order
    (each update right after its gradient, as the search may also use): the lower peak, then
    the faster."""
    orders = [(ONE_STREAM_ORDER, graph.node_ids)]
    early = updates_early(graph)
    if early is not None:
        orders.append((UPDATES_EARLY_ORDER, early))
    best: PlanCandidate | None = None
    for name, order in orders:
        problem = RematProblem.build(graph, order, ctx.cost, includes)
        seq = checkpoint_plan(problem, checkpointing)
        evaluate(problem, seq)  # a plan that reads what is not there fails here, with the step
        cand = price(problem, seq, policy=policy, ctx=ctx, reference=name)
        if best is None or (cand.peak_bytes, cand.makespan_ms) < (best.peak_bytes, best.makespan_ms):
            best = cand
    assert best is not None
    return best
