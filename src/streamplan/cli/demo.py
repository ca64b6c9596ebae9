"""``streamplan demo`` (what ``make demo`` runs): the seed question answered, then a real model."""

from __future__ import annotations

import time

from rich.console import Console
from rich.rule import Rule

from streamplan.cli.common import err
from streamplan.cli.progress import progress_display


def run_demo(
    out: Console, *, model: str = "inception_v3", device: str = "v100", run_model: str = "squeezenet"
) -> None:
    """1. seed-example2 under sequential vs asap: every memory figure, and why they differ.
    2. ``model`` at batch 1 on ``device``: every policy's streams, events, simulated latency and memory.
    3. ``run_model`` run for real on CPU threads under asap with chaos delays: outputs against
    eager, measured latency and memory against the predictions."""
    from streamplan.app.explain import simulated_note
    from streamplan.app.model_session import analyze
    from streamplan.memory.explain import compare_peaks
    from streamplan.report.tables import compare_table
    from streamplan.report.views import run_lines

    out.print(Rule("1. Does multi-stream execution change peak memory? (the seed discussion, example 2)"))
    out.print(
        "a -> {b -> d, c -> e} -> f, every tensor 1 MiB. A program-order estimator says 3 MiB for both "
        "schedules; streamplan shows what each figure sees:\n"
    )
    seed = analyze("seed-example2", device=device)
    rows = seed.compare(["sequential", "asap"]).rows
    out.print(compare_table(seed.graph, rows, device, True, "activations"))
    base, asap = seed.schedule("sequential").schedule, seed.schedule("asap")
    out.print("")
    comparison = compare_peaks(seed.graph, base, asap.schedule)
    for line in comparison.lines():
        out.print(line, markup=False)
    for note in comparison.other.notes:
        out.print(f"note: {note}", markup=False)
    out.print(simulated_note(seed.graph, asap, device).text, markup=False)

    out.print("")
    out.print(Rule(f"2. {model}, batch 1, on the {device} profile: every policy"))
    t0 = time.perf_counter()
    with progress_display(err) as progress:
        s = analyze(model, batch=1, device=device, cache=False, progress=progress)
        out.print(
            f"captured {len(s.graph.nodes)} ops in {time.perf_counter() - t0:.1f} s (torch.export, no real compute)"
        )
        rows = s.compare(["sequential", "memory", "wavefront", "asap", "nimble", "ios"]).rows
    out.print(compare_table(s.graph, rows, device, True, "activations"))
    for r in rows:
        if r.error:
            out.print(f"{r.policy}: {r.error}", markup=False)
    out.print("")
    out.print(Rule(f"3. {run_model}, run for real: one CPU thread per stream, random delays before ops"))
    report = analyze(run_model, batch=1, device="cpu").run("asap", on="cpu", chaos=True, repeat=3)
    for line in run_lines(report, target="cpu", repeat=3):
        out.print(line, markup=True)
    out.print(
        "\nNext: `streamplan explain inception_v3 --policy ios`, `streamplan plot inception_v3 "
        "--policies sequential,asap,ios -o mem.png`, `streamplan run inception_v3 --policy asap --chaos "
        "--trace run.json`."
    )
