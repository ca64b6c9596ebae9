"""``schedule``, ``verify``, ``simulate`` and ``compare``: making schedules and costing them."""

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
    MeasuredOpt,
    ModelArg,
    PolicyOpt,
    StreamsOpt,
    check_file,
    emit_json,
    err,
    load_graph,
    out,
    parse_fusions,
    parse_policies,
    write_file,
)
from streamplan.cli.progress import progress_display
from streamplan.report.units import fmt_ms


@app.command()
def schedule(
    model: str = ModelArg,
    policy: str = PolicyOpt,
    max_streams: int = StreamsOpt,
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    device: str = DeviceOpt,
    output: str | None = typer.Option(None, "-o", "--output", help="schedule JSON to write"),
    force: bool = ForceOpt,
    fusion: str = FusionOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Schedule a model with a policy; print it or save it as JSON."""
    from streamplan.app.context import make_context
    from streamplan.fusion.plan import schedule_with_fusion

    if output:
        check_file(output, force=force, protected=(model,))
    with progress_display(err) as progress:
        ctx = make_context(device=device, max_streams=max_streams, progress=progress, fusion=fusion)
        g = load_graph(model, batch, dtype, progress)
        s = schedule_with_fusion(g, policy, ctx).schedule
    if output:
        write_file(output, s.dumps(), force=force, protected=(model,))
        if not as_json:
            err.print(
                f"wrote {output}: {len(s.launch_order)} ops on {s.num_streams} streams, {s.num_events} events"
            )
    if as_json:
        emit_json(s.to_dict())
    elif not output:
        out.print(str(s), markup=False)


@app.command("verify")
def verify_cmd(
    model: str = ModelArg,
    schedule_file: str = typer.Argument(..., help="schedule JSON"),
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Check a saved schedule against a model: exit 0 if valid, 1 naming the problem otherwise."""
    from streamplan.fusion.plan import graph_for_schedule
    from streamplan.ir.schedule import StreamSchedule
    from streamplan.schedule.verify import check_schedule

    s = StreamSchedule.load(schedule_file)
    with progress_display(err) as progress:
        g = load_graph(model, batch, dtype, progress)
        g = graph_for_schedule(g, s).graph  # the kernels, for a schedule of fused kernels
    problems = check_schedule(g, s)
    if as_json:
        emit_json({"valid": not problems, "problems": problems})
    elif problems:
        err.print(f"invalid schedule {schedule_file}:", markup=False)
        for p in problems[:20]:
            err.print(f"  {p}", markup=False)
        if len(problems) > 20:
            err.print(f"  ... and {len(problems) - 20} more")
    else:
        out.print(f"valid: {len(s.launch_order)} ops, {s.num_streams} streams, {s.num_events} events")
    raise typer.Exit(1 if problems else 0)


@app.command()
def simulate(
    model: str = ModelArg,
    policy: str = PolicyOpt,
    device: str = DeviceOpt,
    max_streams: int = StreamsOpt,
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    schedule_file: str | None = typer.Option(None, "--schedule", help="use a saved schedule"),
    trace: str | None = typer.Option(None, "--trace", help="write a Perfetto/Chrome trace JSON"),
    force: bool = ForceOpt,
    measured: str | None = MeasuredOpt,
    fusion: str = FusionOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Simulate a schedule on a device profile: makespan and per-stream busy time."""
    from streamplan.app.analysis import run_policy, run_schedule
    from streamplan.app.context import MeasuredCoverage, make_context
    from streamplan.fusion.transform import kernel_count
    from streamplan.ir.schedule import StreamSchedule
    from streamplan.report.trace import dumps_trace

    if trace:
        check_file(trace, force=force, protected=(model,))
    saved = StreamSchedule.load(schedule_file) if schedule_file else None
    with progress_display(err) as progress:
        ctx = make_context(
            device=device, measured=measured, max_streams=max_streams, progress=progress, fusion=fusion
        )
        g = load_graph(model, batch, dtype, progress)
        run = run_schedule(g, saved, ctx) if saved is not None else run_policy(g, policy, ctx)
    s, tl = run.schedule, run.timeline
    if trace:
        from streamplan.memory.simulated import simulated_memory

        live = simulated_memory(run.scheduled_graph(g), s, tl).samples
        write_file(
            trace,
            dumps_trace(tl, name=f"{g.name} {s.policy}", live_bytes=live),
            force=force,
            protected=(model,),
        )
    coverage = MeasuredCoverage.of(ctx.cost)
    result = {
        "model": g.name,
        "policy": s.policy,
        "device": device,
        "streams": s.num_streams,
        "events": s.num_events,
        "makespan_ms": tl.makespan_ms,
        "stream_busy_ms": {str(k): v for k, v in sorted(tl.stream_busy_ms.items())},
        "fusion": run.fusion_mode,
        "kernels": kernel_count(run.scheduled_graph(g)),
    }
    if coverage is not None:
        result["measured"] = coverage.to_dict()
    if as_json:
        emit_json(result)
        return
    fused = f", fusion {run.fusion_mode} ({result['kernels']} kernels)" if run.fusion is not None else ""
    out.print(
        f"{g.name} / {s.policy} on {device}: makespan {fmt_ms(tl.makespan_ms)}, "
        f"{s.num_streams} streams, {s.num_events} events{fused}"
    )
    for k, v in sorted(tl.stream_busy_ms.items()):
        out.print(
            f"  stream {k}: busy {fmt_ms(v)} ({100 * v / tl.makespan_ms if tl.makespan_ms else 0:.0f}%)"
        )
    if coverage is not None:
        out.print(f"  {coverage.text()}")
    if trace:
        err.print(f"wrote {trace} (open in ui.perfetto.dev)")


@app.command()
def compare(
    model: str = ModelArg,
    policies: list[str] | None = typer.Option(
        None, "--policies", help=f"comma-separated; default {DEFAULT_POLICIES}"
    ),
    device: str = DeviceOpt,
    max_streams: int = StreamsOpt,
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    memory: bool = typer.Option(True, "--memory/--no-memory", help="also analyse memory"),
    include_inputs: bool = IncludeInputsOpt,
    include_params: bool = IncludeParamsOpt,
    fusion: str = typer.Option(
        "none", "--fusion", help="fusion modes to compare, comma-separated, or all (" + FUSION_HELP + ")"
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Compare policies side by side: streams, events, simulated latency, speedup, memory."""
    from streamplan.app.analysis import MemoryOptions, compare_policies
    from streamplan.app.context import make_context
    from streamplan.report.tables import compare_table

    names = parse_policies(policies)
    modes = parse_fusions(fusion)
    includes = MemoryOptions(include_inputs, include_params)
    with progress_display(err) as progress:
        ctx = make_context(device=device, max_streams=max_streams, progress=progress)
        g = load_graph(model, batch, dtype, progress)
        rows = compare_policies(g, names, ctx, memory=memory, includes=includes, fusions=modes)
    if as_json:
        emit_json(
            {
                "model": g.name,
                "device": device,
                "batch": batch or 1,
                "memory_includes": includes.describe(),
                "rows": [r.to_dict() for r in rows],
            }
        )
        return
    out.print(compare_table(g, rows, device, memory, includes.describe()))
    for r in rows:
        if r.error:
            out.print(f"[red]{r.policy}[/red]: {r.error}")
