"""``run`` (execute a schedule for real) and ``demo`` (what ``make demo`` runs)."""

from __future__ import annotations

import typer

from streamplan.cli.app import app
from streamplan.cli.common import (
    BatchOpt,
    ForceOpt,
    FusionOpt,
    JsonOpt,
    ModelArg,
    NoCacheOpt,
    OptimizerOpt,
    PolicyOpt,
    ScheduleFileOpt,
    StreamsOpt,
    TrainOpt,
    check_file,
    emit_json,
    err,
    load_graph,
    load_schedule,
    out,
    write_file,
)
from streamplan.cli.progress import progress_display


@app.command()
def run(
    model: str = ModelArg,
    policy: str = PolicyOpt,
    on: str = typer.Option("cpu", "--on", help="where to execute: cpu (one thread per stream) or cuda"),
    device: str | None = typer.Option(
        None, "--device", help="cost-model profile for the predictions (default: the one of --on's hardware)"
    ),
    max_streams: int = StreamsOpt,
    batch: int | None = BatchOpt,
    chaos: bool = typer.Option(False, "--chaos", help="random delays before ops (a missing wait shows up)"),
    repeat: int = typer.Option(5, "--repeat", min=1, help="timed runs; the median is reported"),
    seed: int = typer.Option(0, "--seed", help="seed of the random inputs and of the chaos delays"),
    schedule_file: str | None = ScheduleFileOpt,
    trace: str | None = typer.Option(
        None, "--trace", help="write the measured (CPU) and simulated timelines as one Perfetto trace"
    ),
    no_cache: bool = NoCacheOpt,
    force: bool = ForceOpt,
    train: bool = TrainOpt,
    optimizer: str = OptimizerOpt,
    fusion: str = FusionOpt,
    cuda_graphs: bool = typer.Option(
        False,
        "--cuda-graphs",
        help="with --on cuda: capture the schedule as one CUDA graph and replay it; the prediction "
        "uses the simulator's CUDA-graph mode",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Execute a schedule for real; compare outputs with eager and predictions with measurements."""
    from streamplan.app.context import make_context
    from streamplan.app.run import check_target, profile_for, run_model
    from streamplan.errors import ModelSpecError
    from streamplan.report.views import run_lines

    if on in ("v100", "a100", "h100", "h200"):
        raise ModelSpecError(
            f"--on takes where to execute, not a profile: {on!r}", hint="use --on cpu or --on cuda"
        )
    check_target(on)
    if cuda_graphs and on != "cuda":
        raise ModelSpecError(
            "CUDA graphs are captured on a GPU only", hint="use --on cuda, or drop --cuda-graphs"
        )
    if trace:
        if on != "cpu":
            raise ModelSpecError(
                "--trace records per-op times on the CPU runtime only",
                hint="drop --trace, or use torch.profiler around streamplan.runtime.run on the GPU",
            )
        check_file(trace, force=force, protected=(model, schedule_file))
    with progress_display(err) as progress:
        ctx = make_context(
            device=device or profile_for(on),
            max_streams=max_streams,
            progress=progress,
            fusion=fusion,
            cuda_graphs=cuda_graphs,
        )
        graph = load_graph(model, batch, None, progress, no_cache=no_cache, train=train, optimizer=optimizer)
        saved = load_schedule(schedule_file, graph, fusion=fusion) if schedule_file else None
        report = run_model(
            model,
            saved.policy if saved else policy,
            ctx,
            target=on,
            graph=graph,
            batch=batch,
            chaos=chaos,
            repeat=repeat,
            seed=seed,
            schedule=saved,
            train=train,
            optimizer=optimizer,
        )
    if trace:
        from streamplan.report.trace import dumps_traces

        name = f"{graph.name} {report.schedule.policy}"
        traces = [
            (report.comparison.result.timeline, f"{name} measured on cpu"),
            (report.simulated, f"{name} simulated ({report.profile} profile)"),
        ]
        write_file(trace, dumps_traces(traces), force=force, protected=(model, schedule_file))
        if not as_json:
            out.print(f"  wrote {trace}: measured and simulated timelines (open in ui.perfetto.dev)")
    if as_json:
        emit_json(report.to_dict())
        return
    for line in run_lines(report, target=on, repeat=repeat):
        out.print(line, markup=True)


@app.command()
def demo() -> None:
    """The seed question answered on its own example, then a real model compared and run."""
    from streamplan.cli.demo import run_demo

    run_demo(out)
