"""Parallel plans in the application layer: running a rank program for real on gloo ranks.

``run_parallel(spec, plan)`` builds the model's training problem on the *global* batch
(each rank's batch times the ranks), and hands it to ``runtime.distributed.run_ranks``:
one process per rank, compared with one eager step of the whole batch.
"""

from __future__ import annotations

from typing import Any

from streamplan.errors import ModelSpecError
from streamplan.parallel.plan import ParallelPlan
from streamplan.schedule.context import ScheduleContext


def run_parallel(
    spec: str,
    plan: ParallelPlan | str,
    *,
    batch: int | None = None,
    optimizer: str = "sgd",
    policy: str = "overlap",
    ctx: ScheduleContext | None = None,
    repeat: int = 1,
    chaos: bool = False,
    seed: int = 0,
) -> Any:
    """Run ``spec``'s training step under ``plan`` on gloo processes (``DistributedRun``);
    ``batch`` is each rank's batch (default: the model's own example batch)."""
    import torch

    from streamplan.runtime.distributed import run_ranks
    from streamplan.training_models import training_problem_of

    plan = ParallelPlan.parse(plan)
    if spec.startswith("random") or spec.endswith(".json"):
        raise ModelSpecError(
            f"{spec} has no module to split a batch of: a rank program runs a torch model",
            hint="run a zoo network or a file.py:function model",
        )
    if batch is None:
        problem, _ = training_problem_of(spec)
        first = next(
            (t for t in torch.utils._pytree.tree_leaves(problem.inputs) if isinstance(t, torch.Tensor)), None
        )
        batch = int(first.shape[0]) if first is not None and first.dim() else 1
    problem, _ = training_problem_of(spec, batch=batch * plan.ranks)
    return run_ranks(
        problem, plan, optimizer=optimizer, policy=policy, ctx=ctx, repeat=repeat, chaos=chaos, seed=seed
    )
