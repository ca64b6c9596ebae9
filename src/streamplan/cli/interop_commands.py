"""``codegen`` and ``report``: a schedule leaves the tool as PyTorch code or as an HTML page."""

from __future__ import annotations

import typer

from streamplan.cli.app import app
from streamplan.cli.common import (
    BatchOpt,
    DeviceOpt,
    DtypeOpt,
    ForceOpt,
    JsonOpt,
    ModelArg,
    PolicyOpt,
    StreamsOpt,
    check_file,
    emit_json,
    err,
    load_graph,
    out,
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
    force: bool = ForceOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Write a schedule as a self-contained PyTorch module (torch only): streams, events, frees."""
    from streamplan.app.codegen import codegen_policy
    from streamplan.app.context import make_context
    from streamplan.ir.schedule import StreamSchedule

    if output:
        check_file(output, force=force, protected=(model,) + ((schedule_file,) if schedule_file else ()))
    saved = StreamSchedule.load(schedule_file) if schedule_file else None
    with progress_display(err) as progress:
        ctx = make_context(device=device, max_streams=max_streams, progress=progress)
        g = load_graph(model, batch, dtype, progress)
        result = codegen_policy(
            g, saved if saved is not None else policy, ctx, model=model, class_name=class_name
        )
    if output:
        protected = (model,) + ((schedule_file,) if schedule_file else ())
        write_file(output, result.source, force=force, protected=protected)
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
