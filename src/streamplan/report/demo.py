"""``streamplan demo`` (what ``make demo`` runs): the seed question answered, then a real model."""

from __future__ import annotations

import time

from rich.console import Console
from rich.rule import Rule


def run_demo(
    out: Console, *, model: str = "inception_v3", device: str = "v100", run_model: str = "squeezenet"
) -> None:
    """1. seed-example2 under sequential vs asap: every memory figure, and why they differ.
    2. ``model`` at batch 1 on ``device``: every policy's streams, events, simulated latency and memory.
    3. ``run_model`` run for real on CPU threads under asap with chaos delays: outputs against
    eager, measured latency and memory against the predictions."""
    from streamplan.memory.explain import compare_peaks
    from streamplan.models import load_model
    from streamplan.report.compare import compare_policies
    from streamplan.report.memory_view import _simulated_note
    from streamplan.report.pipeline import scheduled, scheduled_and_simulated
    from streamplan.report.tables import compare_table

    out.print(Rule("1. Does multi-stream execution change peak memory? (the seed discussion, example 2)"))
    out.print(
        "a -> {b -> d, c -> e} -> f, every tensor 1 MiB. A program-order estimator says 3 MiB for both "
        "schedules; streamplan shows what each figure sees:\n"
    )
    g = load_model("seed-example2")
    rows = compare_policies(g, ["sequential", "asap"], device=device)
    out.print(compare_table(g, rows, device, True, "activations"))
    base = scheduled(g, "sequential")
    s, tl = scheduled_and_simulated(g, "asap", device=device)
    out.print("")
    comparison = compare_peaks(g, base, s)
    for line in comparison.lines():
        out.print(line, markup=False)
    for note in comparison.other.notes:
        out.print(f"note: {note}", markup=False)
    out.print(_simulated_note(g, s, tl, device)["text"], markup=False)

    out.print("")
    out.print(Rule(f"2. {model}, batch 1, on the {device} profile: every policy"))
    t0 = time.perf_counter()
    g = load_model(model, batch=1)
    out.print(
        f"captured {len(g.nodes)} ops in {time.perf_counter() - t0:.1f} s (torch.export, no real compute)"
    )
    rows = compare_policies(
        g, ["sequential", "memory", "wavefront", "asap", "nimble", "ios"], device=device, progress=True
    )
    out.print(compare_table(g, rows, device, True, "activations"))
    for r in rows:
        if r.error:
            out.print(f"{r.policy}: {r.error}", markup=False)
    out.print("")
    out.print(Rule(f"3. {run_model}, run for real: one CPU thread per stream, random delays before ops"))
    from streamplan.report.run_view import run_command

    run_command(
        out,
        print,
        run_model,
        policy="asap",
        device="cpu",
        max_streams=8,
        batch=1,
        chaos=True,
        repeat=3,
        seed=0,
        as_json=False,
    )
    out.print(
        "\nNext: `streamplan explain inception_v3 --policy ios`, `streamplan plot inception_v3 "
        "--policies sequential,asap,ios -o mem.png`, `streamplan run inception_v3 --policy asap --chaos "
        "--trace run.json`."
    )
