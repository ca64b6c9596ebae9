"""``pareto``: the latency/memory trade-off of a model, budget by budget."""

from __future__ import annotations

import dataclasses

import typer

from streamplan.cli.app import app
from streamplan.cli.common import check_file, emit_json, err, out, write_file
from streamplan.cli.options import COUNTED, Given, takes

ParetoTimeLimitOpt = typer.Option(10.0, "--time-limit", min=0.1, help="search time per budget (s)")


@app.command()
@takes(
    "model", "device", "cuda_graphs", "max_streams", "batch", "dtype", "measured", "budget_figure",
    *COUNTED, "time_limit", "force", "no_cache", "train", "optimizer", "precision", "attention", "parallel", "as_json",
    time_limit=ParetoTimeLimitOpt,
)  # fmt: skip
def pareto(
    o: Given,
    points: int = typer.Option(
        8, "--points", min=2, help="budgets on the grid from the floor to the fastest"
    ),
    output: str | None = typer.Option(None, "-o", "--output", help="plot the front: .png, .svg or .pdf"),
) -> None:
    """The fastest schedule for each memory budget, from the floor to the fastest, beside every fixed policy."""
    from streamplan.report.pareto import front_tables, render_front
    from streamplan.report.plot import image_format

    fmt = None
    if output:
        check_file(output, force=o.force, protected=o.protected())
        fmt = image_format(output)
    with o.session() as s:
        front = s.pareto(points=points, figure=o.budget_figure)
        image = render_front(front, fmt=fmt) if fmt else None
    if output and image is not None:
        write_file(output, image, force=o.force, protected=o.protected())
        if not o.as_json:
            err.print(f"wrote {output}")
    if o.as_json:
        emit_json(front.to_dict())
        return
    out.print(front_tables(front))


PlanParallelOpt = typer.Option(
    ..., "--parallel", help="the plan whose knobs to choose: fsdp=8 or ddp=8 (docs/distributed.md)"
)
PlanOptimizerOpt = typer.Option("adam", "--optimizer", help="the update in the step: sgd, momentum or adam")


@app.command("plan")
@takes(
    "model", "device", "batch", "dtype", "no_cache", "optimizer", "parallel", "as_json",
    parallel=PlanParallelOpt, optimizer=PlanOptimizerOpt,
)  # fmt: skip
def plan_command(
    o: Given,
    budget: str | None = typer.Option(
        None,
        "--budget",
        help="device memory per rank the allocator must never run out of: 70GiB, 80GB, bytes",
    ),
    remat_tries: int = typer.Option(
        3,
        "--remat-tries",
        min=0,
        help="settings to try rematerialization on, per round, when the fastest do not fit (0: knobs only)",
    ),
) -> None:
    """Choose a parallel plan's knobs (prefetch, in-flight limit, reshard, record_stream, buckets)
    and, when they are not enough, rematerialization: the fastest simulated step that fits the
    budget under maximal run-ahead, and the Pareto front."""
    given = dataclasses.replace(o, train=True)
    with given.session() as s:
        result = s.plan_knobs(budget=budget, remat_tries=remat_tries)
    if o.as_json:
        emit_json(result.to_dict())
        return
    for line in result.lines():
        out.print(line, markup=False, soft_wrap=True)
