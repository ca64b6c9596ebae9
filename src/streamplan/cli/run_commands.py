"""``run`` (execute a schedule for real) and ``demo`` (what ``make demo`` runs)."""

from __future__ import annotations

import typer

from streamplan.cli.app import app
from streamplan.cli.common import check_file, emit_json, out, saved_or_policy, write_file
from streamplan.cli.options import Given, takes

RunDeviceOpt = typer.Option(
    None, "--device", help="cost-model profile for the predictions (default: the one of --on's hardware)"
)
RunCudaGraphsOpt = typer.Option(
    False,
    "--cuda-graphs",
    help="with --on cuda: capture the schedule as one CUDA graph and replay it; the prediction "
    "uses the simulator's CUDA-graph mode",
)


@app.command()
@takes(
    "model", "policy", "device", "max_streams", "batch", "schedule_file", "no_cache", "force", "train",
    "optimizer", "precision", "attention", "parallel", "fusion", "cuda_graphs", "as_json",
    device=RunDeviceOpt, cuda_graphs=RunCudaGraphsOpt,
)  # fmt: skip
def run(
    o: Given,
    on: str = typer.Option("cpu", "--on", help="where to execute: cpu (one thread per stream) or cuda"),
    chaos: bool = typer.Option(False, "--chaos", help="random delays before ops (a missing wait shows up)"),
    repeat: int = typer.Option(5, "--repeat", min=1, help="timed runs; the median is reported"),
    seed: int = typer.Option(0, "--seed", help="seed of the random inputs and of the chaos delays"),
    trace: str | None = typer.Option(
        None, "--trace", help="write the measured (CPU) and simulated timelines as one Perfetto trace"
    ),
) -> None:
    """Execute a schedule for real; compare outputs with eager and predictions with measurements."""
    from streamplan.app.run import check_run, profile_for
    from streamplan.report.views import run_lines

    check_run(on, cuda_graphs=o.cuda_graphs, trace=trace is not None)
    if trace:
        check_file(trace, force=o.force, protected=o.protected())
    if o.parallel is not None:  # one gloo process per rank, compared with eager on the whole batch
        with o.session(o.settings(device="cpu")) as s:
            ranks = s.run(o.policy, on=on, chaos=chaos, repeat=repeat, seed=seed)
        if o.as_json:
            emit_json(ranks.to_dict())
            return
        for line in ranks.lines():
            out.print(line, markup=False)
        return
    with o.session(o.settings(device=o.device or profile_for(on))) as s:
        report = s.run(saved_or_policy(s, o), on=on, chaos=chaos, repeat=repeat, seed=seed)
    if trace:
        from streamplan.report.trace import dumps_traces

        name = f"{s.graph.name} {report.schedule.policy}"
        traces = [
            (report.comparison.result.timeline, f"{name} measured on cpu"),
            (report.simulated, f"{name} simulated ({report.profile} profile)"),
        ]
        write_file(trace, dumps_traces(traces), force=o.force, protected=o.protected())
        if not o.as_json:
            out.print(f"  wrote {trace}: measured and simulated timelines (open in ui.perfetto.dev)")
    if o.as_json:
        emit_json(report.to_dict())
        return
    for line in run_lines(report, target=on, repeat=repeat):
        out.print(line, markup=True)


@app.command()
def demo() -> None:
    """The seed question answered on its own example, then a real model compared and run."""
    from streamplan.cli.demo import run_demo

    run_demo(out)
