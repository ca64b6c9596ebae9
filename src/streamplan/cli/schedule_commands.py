"""``schedule``, ``verify``, ``simulate`` and ``compare``: making schedules and costing them."""

from __future__ import annotations

import typer

from streamplan.cli.app import app
from streamplan.cli.common import check_file, emit_json, err, out, print_notes, saved_or_policy, write_file
from streamplan.cli.options import (
    CAPTURE,
    COST,
    COUNTED,
    DEFAULT_POLICIES,
    FUSION_HELP,
    INTERVAL_NOTE,
    Given,
    takes,
)


@app.command()
@takes("model", "policy", *COST, *CAPTURE, "budget", "budget_figure", "fusion", "force", "as_json")
def schedule(
    o: Given,
    output: str | None = typer.Option(
        None, "-o", "--output", help="schedule JSON to write (with the fingerprint of the graph it is for)"
    ),
) -> None:
    """Schedule a model with a policy; print it or save it as JSON."""
    settings = o.settings()
    settings.check_policies([o.policy])  # an unknown policy, or a budget it ignores, fails first
    if output:
        check_file(output, force=o.force, protected=o.protected())
    with o.session(settings) as s:
        sched = s.schedule(o.policy).schedule
    if output:
        write_file(output, sched.dumps(), force=o.force, protected=o.protected())
        if not o.as_json:
            err.print(
                f"wrote {output}: {_n(len(sched.launch_order), 'op')} on {_n(sched.num_streams, 'stream')}, "
                f"{_n(sched.num_events, 'event')}"
            )
    if o.as_json:
        emit_json(sched.to_dict())
    elif not output:
        out.print(str(sched), markup=False)


@app.command("verify")
@takes("model", *CAPTURE, "as_json")
def verify_cmd(
    o: Given, schedule_file: str = typer.Argument(..., help="schedule JSON (`streamplan schedule -o FILE`)")
) -> None:
    """Check a saved schedule against a model: exit 0 if valid, 1 naming the problem otherwise."""
    from streamplan.ir.schedule import StreamSchedule

    StreamSchedule.load(schedule_file)  # an unreadable file fails before the capture
    with o.session() as s:
        check = s.verify(schedule_file)
    if o.as_json:
        emit_json(check.to_dict())
    elif check.problems:
        err.print(f"invalid schedule {schedule_file}:", markup=False)
        for p in check.problems[:20]:
            err.print(f"  {p}", markup=False)
        if len(check.problems) > 20:
            err.print(f"  ... and {len(check.problems) - 20} more")
    else:
        out.print(str(check), markup=False)
    raise typer.Exit(0 if check.valid else 1)


@app.command()
@takes(
    "model", "policy", "schedule_file", *COST, "measured", *CAPTURE, "budget", "fusion", "force", "as_json"
)
def simulate(
    o: Given,
    trace: str | None = typer.Option(
        None, "--trace", help="write the simulated timeline as a Perfetto/Chrome trace JSON"
    ),
) -> None:
    """Simulate a schedule on a device profile: makespan and per-stream busy time."""
    from streamplan.app.simulation import SimulationReport
    from streamplan.report.trace import dumps_trace
    from streamplan.report.views import simulation_lines

    if trace:
        check_file(trace, force=o.force, protected=o.protected())
    with o.session(policies=[o.policy]) as s:
        run = saved_or_policy(s, o)
        report = SimulationReport.of(s.graph, run, s.cost, device=o.device, cuda_graphs=o.cuda_graphs)
    if trace:
        from streamplan.memory.simulated import simulated_memory

        live = simulated_memory(run.scheduled_graph(s.graph), run.schedule, run.timeline).samples
        text = dumps_trace(run.timeline, name=f"{s.graph.name} {run.policy}", live_bytes=live)
        write_file(trace, text, force=o.force, protected=o.protected())
    if o.as_json:
        emit_json(report.to_dict())
        return
    for line in simulation_lines(report):
        out.print(line)
    if trace:
        err.print(f"wrote {trace} (open in ui.perfetto.dev)")


COMPARE_HELP = f"""Compare policies side by side: streams, events, simulated latency, speedup, memory.

\b
Latency table:
  streams, events  CUDA streams used, and events recorded for cross-stream waits
  latency          simulated makespan on the --device profile
  speedup          sequential's latency (of the same fusion) divided by this row's
  search           seconds the policy took to find its schedule
Memory table (MiB = 2^20 B; docs/memory.md explains each figure):
  host-order       peak of a program-order estimate (launch order, no concurrency)
  worst-case       the most ever live at once over every timing the schedule allows
  simulated        peak along the one timeline the cost model predicts
  torch alloc/resv torch-cuda caching allocator: max_memory_allocated / max_memory_reserved
  arena, arena LB  one fixed-offset buffer valid for every timing, and its lower bound

{INTERVAL_NOTE[0].upper() + INTERVAL_NOTE[1:]}."""

PoliciesOpt = typer.Option(
    None,
    "--policies",
    help=f"comma-separated policies; default {DEFAULT_POLICIES} (sequential alone with --schedule)",
)
FusionsOpt = typer.Option(
    "none", "--fusion", help="fusion modes to compare, comma-separated, or all (" + FUSION_HELP + ")"
)


@app.command(help=COMPARE_HELP)
@takes(
    "model", "policies", *COST, *CAPTURE, *COUNTED, "budget", "fusion", "as_json",
    policies=PoliciesOpt, fusion=FusionsOpt,
)  # fmt: skip
def compare(
    o: Given,
    schedule_files: list[str] | None = typer.Option(
        None, "--schedule", help="also compare a saved schedule (repeatable), one row per file"
    ),
    memory: bool = typer.Option(True, "--memory/--no-memory", help="also compute every memory figure"),
) -> None:
    from streamplan.report.tables import compare_table
    from streamplan.report.views import training_answer_lines

    names = o.policy_names(default="sequential" if schedule_files else DEFAULT_POLICIES)
    settings = o.settings()
    with o.session(settings, policies=names) as s:
        saved = [s.load_schedule(f, any_fusion=True) for f in schedule_files or ()]
        result = s.compare(names, memory=memory, schedules=saved, fusions=o.fusions())
    print_notes(result.notes)
    rows, includes = result.rows, settings.includes.brief()
    if o.as_json:
        emit_json(
            {
                "model": s.graph.name,
                "device": o.device,
                "batch": s.graph.meta.get("batch"),  # what the graph was built at (null: unknown)
                "train": s.graph.is_training,
                "cuda_graphs": o.cuda_graphs,
                "memory_includes": includes,
                "rows": [r.to_dict() for r in rows],
                **({"training_peak": result.answer.to_dict()} if result.answer is not None else {}),
            }
        )
        return
    device = o.device + (" as CUDA graphs" if o.cuda_graphs else "")
    out.print(compare_table(s.graph, rows, device, memory, includes))
    for r in rows:
        if r.error:
            out.print(f"{r.policy}: {r.error}", markup=False)
    if memory and any(r.memory is not None and not r.memory.worst_case.exact for r in rows):
        out.print(f"note: {INTERVAL_NOTE}.", markup=False)
    for line in training_answer_lines(result.answer) if result.answer is not None else ():
        out.print(line, markup=False)


def _n(k: int, noun: str) -> str:
    return f"{k} {noun}" + ("" if k == 1 else "s")
