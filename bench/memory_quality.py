"""Memory quality on the zoo: static arena vs its lower bound, and the `memory` order vs graph order.

    .venv/bin/python bench/memory_quality.py [--models inception_v3,randwire,...] [--policies sequential,asap]

Prints, per model and policy, the arena size, its lower bound and their ratio (target
<= 1.05), and per model the peak live activation bytes of the graph order vs the
memory-optimised order (Serenity reports 1.68x lower peaks on irregular networks).
"""

from __future__ import annotations

import argparse
import time

from streamplan.memory.arena import plan_arena
from streamplan.models import load_model
from streamplan.schedule.live_bytes import sequential_peak_bytes
from streamplan.schedule.registry import make_schedule

MiB = 1 << 20
ZOO = "squeezenet,inception_v3,randwire,nasnet_a,resnet50,bert_base,gpt2"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=ZOO)
    ap.add_argument("--policies", default="sequential,memory,wavefront,asap,nimble")
    ap.add_argument("--batch", type=int, default=1)
    args = ap.parse_args()
    arena_rows, order_rows = [], []
    for name in args.models.split(","):
        g = load_model(name, batch=args.batch)
        for policy in args.policies.split(","):
            t0 = time.perf_counter()
            s = make_schedule(g, policy)
            plan = plan_arena(g, s)
            arena_rows.append(
                (
                    name,
                    policy,
                    plan.arena_bytes,
                    plan.lower_bound_bytes,
                    plan.lower_bound_exact,
                    time.perf_counter() - t0,
                )
            )
        graph_order = sequential_peak_bytes(g, g.node_ids)
        t0 = time.perf_counter()
        mem = make_schedule(g, "memory")
        mem_peak = sequential_peak_bytes(g, mem.launch_order)
        order_rows.append((name, graph_order, mem_peak, time.perf_counter() - t0, mem.meta.get("method", "")))

    print(f"\nstatic arena vs lower bound (activations, batch {args.batch})")
    print(
        f"{'model':14} {'policy':11} {'arena MiB':>10} {'bound MiB':>10} {'ratio':>6} {'exact':>6} {'time s':>7}"
    )
    for name, policy, arena, bound, exact, secs in arena_rows:
        ratio = arena / bound if bound else 1.0
        print(
            f"{name:14} {policy:11} {arena / MiB:10.2f} {bound / MiB:10.2f} {ratio:6.3f} {str(exact):>6} {secs:7.2f}"
        )
    print(f"\nmemory order vs graph order (peak live activations, one stream, batch {args.batch})")
    print(f"{'model':14} {'graph MiB':>10} {'memory MiB':>11} {'gain':>6} {'time s':>7}  method")
    for name, go, mo, secs, method in order_rows:
        print(
            f"{name:14} {go / MiB:10.2f} {mo / MiB:11.2f} {go / mo if mo else 1:6.3f} {secs:7.2f}  {method}"
        )


if __name__ == "__main__":
    main()
