"""``codegen`` and ``report``: a schedule leaves the tool as PyTorch code or as an HTML page."""

from __future__ import annotations

import typer

from streamplan.cli.app import app
from streamplan.cli.common import check_file, emit_json, err, out, saved_or_policy, write_file
from streamplan.cli.options import COUNTED, FUSION_HELP, Given, takes

CodegenScheduleOpt = typer.Option(
    None, "--schedule", help="write a saved schedule (verified first) instead of --policy's"
)
CodegenFusionOpt = typer.Option(
    "none", "--fusion", help="how the module's kernels are made (" + FUSION_HELP + ")"
)


@app.command()
@takes(
    "model", "policy", "schedule_file", "device", "max_streams", "batch", "dtype", "train", "optimizer", "precision", "attention", "parallel",
    "fusion", "force", "as_json", schedule_file=CodegenScheduleOpt, fusion=CodegenFusionOpt,
)  # fmt: skip
def codegen(
    o: Given,
    output: str | None = typer.Option(None, "-o", "--output", help="Python file to write (default: stdout)"),
    class_name: str | None = typer.Option(None, "--class-name", help="name of the nn.Module class"),
) -> None:
    """Write a schedule as a self-contained PyTorch module (torch only): streams, events, frees;
    with --train, one training step (forward, loss, backward, optimizer update)."""
    from streamplan.ir.schedule import StreamSchedule

    if output:
        check_file(output, force=o.force, protected=o.protected())
    if o.schedule_file:
        StreamSchedule.load(o.schedule_file)  # an unreadable file fails before the capture
    with o.session(policies=[o.policy]) as s:
        result = s.codegen(saved_or_policy(s, o), class_name=class_name)
    if output:
        write_file(output, result.source, force=o.force, protected=o.protected())
    if o.as_json:
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


@app.command()
@takes(
    "model", "policies", "device", "max_streams", "batch", "dtype", *COUNTED,
    "train", "optimizer", "precision", "attention", "parallel", "fusion", "time_limit", "force", "as_json",
)  # fmt: skip
def report(
    o: Given,
    output: str = typer.Option(..., "-o", "--output", help="HTML file to write"),
    pareto_points: int = typer.Option(
        6, "--pareto-points", min=0, help="budgets on the Pareto front's grid (0: no front)"
    ),
) -> None:
    """Write one self-contained HTML page: policy table, memory over time (by role for a training
    step), the latency/memory Pareto front, stream timelines, explanations."""
    from streamplan.report.html import plotly_js, render_html

    check_file(output, force=o.force, protected=o.protected())
    plotly_js()  # a missing plotly fails now, before any work
    names = o.policy_names()
    with o.session(policies=names) as s:
        result = s.report(names, pareto_points=pareto_points)
        s.progress("writing the page", None, None)
        page = render_html(result)
    write_file(output, page, force=o.force, protected=o.protected())
    if o.as_json:
        emit_json({**result.to_dict(), "output": output})
        return
    failed = [p.policy for p in result.policies if p.row.error]
    err.print(
        f"wrote {output}: {len(result.policies) - len(failed)} policies on {result.device}"
        + (f" ({', '.join(failed)} failed)" if failed else ""),
        markup=False,
    )
