"""``schedule``, ``verify``, ``simulate`` and ``compare``: making schedules and costing them."""

from __future__ import annotations

import typer

from streamplan.cli.app import app
from streamplan.cli.common import (
    DEFAULT_POLICIES,
    FUSION_HELP,
    INTERVAL_NOTE,
    BatchOpt,
    BudgetFigureOpt,
    BudgetOpt,
    CudaGraphsOpt,
    DeviceOpt,
    DtypeOpt,
    ForceOpt,
    FusionOpt,
    IncludeInputsOpt,
    IncludeParamsOpt,
    JsonOpt,
    MeasuredOpt,
    ModelArg,
    NoCacheOpt,
    OptimizerOpt,
    PolicyOpt,
    ScheduleFileOpt,
    StreamsOpt,
    TimeLimitOpt,
    TrainOpt,
    check_file,
    emit_json,
    err,
    load_graph,
    load_schedule,
    out,
    parse_budget,
    parse_fusions,
    parse_policies,
    run_saved_or_policy,
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
    output: str | None = typer.Option(
        None, "-o", "--output", help="schedule JSON to write (with the fingerprint of the graph it is for)"
    ),
    time_limit: float = TimeLimitOpt,
    no_cache: bool = NoCacheOpt,
    cuda_graphs: bool = CudaGraphsOpt,
    budget: str | None = BudgetOpt,
    budget_figure: str = BudgetFigureOpt,
    force: bool = ForceOpt,
    train: bool = TrainOpt,
    optimizer: str = OptimizerOpt,
    fusion: str = FusionOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Schedule a model with a policy; print it or save it as JSON."""
    from streamplan.app.context import make_context
    from streamplan.fusion.plan import schedule_with_fusion
    from streamplan.schedule.registry import policy_info

    policy_info(policy)  # an unknown policy fails before the capture
    if output:
        check_file(output, force=force, protected=(model,))
    limit = parse_budget(budget, budget_figure, policies=(policy,))
    with progress_display(err) as progress:
        ctx = make_context(
            device=device,
            cuda_graphs=cuda_graphs,
            max_streams=max_streams,
            budget=limit,
            time_limit_s=time_limit,
            progress=progress,
            fusion=fusion,
        )
        g = load_graph(model, batch, dtype, progress, no_cache=no_cache, train=train, optimizer=optimizer)
        progress(f"{policy}: scheduling", None, None)
        s = schedule_with_fusion(g, policy, ctx).schedule
    if output:
        write_file(output, s.dumps(), force=force, protected=(model,))
        if not as_json:
            err.print(
                f"wrote {output}: {_n(len(s.launch_order), 'op')} on {_n(s.num_streams, 'stream')}, "
                f"{_n(s.num_events, 'event')}"
            )
    if as_json:
        emit_json(s.to_dict())
    elif not output:
        out.print(str(s), markup=False)


@app.command("verify")
def verify_cmd(
    model: str = ModelArg,
    schedule_file: str = typer.Argument(..., help="schedule JSON (`streamplan schedule -o FILE`)"),
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    no_cache: bool = NoCacheOpt,
    train: bool = TrainOpt,
    optimizer: str = OptimizerOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Check a saved schedule against a model: exit 0 if valid, 1 naming the problem otherwise."""
    from streamplan.fusion.plan import graph_for_schedule, is_fused
    from streamplan.ir.fingerprint import fingerprint_mismatch
    from streamplan.ir.schedule import StreamSchedule, structure_problems
    from streamplan.schedule.verify import check_schedule

    s = StreamSchedule.load(schedule_file)
    with progress_display(err) as progress:
        g = load_graph(model, batch, dtype, progress, no_cache=no_cache, train=train, optimizer=optimizer)
        progress("verifying", None, None)
        mismatch = fingerprint_mismatch(s.meta, g)
        # made for another graph: say that in one line rather than list every unknown op
        if mismatch and structure_problems(g, s) and not is_fused(s):
            problems = [mismatch]
        else:  # the kernels, for a schedule of fused kernels
            problems = check_schedule(graph_for_schedule(g, s).graph, s)
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
    schedule_file: str | None = ScheduleFileOpt,
    trace: str | None = typer.Option(
        None, "--trace", help="write the simulated timeline as a Perfetto/Chrome trace JSON"
    ),
    force: bool = ForceOpt,
    measured: str | None = MeasuredOpt,
    time_limit: float = TimeLimitOpt,
    no_cache: bool = NoCacheOpt,
    train: bool = TrainOpt,
    optimizer: str = OptimizerOpt,
    cuda_graphs: bool = CudaGraphsOpt,
    budget: str | None = BudgetOpt,
    fusion: str = FusionOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Simulate a schedule on a device profile: makespan and per-stream busy time."""
    from streamplan.app.context import MeasuredCoverage, make_context
    from streamplan.fusion.transform import kernel_count
    from streamplan.report.trace import dumps_trace

    if trace:
        check_file(trace, force=force, protected=(model, schedule_file, measured))
    limit = parse_budget(budget, policies=(policy,))
    with progress_display(err) as progress:
        ctx = make_context(
            device=device,
            measured=measured,
            cuda_graphs=cuda_graphs,
            max_streams=max_streams,
            budget=limit,
            time_limit_s=time_limit,
            progress=progress,
            fusion=fusion,
        )
        g = load_graph(model, batch, dtype, progress, no_cache=no_cache, train=train, optimizer=optimizer)
        run = run_saved_or_policy(g, policy, schedule_file, ctx, fusion=fusion)
    s, tl = run.schedule, run.timeline
    if trace:
        from streamplan.memory.simulated import simulated_memory

        live = simulated_memory(run.scheduled_graph(g), s, tl).samples
        write_file(
            trace,
            dumps_trace(tl, name=f"{g.name} {s.policy}", live_bytes=live),
            force=force,
            protected=(model, schedule_file, measured),
        )
    coverage = MeasuredCoverage.of(ctx.cost)
    result = {
        "model": g.name,
        "policy": s.policy,
        "device": device,
        "cuda_graphs": cuda_graphs,
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
        f"{g.name} / {s.policy} on {device}{' (CUDA graph)' if cuda_graphs else ''}: makespan {fmt_ms(tl.makespan_ms)}, "
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


COMPARE_HELP = f"""Compare policies side by side: streams, events, simulated latency, speedup, memory.

\b
Latency table:
  streams, events  CUDA streams used, and events recorded for cross-stream waits
  latency          simulated makespan on the --device profile
  speedup          sequential's latency divided by this row's
  search           seconds the policy took to find its schedule
Memory table (MiB = 2^20 B; docs/memory.md explains each figure):
  host-order       peak of a program-order estimate (launch order, no concurrency)
  worst-case       the most ever live at once over every timing the schedule allows
  simulated        peak along the one timeline the cost model predicts
  torch alloc/resv torch-cuda caching allocator: max_memory_allocated / max_memory_reserved
  arena, arena LB  one fixed-offset buffer valid for every timing, and its lower bound

{INTERVAL_NOTE[0].upper() + INTERVAL_NOTE[1:]}."""


@app.command(help=COMPARE_HELP)
def compare(
    model: str = ModelArg,
    policies: list[str] | None = typer.Option(
        None,
        "--policies",
        help=f"comma-separated policies; default {DEFAULT_POLICIES} (sequential alone with --schedule)",
    ),
    schedule_files: list[str] | None = typer.Option(
        None, "--schedule", help="also compare a saved schedule (repeatable), one row per file"
    ),
    device: str = DeviceOpt,
    max_streams: int = StreamsOpt,
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    memory: bool = typer.Option(True, "--memory/--no-memory", help="also compute every memory figure"),
    include_inputs: bool = IncludeInputsOpt,
    include_params: bool = IncludeParamsOpt,
    time_limit: float = TimeLimitOpt,
    no_cache: bool = NoCacheOpt,
    train: bool = TrainOpt,
    optimizer: str = OptimizerOpt,
    cuda_graphs: bool = CudaGraphsOpt,
    budget: str | None = BudgetOpt,
    fusion: str = typer.Option(
        "none", "--fusion", help="fusion modes to compare, comma-separated, or all (" + FUSION_HELP + ")"
    ),
    as_json: bool = JsonOpt,
) -> None:
    from streamplan.app.analysis import MemoryOptions, compare_policies
    from streamplan.app.context import make_context
    from streamplan.report.tables import compare_table

    names = parse_policies(policies, default="sequential" if schedule_files else DEFAULT_POLICIES)
    modes = parse_fusions(fusion)
    includes = MemoryOptions(include_inputs, include_params)
    limit = parse_budget(budget, policies=tuple(names))
    with progress_display(err) as progress:
        ctx = make_context(
            device=device,
            cuda_graphs=cuda_graphs,
            max_streams=max_streams,
            budget=limit,
            time_limit_s=time_limit,
            progress=progress,
        )
        g = load_graph(model, batch, dtype, progress, no_cache=no_cache, train=train, optimizer=optimizer)
        saved = [(f, load_schedule(f, g)) for f in schedule_files or ()]
        rows = compare_policies(
            g, names, ctx, memory=memory, includes=includes, schedules=saved, fusions=modes
        )
    answer = None
    if g.is_training:
        from streamplan.app.training import training_answer

        answer = training_answer(rows)
    if as_json:
        emit_json(
            {
                "model": g.name,
                "device": device,
                "batch": g.meta.get("batch"),  # what the graph was built at (null: unknown)
                "train": g.is_training,
                "cuda_graphs": cuda_graphs,
                "memory_includes": includes.describe(),
                "rows": [r.to_dict() for r in rows],
                **({"training_peak": answer.to_dict()} if answer is not None else {}),
            }
        )
        return
    out.print(
        compare_table(
            g, rows, device + (" as CUDA graphs" if cuda_graphs else ""), memory, includes.describe()
        )
    )
    for r in rows:
        if r.error:
            out.print(f"{r.policy}: {r.error}", markup=False)
    if memory and any(r.memory is not None and not r.memory.worst_case.exact for r in rows):
        out.print(f"note: {INTERVAL_NOTE}.", markup=False)
    if answer is not None:
        from streamplan.report.views import training_answer_lines

        for line in training_answer_lines(answer):
            out.print(line, markup=False)


def _n(k: int, noun: str) -> str:
    return f"{k} {noun}" + ("" if k == 1 else "s")
