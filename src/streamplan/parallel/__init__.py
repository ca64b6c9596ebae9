"""Parallel plans: a training step turned into one rank's program with its collectives.

``ParallelPlan.parse("fsdp=8,prefetch=2")`` reads the grammar (``parallel.plan``);
``rank_program(graph, plan)`` applies it to a captured training step (FSDP in
``parallel.fsdp``, DDP in ``parallel.ddp``). The result is an ordinary graph: every
analysis, policy and runtime takes it as it is; the ``overlap`` policy schedules its
collectives on communication streams with the plan's knobs (``docs/distributed.md``).
"""

from __future__ import annotations

from streamplan.errors import ModelSpecError
from streamplan.ir.graph import Graph
from streamplan.ir.training import training_step
from streamplan.parallel.plan import ParallelPlan

__all__ = ["ParallelPlan", "plan_of", "rank_program"]


def rank_program(graph: Graph, plan: ParallelPlan | str) -> Graph:
    """One rank's program of training step ``graph`` under ``plan`` (a plan or its text)."""
    plan = ParallelPlan.parse(plan)
    if training_step(graph) is None:
        raise ModelSpecError(
            f"{graph.name} is not a training step: a parallel plan splits a training step over ranks",
            hint="ask for the training step (--train, or train=True)",
        )
    if "parallel" in graph.meta:
        raise ModelSpecError(f"{graph.name} is already one rank's program", hint="apply a plan once")
    if plan.strategy == "fsdp":
        from streamplan.parallel.fsdp import fsdp_rank_program

        return fsdp_rank_program(graph, plan)
    from streamplan.parallel.ddp import ddp_rank_program

    return ddp_rank_program(graph, plan)


def plan_of(graph: Graph) -> ParallelPlan | None:
    """The plan a rank program was made with (None for any other graph)."""
    data = graph.meta.get("parallel")
    return None if data is None else ParallelPlan.from_dict(data["plan"])
