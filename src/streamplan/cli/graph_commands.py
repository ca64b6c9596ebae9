"""``zoo``, ``show`` and ``export``: the models and their graphs."""

from __future__ import annotations

import typer
from rich.table import Table

from streamplan.cli.app import app
from streamplan.cli.common import check_file, emit_json, err, out, write_file
from streamplan.cli.options import Given, takes
from streamplan.report.units import fmt_bytes


@app.command()
@takes("as_json")
def zoo(o: Given) -> None:
    """List the built-in models."""
    from streamplan.zoo.registry import RANDOM_HELP, RANDOM_TRAIN_HELP, ZOO

    if o.as_json:
        emit_json(
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
    t.add_row("random-train:N[:seed]", RANDOM_TRAIN_HELP.split("— ", 1)[1])
    out.print(t)


@app.command()
@takes(
    "model",
    "batch",
    "dtype",
    "no_cache",
    "train",
    "optimizer",
    "precision",
    "attention",
    "parallel",
    "as_json",
)
def show(
    o: Given, graph: bool = typer.Option(False, "--graph", help="also print the graph, one line per op")
) -> None:
    """Summarise a model's graph: ops, bytes, critical path, maximum parallelism."""
    from streamplan.app.training import describe_step
    from streamplan.ir.analysis import critical_path_ops, max_parallelism

    with o.session() as s:
        g = s.graph
        s.progress("maximum parallelism", None, None)
        par = max_parallelism(g)
        s.progress("memory by category", None, None)
        training = describe_step(g)
    info = {
        "model": g.name,
        "batch": g.meta.get("batch"),
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
        **(training.to_dict() if training is not None else {"train": False}),
    }
    if o.as_json:
        if graph:
            from streamplan.ir.serialize import graph_to_dict

            info["graph"] = graph_to_dict(g)
        emit_json(info)
        return
    t = Table(title=f"{g.name}", show_header=False, show_edge=False)
    t.add_column(style="bold")
    t.add_column()
    if info["batch"] is not None:
        t.add_row("batch", str(info["batch"]))
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
    if training is not None:
        from streamplan.report.views import step_lines

        for line in step_lines(training):
            out.print(line, markup=False)
    if par.width <= 1:
        out.print("note: no two ops are independent; multi-stream policies cannot overlap anything here.")
    if graph:
        out.print(str(g), markup=False)


@app.command()
@takes(
    "model", "batch", "dtype", "no_cache", "train", "optimizer", "precision", "attention", "parallel", "force"
)
def export(o: Given, output: str = typer.Option(..., "-o", "--output", help="graph JSON to write")) -> None:
    """Save a model's graph as JSON (loadable everywhere a model is named)."""
    from streamplan.ir.serialize import dumps

    check_file(output, force=o.force, protected=o.protected())
    with o.session() as s:
        g = s.graph
    write_file(output, dumps(g), force=o.force, protected=o.protected())
    err.print(f"wrote {output}: {len(g.nodes)} ops")
