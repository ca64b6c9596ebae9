"""``remat``: recompute values so that the worst-case peak of the final schedule fits a budget."""

from __future__ import annotations

import typer

from streamplan.cli.app import app
from streamplan.cli.common import (
    BatchOpt,
    DeviceOpt,
    DtypeOpt,
    ForceOpt,
    IncludeInputsOpt,
    IncludeParamsOpt,
    JsonOpt,
    MeasuredOpt,
    ModelArg,
    OptimizerOpt,
    PolicyOpt,
    StreamsOpt,
    TrainOpt,
    check_file,
    emit_json,
    err,
    load_graph,
    out,
    write_file,
)
from streamplan.cli.progress import progress_display


def _solver_help() -> str:
    from streamplan.remat.solvers import SOLVERS

    return f"rematerialization solver: {', '.join(SOLVERS)}"


@app.command()
def remat(
    model: str = ModelArg,
    budget: str | None = typer.Option(
        None,
        "--budget",
        "-b",
        help="worst-case peak to fit: bytes, 512MiB, 2GiB, or a factor of today's peak (0.4x)",
    ),
    checkpointing: str | None = typer.Option(
        None,
        "--checkpointing",
        help="instead of a budget: price a framework's activation checkpointing of the model's "
        "numbered blocks as a plan (full: each block keeps its input; selective: also every "
        "other matmul)",
    ),
    policy: str = PolicyOpt,
    solver: str = typer.Option("scalable", "--solver", "-s", help=_solver_help()),
    max_streams: int = StreamsOpt,
    device: str = DeviceOpt,
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    train: bool = TrainOpt,
    optimizer: str = OptimizerOpt,
    include_inputs: bool = IncludeInputsOpt,
    include_params: bool = IncludeParamsOpt,
    time_limit: float = typer.Option(
        10.0, "--time-limit", min=0.01, help="seconds for each solve and each worst-case analysis"
    ),
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
    measured: str | None = MeasuredOpt,
    force: bool = ForceOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Fit the worst-case peak of the final multi-stream schedule under a budget, recomputing as little as
    possible: prints the plan; -o saves the rewritten graph, --schedule-out its schedule."""
    from streamplan.app.analysis import MemoryOptions
    from streamplan.app.context import make_context
    from streamplan.app.remat import plan_remat
    from streamplan.errors import BudgetError
    from streamplan.remat.budget import parse_budget
    from streamplan.remat.checkpoint import CHECKPOINT_POLICIES
    from streamplan.remat.solvers import solver_info
    from streamplan.report.remat import remat_lines
    from streamplan.schedule.registry import policy_info

    policy_info(policy)
    solver_info(solver)
    if (budget is None) == (checkpointing is None):
        raise BudgetError(
            "remat needs either --budget (search for a plan) or --checkpointing (price a policy)",
            hint="e.g. --budget 0.5x, or --checkpointing full",
        )
    if checkpointing is not None and checkpointing not in CHECKPOINT_POLICIES:
        raise BudgetError(
            f"unknown checkpointing policy {checkpointing!r}",
            hint=f"choose one of: {', '.join(CHECKPOINT_POLICIES)}",
        )
    if budget is not None:
        parse_budget(budget, baseline_bytes=1)  # a budget that cannot be read fails before any work
    for path in (output, schedule_out):
        if path:
            check_file(path, force=force, protected=(model,))
    with progress_display(err) as progress:
        ctx = make_context(
            device=device,
            measured=measured,
            max_streams=max_streams,
            time_limit_s=time_limit,
            progress=progress,
        )
        g = load_graph(model, batch, dtype, progress, train=train, optimizer=optimizer)
        if checkpointing is not None:
            from streamplan.app.remat import plan_checkpointing

            plan = plan_checkpointing(
                g,
                checkpointing,
                policy=policy,
                ctx=ctx,
                includes=MemoryOptions(include_inputs, include_params),
            )
        else:
            plan = plan_remat(
                g,
                budget,
                policy=policy,
                solver=solver,
                ctx=ctx,
                includes=MemoryOptions(include_inputs, include_params),
                joint=not separate,
                levels=levels,
                rounds=rounds,
                policy_time_limit_s=policy_time_limit,
                search_time_limit_s=search_time_limit,
            )
    if output:
        from streamplan.ir.serialize import dumps

        write_file(output, dumps(plan.graph), force=force, protected=(model,))
    if schedule_out:
        write_file(schedule_out, plan.schedule.dumps(), force=force, protected=(model,))
    if as_json:
        emit_json(plan.to_dict())
        return
    for line in remat_lines(plan):
        out.print(line, markup=False)
    for path, what in ((output, "graph"), (schedule_out, "schedule")):
        if path:
            err.print(f"wrote {path} ({what})")
