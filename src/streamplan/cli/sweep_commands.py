"""``sweep``: every combination of models, batches, dtypes, training steps, devices, CUDA-graph
mode, stream caps, fusion modes, policies and memory budgets."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from streamplan.cli.app import app
from streamplan.cli.common import check_files, emit_json, err, out, write_file
from streamplan.cli.errors import EXIT_INTERRUPTED
from streamplan.cli.options import COUNTED, Given, parse_fusions, takes
from streamplan.cli.progress import progress_display
from streamplan.errors import FileFormatError, ModelSpecError
from streamplan.ir.includes import Includes

if TYPE_CHECKING:
    from streamplan.sweep import Engine, SweepResult, SweepSettings, SweepSpec  # noqa: F811

JOURNAL_SUFFIXES = (".jsonl", ".ndjson")


def _list(help_text: str, *flags: str) -> typer.models.OptionInfo:
    return typer.Option(None, *flags, help=f"{help_text} (comma-separated, or repeat the option)")


@app.command()
@takes(*COUNTED, "force", "as_json")
def sweep(
    o: Given,
    models: list[str] | None = _list(
        "model specs: zoo names, random:N[:seed], graph.json, file.py:fn", "--models"
    ),
    batches: list[str] | None = _list("batch sizes (default: each model's own)", "--batches"),
    policies: list[str] | None = _list("policies (default: sequential,asap,ios)", "--policies"),
    devices: list[str] | None = _list("device profiles (default: v100)", "--devices"),
    max_streams: list[str] | None = _list("stream caps (default: 8)", "--max-streams"),
    dtypes: list[str] | None = _list("dtypes (default: float32)", "--dtypes"),
    budgets: list[str] | None = _list(
        "memory budgets of budget-aware policies: 0.8x (of the sequential worst-case peak), 12MiB, none",
        "--budgets",
    ),
    train: bool = typer.Option(
        False, "--train", help="training steps (forward, loss, backward, update) instead of inference"
    ),
    optimizers: list[str] | None = _list(
        "the training step's updates: none, sgd, momentum, adam (needs --train)",
        "--optimizers",
        "--optimizer",
    ),
    cuda_graphs: bool = typer.Option(
        False, "--cuda-graphs", help="cost each schedule replayed as one CUDA graph (no launch overhead)"
    ),
    fusion: list[str] | None = _list(
        "fusion modes: none, first, stream-aware, or all (default: none)", "--fusion"
    ),
    sweep_file: str | None = typer.Option(
        None,
        "--file",
        "-f",
        help="TOML (or YAML) sweep file: axes and [settings]; options given here override it",
    ),
    output: str | None = typer.Option(
        None,
        "-o",
        "--output",
        help="JSON Lines file: each row appended as it finishes; running the same sweep again skips its rows",
    ),
    restart: bool = typer.Option(
        False, "--restart", help="discard the rows already in the output and start again"
    ),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="run the output's failed rows again"),
    csv_out: str | None = typer.Option(None, "--csv", help="also write the rows as CSV when the sweep ends"),
    parquet_out: str | None = typer.Option(
        None, "--parquet", help="also write the rows as Parquet (needs pyarrow)"
    ),
    plots: str | None = typer.Option(
        None,
        "--plots",
        help="write PREFIX-speedup.png, PREFIX-peak.png (speedup, worst-case peak vs batch) and "
        "PREFIX-pareto.png (latency vs worst-case peak across policies and budgets)",
    ),
    plot_format: str = typer.Option("png", "--plot-format", help="png, svg or pdf"),
    ray: bool = typer.Option(
        False,
        "--ray",
        help="run the jobs as Ray tasks, on a Ray started here (needs pip install 'streamplan[ray]')",
    ),
    ray_address: str | None = typer.Option(
        None,
        "--ray-address",
        help="run them on the Ray cluster at ADDRESS (auto, HOST:6379, ray://HOST:10001)",
    ),
    workers: int | None = typer.Option(
        None, "--workers", min=1, help="worker processes (default: one per core)"
    ),
    no_memory: bool = typer.Option(False, "--no-memory", help="skip the memory figures (latency only)"),
    time_limit: float | None = typer.Option(
        None, "--time-limit", min=0.001, help="seconds per search (default 10)"
    ),
) -> None:
    """Run compare over every combination of the axes, locally or on Ray; resumable JSON Lines rows."""
    from streamplan.report.sweep import FORMATS, PLOTS
    from streamplan.sweep import SweepSettings, SweepSpec
    from streamplan.sweep.export import check_parquet
    from streamplan.sweep.sweep_file import load_sweep_file

    axes, settings = load_sweep_file(sweep_file) if sweep_file else ({}, None)
    given = {"model": models, "batch": batches, "policy": policies, "device": devices}
    modes = parse_fusions(",".join(fusion)) if fusion else None  # as compare's --fusion (all: every mode)
    given.update(max_streams=max_streams, dtype=dtypes, budget=budgets, optimizer=optimizers, fusion=modes)
    axes.update({k: ",".join(v) for k, v in given.items() if v})
    axes.update({k: [True] for k, on in (("train", train), ("cuda_graphs", cuda_graphs)) if on})
    spec = SweepSpec.of(**axes)
    settings = _settings(
        settings or SweepSettings(), no_memory, o.include_inputs, o.include_params, time_limit
    )
    if plot_format not in FORMATS:
        raise ModelSpecError(f"unknown plot format {plot_format!r}", hint=f"use one of {', '.join(FORMATS)}")
    if output:
        _check_journal(output)
    protected = (output, sweep_file)
    exports = [(p, f) for p, f in ((csv_out, "csv"), (parquet_out, "parquet")) if p]
    plot_files = {what: f"{plots}-{what}.{plot_format}" for what in PLOTS} if plots else {}
    # before the sweep: an export that is the rows file (or the sweep file) is refused now
    check_files((output, *(p for p, _ in exports), *plot_files.values()), force=True, protected=(sweep_file,))
    check_files((*(p for p, _ in exports), *plot_files.values()), force=o.force, protected=protected)
    if parquet_out:
        check_parquet()
    engine = _engine(ray or ray_address is not None, ray_address, workers)
    result = _run(spec, settings, output, engine, restart=restart, retry_failed=retry_failed)
    _write(result, exports, plot_files, plot_format, force=o.force, protected=protected)
    if o.as_json:
        emit_json(result.to_dict())
        return
    _print(result, output, [p for p, _ in exports] + list(plot_files.values()))


def _run(spec: SweepSpec, settings: SweepSettings, output: str | None, engine: Engine, **resume: bool):
    """The sweep's rows; Ctrl-C keeps every finished row and ends with the interrupted status."""
    from streamplan.sweep import SweepInterrupted, SweepMismatchError, run_sweep

    try:
        with progress_display(err, eta=True) as progress:
            return run_sweep(
                spec, settings=settings, output=output, engine=engine, progress=progress, **resume
            )
    except SweepMismatchError as e:
        e.hint = "choose another output file, or pass --restart to discard its rows"
        raise
    except SweepInterrupted as stop:
        r = stop.result
        kept = f"; every finished row is in {output}: run the same command again to resume" if output else ""
        err.print(f"interrupted: {len(r.rows)} of {r.total} rows finished{kept}", markup=False)
        raise typer.Exit(EXIT_INTERRUPTED) from None


