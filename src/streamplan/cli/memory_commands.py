"""``memory``, ``explain`` and ``plot``: every memory figure of a schedule, why, and a picture."""

from __future__ import annotations

import math

import typer

from streamplan.cli.app import app
from streamplan.cli.common import (
    INTERVAL_NOTE,
    BatchOpt,
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
    parse_policies,
    run_saved_or_policy,
    write_file,
)
from streamplan.cli.errors import EXIT_OUT_OF_MEMORY
from streamplan.cli.progress import progress_display
from streamplan.errors import ModelSpecError

MEMORY_HELP = f"""Every memory figure for one schedule, the allocator replays, and the host-order trace.

\b
Figures (bytes, shown in MiB = 2^20 B; docs/memory.md explains each):
  host-order peak   what a program-order estimator reports (launch order, no concurrency)
  worst-case peak   the most ever live at once over every timing the schedule allows
  simulated peak    live bytes along the one timeline the cost model predicts
  torch-cuda        the caching allocator's max_memory_allocated / max_memory_reserved
  static arena      one buffer with fixed offsets valid for every timing, and its lower bound
  allocator replays exact, page, pow2 and torch-cuda replays of the host order

With --device-memory-gib, a predicted out-of-memory (the torch-cuda replay does not fit) is
the first line of the output, and the command ends with exit status {EXIT_OUT_OF_MEMORY}.

{INTERVAL_NOTE[0].upper() + INTERVAL_NOTE[1:]}."""


def _device_memory_bytes(gib: float | None) -> int | None:
    if gib is None:
        return None
    if not math.isfinite(gib) or gib <= 0:
        raise ModelSpecError(
            f"--device-memory-gib must be a positive number of GiB, got {gib:g} GiB",
            hint="give the device's memory in GiB, e.g. --device-memory-gib 16",
        )
    return int(gib * (1 << 30))


@app.command("memory", help=MEMORY_HELP)
def memory_cmd(
    model: str = ModelArg,
    policy: str = PolicyOpt,
    schedule_file: str | None = ScheduleFileOpt,
    device: str = DeviceOpt,
    max_streams: int = StreamsOpt,
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    include_inputs: bool = IncludeInputsOpt,
    include_params: bool = IncludeParamsOpt,
    device_memory: float | None = typer.Option(
        None,
        "--device-memory-gib",
        help=f"the device's memory in GiB: the torch-cuda replay runs against it; exit {EXIT_OUT_OF_MEMORY} "
        "when it does not fit",
    ),
    measured: str | None = MeasuredOpt,
    time_limit: float = TimeLimitOpt,
    no_cache: bool = NoCacheOpt,
    train: bool = TrainOpt,
    optimizer: str = OptimizerOpt,
    cuda_graphs: bool = CudaGraphsOpt,
    budget: str | None = BudgetOpt,
    fusion: str = FusionOpt,
    full_trace: bool = typer.Option(
        False,
        "--full-trace",
        help="print every launch of the host-order trace, not only those around its peak",
    ),
    as_json: bool = JsonOpt,
) -> None:
    from streamplan.app.analysis import MemoryOptions
    from streamplan.app.context import make_context
    from streamplan.app.memory import analyze_run_memory
    from streamplan.report.views import TRACE_LAUNCHES, memory_lines

    capacity = _device_memory_bytes(device_memory)
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
        analysis = analyze_run_memory(
            g,
            run,
            ctx,
            includes=MemoryOptions(include_inputs, include_params),
            device_memory_bytes=capacity,
        )
    oom = analysis.allocators["torch-cuda"].oom if "torch-cuda" in analysis.allocators else None
    if as_json:
        d = analysis.to_dict()
        d["out_of_memory"] = None if oom is None else oom.to_dict()
        emit_json(d)
    else:
        if oom is not None:
            at = f"at {oom.op}" if oom.op else "before the first op (resident tensors)"
            out.print(
                f"OUT OF MEMORY: {g.name} under {run.policy} does not fit in {device_memory:g} GiB: the "
                f"torch-cuda replay fails {at} asking for {oom.device_request_bytes / (1 << 20):.2f} MiB "
                f"(exit status {EXIT_OUT_OF_MEMORY})",
                markup=False,
            )
        for line in memory_lines(analysis, trace_launches=None if full_trace else TRACE_LAUNCHES):
            out.print(line, markup=False)
    if oom is not None:
        raise typer.Exit(EXIT_OUT_OF_MEMORY)


