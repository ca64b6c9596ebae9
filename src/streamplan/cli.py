"""The ``streamplan`` command line. Every command takes a model spec (zoo name,
``random:N[:seed]``, graph ``.json`` or ``file.py:function``) and ``--json`` for
machine-readable output only. User errors print one or two lines and exit 2.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from streamplan.report.units import fmt_bytes, fmt_ms

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Multi-stream schedules for PyTorch graphs: latency and peak memory before you run.",
)
out = Console(highlight=False, width=None if sys.stdout.isatty() else 110)
err = Console(stderr=True, highlight=False, soft_wrap=True)

DEFAULT_POLICIES = "sequential,memory,wavefront,asap,nimble,ios"

ModelArg = typer.Argument(..., help="zoo name, random:N[:seed], graph.json, or file.py:function")
BatchOpt = typer.Option(None, "--batch", help="rebuild the example inputs at this batch size")
DtypeOpt = typer.Option(None, "--dtype", help="float32 (default), float16, bfloat16, float64")
JsonOpt = typer.Option(False, "--json", help="print machine-readable JSON only")
StreamsOpt = typer.Option(8, "--max-streams", min=1, help="cap on streams (hardware default: 8 queues)")
DeviceOpt = typer.Option("v100", "--device", help="device profile: v100, a100, h100, h200, cpu")
MeasuredOpt = typer.Option(
    None,
    "--measured",
    help="measured op table (bench/gpu_validate.py --measured-out): op times for the simulator "
    "(the --device profile covers ops it lacks) and op scratch for the torch-cuda replay",
)


def _load(model: str, batch: int | None, dtype: str | None):
    from streamplan.models import load_model

    return load_model(model, batch=batch, dtype=dtype)


def _emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=1, default=_json_default) + "\n")


def _json_default(o: Any) -> Any:
    if hasattr(o, "to_dict"):
        return o.to_dict()
    if isinstance(o, float) and o != o:
        return None
    return str(o)


def _policies(text: list[str] | None) -> list[str]:
    items: list[str] = []
    for t in text or [DEFAULT_POLICIES]:
        items.extend(p.strip() for p in t.split(",") if p.strip())
    return list(dict.fromkeys(items))


# --------------------------------------------------------------------------- issue 2
@app.command()
def zoo(as_json: bool = JsonOpt) -> None:
    """List the built-in models."""
    from streamplan.zoo.registry import RANDOM_HELP, ZOO

    if as_json:
        _emit_json(
            [
                {"name": m.name, "summary": m.summary, "kind": m.kind, "requires": m.requires}
                for m in ZOO.values()
            ]
        )
        return
    t = Table(title="streamplan zoo", show_edge=False)
    t.add_column("model")
    t.add_column("description")
    for m in ZOO.values():
        t.add_row(m.name, m.summary + (f"  [needs {m.requires}]" if m.requires else ""))
    t.add_row("random:N[:seed]", RANDOM_HELP.split("— ", 1)[1])
    out.print(t)


@app.command()
def show(
    model: str = ModelArg,
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    graph: bool = typer.Option(False, "--graph", help="also print the graph, one line per op"),
    as_json: bool = JsonOpt,
) -> None:
    """Summarise a model's graph: ops, bytes, critical path, maximum parallelism."""
    from streamplan.ir.analysis import critical_path_ops, max_parallelism

    g = _load(model, batch, dtype)
    par = max_parallelism(g)
    info = {
        "model": g.name,
        "ops": len(g.nodes),
        "values": len(g.values),
        "param_count": g.param_count(),
        "param_bytes": g.param_bytes(),
        "buffer_bytes": g.buffer_bytes(),
        "input_bytes": g.input_bytes(),
        "activation_bytes": g.activation_bytes(),
        "flops": g.total_flops(),
        "critical_path_ops": critical_path_ops(g),
        "max_parallelism": par.width,
        "max_parallelism_exact": par.exact,
    }
    if as_json:
        if graph:
            from streamplan.ir.serialize import graph_to_dict

            info["graph"] = graph_to_dict(g)
        _emit_json(info)
        return
    t = Table(title=f"{g.name}", show_header=False, show_edge=False)
    t.add_column(style="bold")
    t.add_column()
    t.add_row("ops", f"{info['ops']:,}")
    t.add_row("values", f"{info['values']:,}")
    t.add_row("parameters", f"{info['param_count']:,} ({fmt_bytes(info['param_bytes'])})")
    t.add_row("buffers", fmt_bytes(info["buffer_bytes"]))
    t.add_row("inputs", fmt_bytes(info["input_bytes"]))
    t.add_row("activations", f"{fmt_bytes(info['activation_bytes'])} (sum of all, no reuse)")
    t.add_row("FLOPs", f"{info['flops'] / 1e9:.3f} G")
    t.add_row("critical path", f"{info['critical_path_ops']} ops")
    t.add_row("max parallelism", f"{'' if par.exact else '>= '}{par.width} independent ops")
    out.print(t)
    if par.width <= 1:
        out.print("note: no two ops are independent; multi-stream policies cannot overlap anything here.")
    if graph:
        out.print(str(g), markup=False)


