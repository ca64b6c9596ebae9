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
    from streamplan.app.analysis import compare_policies, run_policy
    from streamplan.app.context import make_context
    from streamplan.app.explain import simulated_note
    from streamplan.app.run import run_model as run_for_real
    from streamplan.cache import CaptureCache
    from streamplan.memory.explain import compare_peaks
    from streamplan.models import ModelRequest, load_model
    from streamplan.report.tables import compare_table
    from streamplan.report.views import run_lines

    out.print(Rule("1. Does multi-stream execution change peak memory? (the seed discussion, example 2)"))
    out.print(
        "a -> {b -> d, c -> e} -> f, every tensor 1 MiB. A program-order estimator says 3 MiB for both "
        "schedules; streamplan shows what each figure sees:\n"
    )
    ctx = make_context(device=device)
    g = load_model("seed-example2")
    rows = compare_policies(g, ["sequential", "asap"], ctx)
    out.print(compare_table(g, rows, device, True, "activations"))
    base = run_policy(g, "sequential", ctx).schedule
    asap = run_policy(g, "asap", ctx)
    out.print("")
    comparison = compare_peaks(g, base, asap.schedule)
    for line in comparison.lines():
        out.print(line, markup=False)
    for note in comparison.other.notes:
        out.print(f"note: {note}", markup=False)
    out.print(simulated_note(g, asap, device).text, markup=False)

    out.print("")
    out.print(Rule(f"2. {model}, batch 1, on the {device} profile: every policy"))
    t0 = time.perf_counter()
    cache = CaptureCache()  # as every command: the second demo reads the graphs the first captured
    request = ModelRequest(model, batch=1)
    cached = cache.get(request) is not None
    g = request.load(cache=cache)
    if cached:
        out.print(f"read {len(g.nodes)} ops from the capture cache in {time.perf_counter() - t0:.1f} s")
    else:
        out.print(
            f"captured {len(g.nodes)} ops in {time.perf_counter() - t0:.1f} s (torch.export, no real compute)"
        )
    with progress_display(err) as progress:
        rows = compare_policies(
            g, ["sequential", "memory", "wavefront", "asap", "nimble", "ios"], ctx.replace(progress=progress)
        )
    out.print(compare_table(g, rows, device, True, "activations"))
    for r in rows:
        if r.error:
            out.print(f"{r.policy}: {r.error}", markup=False)
    out.print("")
    out.print(Rule(f"3. {run_model}, run for real: one CPU thread per stream, random delays before ops"))
    report = run_for_real(
        run_model,
        "asap",
        make_context(device="cpu"),
        target="cpu",
        batch=1,
        chaos=True,
        repeat=3,
        graph=ModelRequest(run_model, batch=1).load(cache=cache),
    )
    for line in run_lines(report, target="cpu", repeat=3):
        out.print(line, markup=True)
    out.print(
        "\nNext: `streamplan explain inception_v3 --policy ios`, `streamplan plot inception_v3 "
        "--policies sequential,asap,ios -o mem.png`, `streamplan run inception_v3 --policy asap --chaos "
        "--trace run.json`."
    )
