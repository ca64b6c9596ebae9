"""``memory``, ``explain`` and ``plot``: every memory figure of a schedule, why, and a picture."""

from __future__ import annotations

import typer

from streamplan.cli.app import app
from streamplan.cli.common import check_file, emit_json, err, out, print_notes, saved_or_policy, write_file
from streamplan.cli.errors import EXIT_OUT_OF_MEMORY
from streamplan.cli.options import CAPTURE, COST, COUNTED, INTERVAL_NOTE, Given, takes

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


@app.command("memory", help=MEMORY_HELP)
@takes(
    "model", "policy", "schedule_file", *COST, "measured", *CAPTURE, *COUNTED,
    "device_memory_gib", "budget", "fusion", "as_json",
)  # fmt: skip
def memory_cmd(
    o: Given,
    full_trace: bool = typer.Option(
        False,
        "--full-trace",
        help="print every launch of the host-order trace, not only those around its peak",
    ),
) -> None:
    from streamplan.report.views import TRACE_LAUNCHES, memory_lines

    with o.session(policies=[o.policy]) as s:
        run = saved_or_policy(s, o)
        analysis = s.memory(run)
    oom = analysis.allocators["torch-cuda"].oom if "torch-cuda" in analysis.allocators else None
    if o.as_json:
        d = analysis.to_dict()
        d["out_of_memory"] = None if oom is None else oom.to_dict()
        emit_json(d)
    else:
        if oom is not None:
            at = f"at {oom.op}" if oom.op else "before the first op (resident tensors)"
            out.print(
                f"OUT OF MEMORY: {s.graph.name} under {run.policy} does not fit in {o.device_memory_gib:g} GiB: "
                f"the torch-cuda replay fails {at} asking for {oom.device_request_bytes / (1 << 20):.2f} MiB "
                f"(exit status {EXIT_OUT_OF_MEMORY})",
                markup=False,
            )
        for line in memory_lines(analysis, trace_launches=None if full_trace else TRACE_LAUNCHES):
            out.print(line, markup=False)
    if oom is not None:
        raise typer.Exit(EXIT_OUT_OF_MEMORY)


@app.command()
@takes("model", "policy", "schedule_file", *COST, *CAPTURE, "budget", "fusion", "as_json")
def explain(
    o: Given,
    vs: str | None = typer.Option(
        "sequential", "--vs", help="compare with this policy, or with a saved schedule file (.json)"
    ),
) -> None:
    """Which tensors set the peak, which concurrency made more of them coexist, and how close any
    schedule can get to the latency bound (and why)."""
    from streamplan.report.views import explain_lines

    vs_file = vs if vs and vs.endswith(".json") else None
    policies = [] if vs_file or not vs else [vs]  # an unknown --vs policy fails before the capture
    with o.session(policies=policies + ([] if o.schedule_file else [o.policy])) as s:
        run = saved_or_policy(s, o)
        against = s.load_schedule(vs_file, any_fusion=True) if vs_file else vs
        result = s.explain(run, vs=against)
    if o.as_json:
        emit_json(result.to_dict())
        return
    for line in explain_lines(result):
        out.print(line, markup=False, soft_wrap=True)


@app.command()
@takes(
    "model", "policies", *COST, *CAPTURE, "budget", "fusion", "force",
    policies=typer.Option(None, "--policies", help="comma-separated policies to draw; default sequential,asap"),
)  # fmt: skip
def plot(
    o: Given,
    schedule_files: list[str] | None = typer.Option(
        None, "--schedule", help="also draw a saved schedule (repeatable); alone, it is drawn with sequential"
    ),
    output: str = typer.Option(..., "-o", "--output", help="image to write: .png, .svg or .pdf"),
) -> None:
    """Plot live memory over simulated time per policy, peaks marked, streams beneath."""
    from streamplan.report.plot import image_format, render

    protected = o.protected(*(schedule_files or ()))
    check_file(output, force=o.force, protected=protected)
    fmt = image_format(output)
    names = o.policy_names(default="sequential" if schedule_files else "sequential,asap")
    with o.session(policies=names) as s:
        saved = [s.load_schedule(f, any_fusion=True) for f in schedule_files or ()]
        curves = [s.curve(p) for p in names] + [s.curve(loaded) for loaded in saved]
        s.progress("drawing", None, None)
        image = render(s.graph, curves, o.device, fmt=fmt)
    for loaded in saved:
        print_notes(loaded.notes)
    write_file(output, image, force=o.force, protected=protected)
    err.print(f"wrote {output}")
