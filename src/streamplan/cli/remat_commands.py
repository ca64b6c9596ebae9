"""``remat``: recompute values so that the worst-case peak of the final schedule fits a budget."""

from __future__ import annotations

import typer

from streamplan.cli.app import app
from streamplan.cli.common import check_files, emit_json, err, out, write_file
from streamplan.cli.options import COUNTED, Given, takes


def _solver_help() -> str:
    from streamplan.remat.solvers import SOLVERS

    return f"rematerialization solver: {', '.join(SOLVERS)}"


RematBudgetOpt = typer.Option(
    None,
    "--budget",
    "-b",
    help="worst-case peak to fit: bytes, 512MiB, 2GiB, 800MB (10^6 B), or a factor of today's peak (0.4x)",
)
RematTimeLimitOpt = typer.Option(
    10.0, "--time-limit", min=0.01, help="seconds for each solve and each worst-case analysis"
)


@app.command()
@takes(
    "model", "budget", "policy", "max_streams", "device", "batch", "dtype", "train", "optimizer", "precision", "attention", "parallel",
    *COUNTED, "time_limit", "measured", "force", "as_json",
    budget=RematBudgetOpt, time_limit=RematTimeLimitOpt,
)  # fmt: skip
def remat(
    o: Given,
    checkpointing: str | None = typer.Option(
        None,
        "--checkpointing",
        help="instead of a budget: price a framework's activation checkpointing of the model's "
        "numbered blocks as a plan (full: each block keeps its input; selective: also every "
        "other matmul)",
    ),
    solver: str = typer.Option("scalable", "--solver", "-s", help=_solver_help()),
    policy_time_limit: float = typer.Option(
        2.0,
        "--policy-time-limit",
        min=0.01,
        help="seconds for each scheduling of a candidate (a searching policy such as budget runs per candidate)",
    ),
    levels: int = typer.Option(
        8, "--levels", min=1, help="solver targets tried between the floor and today's peak"
    ),
    rounds: int | None = typer.Option(
        None,
        "--rounds",
        min=1,
        help="alternations of planning and scheduling per target (default: 2; 1 above 4,000 ops)",
    ),
    search_time_limit: float | None = typer.Option(
        None,
        "--search-time-limit",
        min=0.01,
        help="seconds for the whole search: then the best plan in hand is the answer (default: none)",
    ),
    separate: bool = typer.Option(
        False, "--separate", help="plan for one stream, then schedule (no joint search): for comparison"
    ),
    output: str | None = typer.Option(None, "-o", "--output", help="rewritten graph JSON to write"),
    schedule_out: str | None = typer.Option(None, "--schedule-out", help="its schedule JSON to write"),
) -> None:
    """Fit the worst-case peak of the final multi-stream schedule under a budget, recomputing as little as
    possible: prints the plan; -o saves the rewritten graph, --schedule-out its schedule."""
    from streamplan.errors import BudgetError
    from streamplan.ir.serialize import dumps
    from streamplan.remat.checkpoint import CHECKPOINT_POLICIES
    from streamplan.remat.solvers import solver_info
    from streamplan.report.remat import remat_lines
    from streamplan.schedule.registry import policy_info

    policy_info(o.policy)
    solver_info(solver)
    if (o.budget is None) == (checkpointing is None):
        raise BudgetError(
            "remat needs either --budget (search for a plan) or --checkpointing (price a policy)",
            hint="e.g. --budget 0.5x, or --checkpointing full",
        )
    if checkpointing is not None and checkpointing not in CHECKPOINT_POLICIES:
        raise BudgetError(
            f"unknown checkpointing policy {checkpointing!r}",
            hint=f"choose one of: {', '.join(CHECKPOINT_POLICIES)}",
        )
    settings = o.settings(budget=None)  # remat's budget bounds the plan, not a scheduling policy
    budget = o.settings().budget  # a budget that cannot be read fails before any work
    check_files((output, schedule_out), force=o.force, protected=o.protected())
    with o.session(settings) as s:
        if checkpointing is not None:
            plan = s.checkpointing(checkpointing, policy=o.policy)
        else:
            plan = s.remat(
                budget,
                policy=o.policy,
                solver=solver,
                joint=not separate,
                levels=levels,
                rounds=rounds,
                policy_time_limit_s=policy_time_limit,
                search_time_limit_s=search_time_limit,
            )
    if output:
        write_file(output, dumps(plan.graph), force=o.force, protected=o.protected())
    if schedule_out:
        write_file(schedule_out, plan.schedule.dumps(), force=o.force, protected=o.protected())
    if o.as_json:
        emit_json(plan.to_dict())
        return
    for line in remat_lines(plan):
        out.print(line, markup=False)
    for path, what in ((output, "graph"), (schedule_out, "schedule")):
        if path:
            err.print(f"wrote {path} ({what})")