@app.command()
def export(
    model: str = ModelArg,
    output: str = typer.Option(..., "-o", "--output", help="graph JSON to write"),
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    force: bool = typer.Option(False, "--force", help="overwrite an existing output file"),
) -> None:
    """Save a model's graph as JSON (loadable everywhere a model is named)."""
    from streamplan.ir.serialize import dumps
    from streamplan.report.files import write_output

    g = _load(model, batch, dtype)
    write_output(output, dumps(g), force=force, protected=(model,))
    err.print(f"wrote {output}: {len(g.nodes)} ops")


# --------------------------------------------------------------------------- issue 3
@app.command()
def schedule(
    model: str = ModelArg,
    policy: str = typer.Option("asap", "--policy", "-p"),
    max_streams: int = StreamsOpt,
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    device: str = DeviceOpt,
    output: str | None = typer.Option(None, "-o", "--output", help="schedule JSON to write"),
    force: bool = typer.Option(False, "--force"),
    as_json: bool = JsonOpt,
) -> None:
    """Schedule a model with a policy; print it or save it as JSON."""
    from streamplan.report.files import write_output
    from streamplan.schedule.registry import make_schedule
    from streamplan.schedule.verify import verify_schedule

    g = _load(model, batch, dtype)
    options = {"device": device, "progress": not as_json} if policy == "ios" else {}
    s = make_schedule(g, policy, max_streams=max_streams, **options)
    verify_schedule(g, s)
    if output:
        write_output(output, s.dumps(), force=force, protected=(model,))
        if not as_json:
            err.print(
                f"wrote {output}: {len(s.launch_order)} ops on {s.num_streams} streams, {s.num_events} events"
            )
    if as_json:
        _emit_json(s.to_dict())
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
    from streamplan.schedule.schedule import StreamSchedule
    from streamplan.schedule.verify import check_schedule

    g = _load(model, batch, dtype)
    s = StreamSchedule.load(schedule_file)
    problems = check_schedule(g, s)
    if as_json:
        _emit_json({"valid": not problems, "problems": problems})
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
    policy: str = typer.Option("asap", "--policy", "-p"),
    device: str = DeviceOpt,
    max_streams: int = StreamsOpt,
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    schedule_file: str | None = typer.Option(None, "--schedule", help="use a saved schedule"),
    trace: str | None = typer.Option(None, "--trace", help="write a Perfetto/Chrome trace JSON"),
    force: bool = typer.Option(False, "--force"),
    measured: str | None = MeasuredOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Simulate a schedule on a device profile: makespan and per-stream busy time."""
    from streamplan.cost.simulate import simulate as run_sim
    from streamplan.report.files import write_output
    from streamplan.report.pipeline import measured_cost, measured_note
    from streamplan.report.trace import dumps_trace
    from streamplan.schedule.registry import make_schedule
    from streamplan.schedule.schedule import StreamSchedule
    from streamplan.schedule.verify import verify_schedule

    g = _load(model, batch, dtype)
    if schedule_file:
        s = StreamSchedule.load(schedule_file)
    else:
        options = {"device": device, "progress": not as_json} if policy == "ios" else {}
        s = make_schedule(g, policy, max_streams=max_streams, **options)
    verify_schedule(g, s)
    cost = measured_cost(measured, device)
    tl = run_sim(g, s, cost if cost is not None else device)
    if trace:
        from streamplan.memory.simulated import simulated_memory

        live = simulated_memory(g, s, tl).samples
        write_output(
            trace,
            dumps_trace(tl, name=f"{g.name} {s.policy}", live_bytes=live),
            force=force,
            protected=(model,),
        )
    result = {
        "model": g.name,
        "policy": s.policy,
        "device": device,
        "streams": s.num_streams,
        "events": s.num_events,
        "makespan_ms": tl.makespan_ms,
        "stream_busy_ms": {str(k): v for k, v in sorted(tl.stream_busy_ms.items())},
    }
    if cost is not None:
        result["measured"] = {"hits": cost.hits, "misses": cost.misses}
    if as_json:
        _emit_json(result)
        return
    out.print(
        f"{g.name} / {s.policy} on {device}: makespan {fmt_ms(tl.makespan_ms)}, "
        f"{s.num_streams} streams, {s.num_events} events"
    )
    for k, v in sorted(tl.stream_busy_ms.items()):
        out.print(
            f"  stream {k}: busy {fmt_ms(v)} ({100 * v / tl.makespan_ms if tl.makespan_ms else 0:.0f}%)"
        )
    if cost is not None:
        out.print(f"  {measured_note(cost)}")
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
    include_inputs: bool = typer.Option(
        False, "--include-inputs", help="count graph inputs in memory figures"
    ),
    include_params: bool = typer.Option(
        False, "--include-params", help="count params/buffers in memory figures"
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Compare policies side by side: streams, events, simulated latency, speedup, memory."""
    from streamplan.report.compare import compare_policies

    g = _load(model, batch, dtype)
    rows = compare_policies(
        g,
        _policies(policies),
        device=device,
        max_streams=max_streams,
        memory=memory,
        include_inputs=include_inputs,
        include_params=include_params,
        progress=not as_json,
    )
    if as_json:
        _emit_json(
            {
                "model": g.name,
                "device": device,
                "batch": batch or 1,
                "memory_includes": _includes(include_inputs, include_params),
                "rows": [r.to_dict() for r in rows],
            }
        )
        return
    _print_compare(g, rows, device, memory, include_inputs, include_params)


