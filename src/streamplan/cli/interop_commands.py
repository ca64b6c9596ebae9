"""``codegen`` and ``report``: a schedule leaves the tool as PyTorch code or as an HTML page."""

from __future__ import annotations

import typer

from streamplan.cli.app import app
from streamplan.cli.common import (
    DEFAULT_POLICIES,
    FUSION_HELP,
    BatchOpt,
    DeviceOpt,
    DtypeOpt,
    ForceOpt,
    FusionOpt,
    IncludeInputsOpt,
    IncludeParamsOpt,
    JsonOpt,
    ModelArg,
    OptimizerOpt,
    PolicyOpt,
    StreamsOpt,
    TimeLimitOpt,
    TrainOpt,
    check_file,
    emit_json,
    err,
    load_graph,
    out,
    parse_policies,
    write_file,
)
from streamplan.cli.progress import progress_display


@app.command()
def codegen(
    model: str = ModelArg,
    policy: str = PolicyOpt,
    schedule_file: str | None = typer.Option(
        None, "--schedule", help="write a saved schedule (verified first) instead of --policy's"
    ),
    output: str | None = typer.Option(None, "-o", "--output", help="Python file to write (default: stdout)"),
    class_name: str | None = typer.Option(None, "--class-name", help="name of the nn.Module class"),
    device: str = DeviceOpt,
    max_streams: int = StreamsOpt,
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    train: bool = TrainOpt,
    optimizer: str = OptimizerOpt,
    fusion: str = typer.Option(
        "none",
        "--fusion",
        help="none only: fused kernels cannot be written as ATen calls (" + FUSION_HELP + ")",
    ),
    force: bool = ForceOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Write a schedule as a self-contained PyTorch module (torch only): streams, events, frees;
    with --train, one training step (forward, loss, backward, optimizer update)."""
    from streamplan.app.codegen import codegen_policy
    from streamplan.app.context import make_context
    from streamplan.ir.schedule import StreamSchedule

    if output:
        check_file(output, force=force, protected=(model, schedule_file))
    saved = StreamSchedule.load(schedule_file) if schedule_file else None
    with progress_display(err) as progress:
        ctx = make_context(device=device, max_streams=max_streams, progress=progress, fusion=fusion)
        g = load_graph(model, batch, dtype, progress, train=train, optimizer=optimizer)
        result = codegen_policy(
            g, saved if saved is not None else policy, ctx, model=model, class_name=class_name
        )
    if output:
        write_file(output, result.source, force=force, protected=(model, schedule_file))
    if as_json:
        emit_json({**result.to_dict(), "output": output})
    elif output:
        p = result.predictions
        err.print(
            f"wrote {output}: class {result.class_name}, {result.num_streams} streams, "
            f"{result.num_events} events; predicted {p.makespan_ms:.4f} ms on {p.device}",
            markup=False,
        )
    else:
        out.file.write(result.source)


@app.command()
def report(
    model: str = ModelArg,
    policies: list[str] | None = typer.Option(
        None, "--policies", help=f"comma-separated; default {DEFAULT_POLICIES}"
    ),
    output: str = typer.Option(..., "-o", "--output", help="HTML file to write"),
    device: str = DeviceOpt,
    max_streams: int = StreamsOpt,
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    include_inputs: bool = IncludeInputsOpt,
    include_params: bool = IncludeParamsOpt,
    train: bool = TrainOpt,
    optimizer: str = OptimizerOpt,
    fusion: str = FusionOpt,
    pareto_points: int = typer.Option(
        6, "--pareto-points", min=0, help="budgets on the Pareto front's grid (0: no front)"
    ),
    time_limit: float = TimeLimitOpt,
    force: bool = ForceOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Write one self-contained HTML page: policy table, memory over time (by role for a training
    step), the latency/memory Pareto front, stream timelines, explanations."""
    from streamplan.app.analysis import MemoryOptions
    from streamplan.app.context import make_context
    from streamplan.app.report import report_model
    from streamplan.report.html import plotly_js, render_html

    check_file(output, force=force, protected=(model,))
    plotly_js()  # a missing plotly fails now, before any work
    names = parse_policies(policies)
    with progress_display(err) as progress:
        ctx = make_context(
            device=device, max_streams=max_streams, progress=progress, fusion=fusion, time_limit_s=time_limit
        )
        g = load_graph(model, batch, dtype, progress, train=train, optimizer=optimizer)
        result = report_model(
            g,
            names,
            ctx,
            model=model,
            includes=MemoryOptions(include_inputs, include_params),
            pareto_points=pareto_points,
        )
        progress("writing the page", None, None)
        page = render_html(result)
    write_file(output, page, force=force, protected=(model,))
    if as_json:
        emit_json({**result.to_dict(), "output": output})
        return
    failed = [p.policy for p in result.policies if p.row.error]
    err.print(
        f"wrote {output}: {len(result.policies) - len(failed)} policies on {result.device}"
        + (f" ({', '.join(failed)} failed)" if failed else ""),
        markup=False,
    )
