"""``memory``, ``explain`` and ``plot``: every memory figure of a schedule, why, and a picture."""

from __future__ import annotations

from pathlib import Path

import typer

from streamplan.cli.app import app
from streamplan.cli.common import (
    BatchOpt,
    DeviceOpt,
    DtypeOpt,
    ForceOpt,
    FusionOpt,
    IncludeInputsOpt,
    IncludeParamsOpt,
    JsonOpt,
    MeasuredOpt,
    ModelArg,
    PolicyOpt,
    StreamsOpt,
    check_file,
    emit_json,
    err,
    load_graph,
    out,
    parse_policies,
    write_file,
)
from streamplan.cli.progress import progress_display
from streamplan.errors import ModelSpecError


@app.command("memory")
def memory_cmd(
    model: str = ModelArg,
    policy: str = PolicyOpt,
    device: str = DeviceOpt,
    max_streams: int = StreamsOpt,
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    include_inputs: bool = IncludeInputsOpt,
    include_params: bool = IncludeParamsOpt,
    device_memory: float | None = typer.Option(
        None, "--device-memory-gib", help="check the torch-cuda replay against this capacity (GiB)"
    ),
    measured: str | None = MeasuredOpt,
    fusion: str = FusionOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Every memory figure for one schedule, and the host-order trace."""
    from streamplan.app.analysis import MemoryOptions, run_policy
    from streamplan.app.context import make_context
    from streamplan.app.memory import analyze_run_memory
    from streamplan.report.views import memory_lines

    with progress_display(err) as progress:
        ctx = make_context(
            device=device, measured=measured, max_streams=max_streams, progress=progress, fusion=fusion
        )
        g = load_graph(model, batch, dtype, progress)
        run = run_policy(g, policy, ctx)
        analysis = analyze_run_memory(
            g,
            run,
            ctx,
            includes=MemoryOptions(include_inputs, include_params),
            device_memory_bytes=int(device_memory * (1 << 30)) if device_memory else None,
        )
    if as_json:
        emit_json(analysis.to_dict())
        return
    for line in memory_lines(analysis):
        out.print(line, markup=False)


@app.command()
def explain(
    model: str = ModelArg,
    policy: str = PolicyOpt,
    vs: str | None = typer.Option("sequential", "--vs", help="compare with this policy"),
    device: str = DeviceOpt,
    max_streams: int = StreamsOpt,
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    fusion: str = FusionOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Which tensors set the peak, and which concurrency made more of them coexist."""
    from streamplan.app.context import make_context
    from streamplan.app.explain import explain_policy
    from streamplan.report.views import explain_lines

    with progress_display(err) as progress:
        ctx = make_context(device=device, max_streams=max_streams, progress=progress, fusion=fusion)
        g = load_graph(model, batch, dtype, progress)
        result = explain_policy(g, policy, ctx, vs=vs)
    if as_json:
        emit_json(result.to_dict())
        return
    for line in explain_lines(result):
        out.print(line, markup=False)


@app.command()
def plot(
    model: str = ModelArg,
    policies: list[str] | None = typer.Option(None, "--policies", help="comma-separated"),
    output: str = typer.Option(..., "-o", "--output", help="image to write: .png, .svg or .pdf"),
    device: str = DeviceOpt,
    max_streams: int = StreamsOpt,
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    force: bool = ForceOpt,
    fusion: str = FusionOpt,
) -> None:
    """Plot live memory over simulated time per policy, peaks marked, streams beneath."""
    from streamplan.app.analysis import memory_curves
    from streamplan.app.context import make_context
    from streamplan.report.plot import FORMATS, render

    fmt = Path(output).suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ModelSpecError(
            f"cannot tell the image format from {output!r}",
            hint=f"end the file name with .{', .'.join(FORMATS)}",
        )
    check_file(output, force=force, protected=(model,))
    names = parse_policies(policies, default="sequential,asap")
    with progress_display(err) as progress:
        ctx = make_context(device=device, max_streams=max_streams, progress=progress, fusion=fusion)
        g = load_graph(model, batch, dtype, progress)
        curves = memory_curves(g, names, ctx)
        progress("drawing", None, None)
        image = render(g, curves, device, fmt=fmt)
    write_file(output, image, force=force, protected=(model,))
    err.print(f"wrote {output}")