def _includes(inputs: bool, params: bool) -> str:
    return "activations" + (" + inputs" if inputs else "") + (" + params" if params else "")


def _print_compare(g, rows, device: str, memory: bool, include_inputs: bool, include_params: bool) -> None:
    from streamplan.report.tables import compare_table

    out.print(compare_table(g, rows, device, memory, _includes(include_inputs, include_params)))
    for r in rows:
        if r.error:
            out.print(f"[red]{r.policy}[/red]: {r.error}")


# --------------------------------------------------------------------------- issue 4
@app.command("memory")
def memory_cmd(
    model: str = ModelArg,
    policy: str = typer.Option("asap", "--policy", "-p"),
    device: str = DeviceOpt,
    max_streams: int = StreamsOpt,
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    include_inputs: bool = typer.Option(False, "--include-inputs"),
    include_params: bool = typer.Option(False, "--include-params"),
    device_memory: float | None = typer.Option(
        None, "--device-memory-gib", help="check the torch-cuda replay against this capacity"
    ),
    measured: str | None = MeasuredOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Every memory figure for one schedule, and the host-order trace."""
    from streamplan.report.memory_view import memory_command

    memory_command(
        out,
        _emit_json,
        _load(model, batch, dtype),
        policy=policy,
        device=device,
        max_streams=max_streams,
        include_inputs=include_inputs,
        include_params=include_params,
        device_memory_bytes=int(device_memory * (1 << 30)) if device_memory else None,
        as_json=as_json,
        measured=measured,
    )


@app.command()
def explain(
    model: str = ModelArg,
    policy: str = typer.Option("asap", "--policy", "-p"),
    vs: str | None = typer.Option("sequential", "--vs", help="compare with this policy"),
    device: str = DeviceOpt,
    max_streams: int = StreamsOpt,
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Which tensors set the peak, and which concurrency made more of them coexist."""
    from streamplan.report.memory_view import explain_command

    explain_command(
        out,
        _emit_json,
        _load(model, batch, dtype),
        policy=policy,
        vs=vs,
        device=device,
        max_streams=max_streams,
        as_json=as_json,
    )


@app.command()
def plot(
    model: str = ModelArg,
    policies: list[str] | None = typer.Option(None, "--policies", help="comma-separated"),
    output: str = typer.Option(..., "-o", "--output", help="PNG to write"),
    device: str = DeviceOpt,
    max_streams: int = StreamsOpt,
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    force: bool = typer.Option(False, "--force"),
) -> None:
    """Plot live memory over simulated time per policy, peaks marked, streams beneath."""
    from streamplan.report.plot import plot_policies

    g = _load(model, batch, dtype)
    plot_policies(
        g,
        _policies(policies or ["sequential,asap"]),
        output,
        device=device,
        max_streams=max_streams,
        force=force,
        protected=(model,),
    )
    err.print(f"wrote {output}")


# --------------------------------------------------------------------------- issue 5
@app.command()
def run(
    model: str = ModelArg,
    policy: str = typer.Option("asap", "--policy", "-p"),
    device: str = typer.Option("cpu", "--device", help="cpu or cuda"),
    max_streams: int = StreamsOpt,
    batch: int | None = BatchOpt,
    chaos: bool = typer.Option(False, "--chaos", help="random delays before ops"),
    repeat: int = typer.Option(5, "--repeat", min=1),
    seed: int = typer.Option(0, "--seed"),
    schedule_file: str | None = typer.Option(
        None, "--schedule", help="run a saved schedule (verified first) instead of --policy"
    ),
    trace: str | None = typer.Option(
        None, "--trace", help="write the measured (CPU) and simulated timelines as one Perfetto trace"
    ),
    force: bool = typer.Option(False, "--force"),
    as_json: bool = JsonOpt,
) -> None:
    """Execute a schedule for real; compare outputs with eager and predictions with measurements."""
    from streamplan.report.run_view import run_command

    run_command(
        out,
        _emit_json,
        model,
        policy=policy,
        device=device,
        max_streams=max_streams,
        batch=batch,
        chaos=chaos,
        repeat=repeat,
        seed=seed,
        as_json=as_json,
        trace=trace,
        force=force,
        schedule_file=schedule_file,
    )


@app.command()
def demo() -> None:
    """The seed question answered on its own example, then a real model compared."""
    from streamplan.report.demo import run_demo

    run_demo(out)


def main() -> None:
    """Entry point: user errors -> one or two lines on stderr and exit status 2."""
    from streamplan.cli_errors import run_app

    run_app(app, out, err)


if __name__ == "__main__":  # python -m streamplan.cli
    main()