@app.command()
def explain(
    model: str = ModelArg,
    policy: str = PolicyOpt,
    schedule_file: str | None = ScheduleFileOpt,
    vs: str | None = typer.Option(
        "sequential", "--vs", help="compare with this policy, or with a saved schedule file (.json)"
    ),
    device: str = DeviceOpt,
    max_streams: int = StreamsOpt,
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    time_limit: float = TimeLimitOpt,
    no_cache: bool = NoCacheOpt,
    train: bool = TrainOpt,
    optimizer: str = OptimizerOpt,
    cuda_graphs: bool = CudaGraphsOpt,
    budget: str | None = BudgetOpt,
    fusion: str = FusionOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Which tensors set the peak, which concurrency made more of them coexist, and how close any
    schedule can get to the latency bound (and why)."""
    from streamplan.app.analysis import run_policy, run_schedule
    from streamplan.app.context import make_context
    from streamplan.app.explain import explain_policy, explain_run
    from streamplan.fusion.plan import FusedSchedule, schedule_same_kernels
    from streamplan.report.views import explain_lines
    from streamplan.schedule.registry import policy_info

    if vs and not vs.endswith(".json"):
        policy_info(vs)  # an unknown policy fails before the capture
    if not schedule_file:
        policy_info(policy)
    limit = parse_budget(budget, policies=(policy,))
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
        saved = load_schedule(schedule_file, g, fusion=fusion) if schedule_file else None
        if saved is None and not (vs and vs.endswith(".json")):
            result = explain_policy(g, policy, ctx, vs=vs)  # fused, vs schedules the same kernels
        else:
            run = run_schedule(g, saved, ctx) if saved is not None else run_policy(g, policy, ctx)
            base = None
            if vs and vs.endswith(".json"):
                base = load_schedule(vs, g)
            elif vs and vs != run.policy:
                planned = FusedSchedule(run.scheduled_graph(g), run.schedule, run.fusion)
                base = schedule_same_kernels(g, planned, vs, ctx)
            result = explain_run(g, run, ctx, vs_schedule=base)
    if as_json:
        emit_json(result.to_dict())
        return
    for line in explain_lines(result):
        out.print(line, markup=False, soft_wrap=True)


@app.command()
def plot(
    model: str = ModelArg,
    policies: list[str] | None = typer.Option(
        None, "--policies", help="comma-separated policies to draw; default sequential,asap"
    ),
    schedule_files: list[str] | None = typer.Option(
        None, "--schedule", help="also draw a saved schedule (repeatable); alone, it is drawn with sequential"
    ),
    output: str = typer.Option(..., "-o", "--output", help="image to write: .png, .svg or .pdf"),
    device: str = DeviceOpt,
    max_streams: int = StreamsOpt,
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    time_limit: float = TimeLimitOpt,
    no_cache: bool = NoCacheOpt,
    train: bool = TrainOpt,
    optimizer: str = OptimizerOpt,
    cuda_graphs: bool = CudaGraphsOpt,
    budget: str | None = BudgetOpt,
    force: bool = ForceOpt,
    fusion: str = FusionOpt,
) -> None:
    """Plot live memory over simulated time per policy, peaks marked, streams beneath."""
    from streamplan.app.analysis import memory_curve, memory_curves, run_schedule
    from streamplan.app.context import make_context
    from streamplan.report.plot import image_format, render

    check_file(output, force=force, protected=(model, *(schedule_files or ())))
    fmt = image_format(output)
    names = parse_policies(policies, default="sequential" if schedule_files else "sequential,asap")
    limit = parse_budget(budget, policies=tuple(names))
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
        saved = [load_schedule(f, g) for f in schedule_files or ()]
        curves = memory_curves(g, names, ctx)
        curves += [memory_curve(g, run_schedule(g, s, ctx), ctx) for s in saved]
        progress("drawing", None, None)
        image = render(g, curves, device, fmt=fmt)
    write_file(output, image, force=force, protected=(model, *(schedule_files or ())))
    err.print(f"wrote {output}")
