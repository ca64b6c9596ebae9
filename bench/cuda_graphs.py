"""Simulated multi-stream speedups with CUDA graphs, beside the published anchors.

Opara reports up to 1.68x over a sequential CUDA graph on GoogLeNet; IOS 1.62x on Inception V3
(V100, batch 1, no CUDA graphs). Prints, per model and setting, each policy's simulated
latency and speedup over sequential in the same setting, and the latency bound.

    OMP_NUM_THREADS=1 .venv/bin/python bench/cuda_graphs.py [--models inception_v3 googlenet]
"""

from __future__ import annotations

import argparse

from streamplan.app.context import make_context
from streamplan.cost import latency_bound, simulate
from streamplan.models import load_model
from streamplan.schedule import make_schedule

POLICIES = ("sequential", "wavefront", "asap", "nimble", "ios", "budget")
SETTINGS = (("v100", False), ("h100", False), ("h100", True), ("h200", False), ("h200", True))
ANCHORS = {
    "googlenet": "Opara: up to 1.68x over a sequential CUDA graph",
    "inception_v3": "IOS: 1.62x (V100, no graphs)",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=["inception_v3", "googlenet"])
    ap.add_argument("--batch", type=int, default=1)
    a = ap.parse_args()
    print("| model | setting | sequential ms | " + " | ".join(POLICIES[1:]) + " | bound ms | anchor |")
    print("|---|---|---|" + "---|" * (len(POLICIES) - 1) + "---|---|")
    for model in a.models:
        g = load_model(model, batch=a.batch)
        for device, graphs in SETTINGS:
            ctx = make_context(device=device, cuda_graphs=graphs)
            ms = {p: simulate(g, make_schedule(g, p, ctx), ctx.cost).makespan_ms for p in POLICIES}
            seq = ms["sequential"]
            cells = " | ".join(f"{seq / ms[p]:.2f}x" for p in POLICIES[1:])
            bound = latency_bound(g, ctx.cost).bound_ms
            print(
                f"| {model} | {device}{' graphs' if graphs else ''} | {seq:.3f} | {cells} | {bound:.3f} | "
                f"{ANCHORS.get(model, '')} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