def _write(
    result: SweepResult, exports, plot_files: dict[str, str], plot_format: str, *, force: bool, protected
) -> None:
    """The tables (CSV, Parquet) and plots asked for, once the sweep is done."""
    from streamplan.report.sweep import render
    from streamplan.sweep.export import to_csv, to_parquet

    for path, fmt in exports:
        rows = to_csv(result.rows) if fmt == "csv" else to_parquet(result.rows)
        write_file(path, rows, force=force, protected=protected)
    for what, path in plot_files.items():
        write_file(path, render(result.rows, what, fmt=plot_format), force=force, protected=protected)


def _print(result: SweepResult, output: str | None, written: list[str]) -> None:
    from streamplan.report.safe_text import quoted
    from streamplan.report.sweep import failures, summary_table

    out.print(summary_table(result.rows, title=Path(output).name if output else "sweep"))
    for line in failures(result.rows):
        out.print(f"[red]failed[/red] {quoted(line)}", markup=True)
    where = f"{output}: " if output else ""
    err.print(
        f"{where}{len(result.rows)} rows ({result.ran} run now on {result.engine}, {result.skipped} already there, "
        f"{result.failed} failed) in {result.elapsed_s:.1f} s",
        markup=False,
    )
    for path in written:
        err.print(f"wrote {path}", markup=False)


def _settings(
    base: SweepSettings, no_memory: bool, inputs: bool, params: bool, time_limit: float | None
) -> SweepSettings:
    changes: dict[str, object] = {}
    if no_memory:
        changes["memory"] = False
    if inputs or params:
        changes["includes"] = Includes(inputs or base.includes.inputs, params or base.includes.params)
    if time_limit is not None:
        changes["time_limit_s"] = time_limit
    return dataclasses.replace(base, **changes)


def _check_journal(output: str) -> None:
    if Path(output).suffix not in JOURNAL_SUFFIXES:
        raise FileFormatError(
            "a sweep writes JSON Lines (.jsonl): the file a rerun resumes from",
            where=output,
            hint="write -o results.jsonl, plus --csv or --parquet for a table",
        )


def _engine(ray: bool, address: str | None, workers: int | None) -> Engine:
    if not ray:
        from streamplan.sweep import LocalEngine

        return LocalEngine(workers)
    from streamplan.sweep import RayEngine

    if address is not None and workers is not None:
        raise ModelSpecError(
            "--workers sizes a local pool or a Ray started here, not a cluster",
            hint="the cluster's own CPUs decide how many jobs run at once",
        )
    return RayEngine(address, num_cpus=workers)
