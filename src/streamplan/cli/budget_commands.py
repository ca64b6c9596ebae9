"""``pareto``: the latency/memory trade-off of a model, budget by budget."""

from __future__ import annotations

import typer

from streamplan.cli.app import app
from streamplan.cli.common import (
    BatchOpt,
    BudgetFigureOpt,
    CudaGraphsOpt,
    DeviceOpt,
    DtypeOpt,
    ForceOpt,
    IncludeInputsOpt,
    IncludeParamsOpt,
    JsonOpt,
    MeasuredOpt,
    ModelArg,
    NoCacheOpt,
    OptimizerOpt,
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


@app.command()
def pareto(
    model: str = ModelArg,
    device: str = DeviceOpt,
    cuda_graphs: bool = CudaGraphsOpt,
    max_streams: int = StreamsOpt,
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    measured: str | None = MeasuredOpt,
    points: int = typer.Option(
        8, "--points", min=2, help="budgets on the grid from the floor to the fastest"
    ),
    budget_figure: str = BudgetFigureOpt,
    include_inputs: bool = IncludeInputsOpt,
    include_params: bool = IncludeParamsOpt,
    time_limit: float = typer.Option(10.0, "--time-limit", min=0.1, help="search time per budget (s)"),
    output: str | None = typer.Option(None, "-o", "--output", help="plot the front: .png, .svg or .pdf"),
    force: bool = ForceOpt,
    no_cache: bool = NoCacheOpt,
    train: bool = TrainOpt,
    optimizer: str = OptimizerOpt,
    as_json: bool = JsonOpt,
) -> None:
    """The fastest schedule for each memory budget, from the floor to the fastest, beside every fixed policy."""
    from streamplan.app.budget import pareto_front
    from streamplan.app.context import make_context
    from streamplan.report.pareto import front_tables, render_front
    from streamplan.report.plot import image_format
    from streamplan.schedule.context import MemoryBudget

    fmt = None
    if output:
        check_file(output, force=force, protected=(model, measured))
        fmt = image_format(output)
    kind = MemoryBudget(
        limit_bytes=0, figure=budget_figure, includes_inputs=include_inputs, includes_params=include_params
    )
    with progress_display(err) as progress:
        ctx = make_context(
            device=device,
            measured=measured,
            cuda_graphs=cuda_graphs,
            max_streams=max_streams,
            time_limit_s=time_limit,
            progress=progress,
        )
        g = load_graph(model, batch, dtype, progress, no_cache=no_cache, train=train, optimizer=optimizer)
        front = pareto_front(g, ctx, points=points, budget=kind)
        image = render_front(front, fmt=fmt) if fmt else None
    if output and image is not None:
        write_file(output, image, force=force, protected=(model, measured))
        if not as_json:
            err.print(f"wrote {output}")
    if as_json:
        emit_json(front.to_dict())
        return
    out.print(front_tables(front))
