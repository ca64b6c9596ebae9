"""Rematerialization solvers side by side: time, added compute and (exact) proven gap.

.venv/bin/python bench/remat_solvers.py [--sizes 40 200 2000] [--exact-limit 60]

Graphs are ``random-train:N`` (a random forward DAG and its mirrored backward, about
2.5N ops). Targets are fractions of the one-stream host-order peak; each solver plans
on the graph's order. Prints one markdown row per (graph, target): for each solver its
added compute (ms, v100 model), recomputations and seconds, "-" when it found no plan.
The exact solver is started from the scalable plan and given ``--exact-limit`` seconds;
it is skipped above ``--exact-max-ops``.
"""

from __future__ import annotations

import argparse
import time

from streamplan.cost.opcost import AnalyticCostModel
from streamplan.models import load_model
from streamplan.remat.problem import RematProblem
from streamplan.remat.solvers import solve


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[40, 200, 2000])
    ap.add_argument("--targets", type=float, nargs="+", default=[0.75, 0.5, 0.25])
    ap.add_argument("--exact-limit", type=float, default=60.0)
    ap.add_argument("--exact-max-ops", type=int, default=600)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    cost = AnalyticCostModel("v100")
    print(
        "| graph (ops) | target | greedy ms / recomputed / s | scalable ms / recomputed / s | exact ms / gap / s |"
    )
    print("|---|---|---|---|---|")
    for n in args.sizes:
        g = load_model(f"random-train:{n}")
        p = RematProblem.build(g, None, cost)
        base = p.baseline_peak_bytes()
        for frac in args.targets:
            target = int(base * frac)
            cells = []
            for solver in ("greedy", "scalable", "exact"):
                if solver == "exact" and len(g.nodes) > args.exact_max_ops:
                    cells.append("(not run)")
                    continue
                limit = args.exact_limit if solver == "exact" else 60.0
                t0 = time.perf_counter()
                r = solve(solver, p, target, time_limit_s=limit)
                dt = time.perf_counter() - t0
                if not r.found:
                    cells.append(f"- ({r.status}) / {dt:.1f}")
                elif solver == "exact":
                    cells.append(f"{r.added_cost_ms:.3f} / {r.optimality_gap:.1%} ({r.status}) / {dt:.1f}")
                else:
                    cells.append(f"{r.added_cost_ms:.3f} / {r.recomputations} / {dt:.2f}")
            print(
                f"| random-train:{n} ({len(g.nodes)}) | {frac:g}x | " + " | ".join(cells) + " |", flush=True
            )


if __name__ == "__main__":
    main()
