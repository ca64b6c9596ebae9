"""How long budget scheduling takes: one budget point on random:N, and a whole front.

    OMP_NUM_THREADS=1 .venv/bin/python bench/budget_scale.py [--sizes 1000] [--front nasnet_a_large]

A point is ``make_schedule(g, "budget", ctx)`` at 1.0x and 1.5x the sequential peak (the
context's default 10 s time limit, final worst-case check included); the front is
``streamplan pareto`` with 8 grid points (plus the fixed policies' own figures), on v100.
"""

from __future__ import annotations

import argparse
import time

from streamplan.app.budget import pareto_front
from streamplan.app.context import make_context
from streamplan.cost import simulate
from streamplan.memory import worst_case_peak
from streamplan.models import load_model
from streamplan.schedule import MemoryBudget, make_schedule


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="*", type=int, default=[1000])
    ap.add_argument("--front", nargs="*", default=["nasnet_a_large"])
    ap.add_argument("--device", default="v100")
    a = ap.parse_args()
    ctx = make_context(device=a.device)
    for n in a.sizes:
        g = load_model(f"random:{n}")
        seq = simulate(g, make_schedule(g, "sequential", ctx), ctx.cost).makespan_ms
        for factor in ("1.0x", "1.5x"):
            t0 = time.perf_counter()
            s = make_schedule(g, "budget", ctx.replace(budget=MemoryBudget.parse(factor)))
            took = time.perf_counter() - t0
            ms = simulate(g, s, ctx.cost).makespan_ms
            wc = worst_case_peak(g, s).upper_bytes
            print(
                f"random:{n} budget {factor} ({s.meta['budget_bytes'] / 2**20:.2f} MiB): {took:.1f} s, "
                f"{seq / ms:.2f}x over sequential, worst case {wc / 2**20:.2f} MiB, {s.meta['source']}",
                flush=True,
            )
    for model in a.front:
        g = load_model(model)
        t0 = time.perf_counter()
        front = pareto_front(g, ctx, points=8)
        print(
            f"{model} front: {len(front.points)} points in {time.perf_counter() - t0:.0f} s "
            f"(dominates every fixed policy: {front.dominates_fixed()})",
            flush=True,
        )


if __name__ == "__main__":
    main()
