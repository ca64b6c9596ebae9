"""Budget fronts on the IOS benchmark networks: the targets of the budget policy.

For each model x batch x device setting (v100 launching kernels one by one; h100 with the
schedule replayed as one CUDA graph) the Pareto front (``streamplan pareto``) and:

- whether the front dominates or equals every fixed policy (no fixed policy both faster and
  smaller, figures from the worst-case analysis);
- at a budget equal to the sequential (program-order) peak: the budget schedule's speedup over
  sequential beside the best unconstrained speedup, and whether it keeps at least half of it
  where that exceeds 1.1x;
- the front's search time.

    OMP_NUM_THREADS=1 .venv/bin/python bench/budget_front.py [--models ...] [--batches 1 32]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from streamplan.app.budget import pareto_front
from streamplan.app.context import make_context
from streamplan.models import load_model

MODELS = ("randwire", "nasnet_a", "nasnet_a_large", "inception_v3")
SETTINGS = (("v100", False), ("h100", True))


def front_row(model: str, batch: int, device: str, graphs: bool, graph, points: int) -> dict:
    ctx = make_context(device=device, cuda_graphs=graphs)
    t0 = time.perf_counter()
    front = pareto_front(graph, ctx, points=points)
    elapsed = time.perf_counter() - t0
    seq_ms = front.sequential_ms
    at_seq = [p for p in front.points if p.budget_bytes == front.sequential_peak_bytes]
    point = at_seq[0] if at_seq else None
    best_ms = min([p.makespan_ms for p in front.points] + [f.makespan_ms for f in front.fixed])
    best = seq_ms / best_ms
    kept = (seq_ms / point.makespan_ms) if point else None
    half = None if best <= 1.1 or kept is None else (kept - 1) >= (best - 1) / 2
    return {
        "model": model,
        "batch": batch,
        "device": device,
        "cuda_graphs": graphs,
        "ops": len(graph.nodes),
        "points": len(front.points),
        "front_s": elapsed,
        "dominates_fixed": front.dominates_fixed(),
        "sequential_ms": seq_ms,
        "sequential_peak_mib": front.sequential_peak_bytes / 2**20,
        "floor_mib": front.floor_bytes / 2**20,
        "best_speedup": best,
        "speedup_at_sequential_peak": kept,
        "keeps_half": half,
        "front": front.to_dict(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--batches", nargs="*", type=int, default=[1, 32])
    ap.add_argument("--points", type=int, default=8)
    ap.add_argument("--out", type=Path, default=None, help="every front as JSON")
    a = ap.parse_args()
    rows = []
    print(
        "| model | batch | device | ops | points | front s | dominates fixed | sequential ms | best speedup | "
        "at sequential peak | keeps half |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for model in a.models:
        for batch in a.batches:
            graph = load_model(model, batch=batch)
            for device, graphs in SETTINGS:
                r = front_row(model, batch, device, graphs, graph, a.points)
                rows.append(r)
                half = "-" if r["keeps_half"] is None else ("yes" if r["keeps_half"] else "NO")
                at = (
                    "-"
                    if r["speedup_at_sequential_peak"] is None
                    else f"{r['speedup_at_sequential_peak']:.2f}x"
                )
                print(
                    f"| {model} | {batch} | {device}{' graphs' if graphs else ''} | {r['ops']} | {r['points']} | "
                    f"{r['front_s']:.0f} | {'yes' if r['dominates_fixed'] else 'NO'} | {r['sequential_ms']:.3f} | "
                    f"{r['best_speedup']:.2f}x | {at} | {half} |",
                    flush=True,
                )
    if a.out:
        a.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
