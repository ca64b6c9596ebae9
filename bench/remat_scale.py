"""Analyses of a full-size training step within their time limit: Llama-3-8B (meta device, AdamW).

OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/python bench/remat_scale.py [--spec bench/specs_llama.py:llama3_8b]
    [--budgets 0.5x 0.34x] [--policies sequential memory wavefront asap nimble ios budget] [--device v100]

Captures the step once (through the capture cache; capture time and peak RSS printed), then:

- each policy's schedule (under the context's time limit, ``--time-limit``, 10 s by default),
  its simulation and its worst-case peak, with the seconds each took;
- ``remat`` at each budget with the command's defaults (``asap``, 8 streams, 8 levels, the
  scalable solver): the seconds, the peak against the baseline, the added compute, the
  recomputations and how many plans the search made, simulated and proved.

The sequence length and batch come from ``LLAMA_SEQ`` / ``LLAMA_BATCH`` (``bench/specs_llama.py``).
"""

from __future__ import annotations

import argparse
import os
import resource
import time

MIB = 1 << 20


def main() -> None:
    from streamplan.app.context import make_context
    from streamplan.app.remat import plan_remat
    from streamplan.cache import CaptureCache
    from streamplan.cost.simulate import simulate
    from streamplan.errors import StreamplanError
    from streamplan.memory.worst_case import worst_case_peak
    from streamplan.models import ModelRequest
    from streamplan.schedule.registry import make_schedule

    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", default="bench/specs_llama.py:llama3_8b")
    ap.add_argument("--budgets", nargs="*", default=["0.5x"])
    ap.add_argument(
        "--policies",
        nargs="*",
        default=["sequential", "memory", "wavefront", "asap", "nimble", "ios", "budget"],
    )
    ap.add_argument("--device", default="v100")
    ap.add_argument("--time-limit", type=float, default=10.0)
    args = ap.parse_args()

    t0 = time.perf_counter()
    graph = ModelRequest(args.spec, train=True, optimizer="adam").load(cache=CaptureCache())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    load = os.getloadavg()[0]
    print(
        f"{args.spec}: {len(graph.nodes)} ops, loaded in {time.perf_counter() - t0:.1f} s, peak RSS {rss:.0f} MiB"
    )
    print(
        f"load average {load:.1f} on {os.cpu_count()} cores: seconds are wall clock (CPU seconds in brackets)"
    )
    print()
    print("| policy | schedule s | simulate s | worst case s | makespan ms | worst-case peak MiB |")
    print("|---|---|---|---|---|---|")

    def clock() -> tuple[float, float]:
        return time.perf_counter(), time.process_time()

    def since(a: tuple[float, float], b: tuple[float, float]) -> str:
        return f"{b[0] - a[0]:.1f} ({b[1] - a[1]:.1f})"

    for policy in args.policies:
        ctx = make_context(device=args.device, max_streams=8, time_limit_s=args.time_limit)
        c0 = clock()
        try:
            sched = make_schedule(graph, policy, ctx)
        except StreamplanError as e:
            print(f"| {policy} | failed: {e.short()} | | | | |")
            continue
        c1 = clock()
        tl = simulate(graph, sched, ctx.cost)
        c2 = clock()
        wc = worst_case_peak(graph, sched, time_limit_s=args.time_limit)
        c3 = clock()
        lo, hi = wc.lower_bytes / MIB, wc.upper_bytes / MIB
        peak = f"{hi:,.0f}" if wc.exact else f"[{lo:,.0f}, {hi:,.0f}]"
        row = f"| {policy} | {since(c0, c1)} | {since(c1, c2)} | {since(c2, c3)} | {tl.makespan_ms:,.1f} | {peak} |"
        print(row, flush=True)
    print()
    print("| budget | search s | baseline MiB | plan MiB | reduction | added compute | recomputed ops | GFLOP | "
          "plans / simulated / proved |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for budget in args.budgets:
        ctx = make_context(device=args.device, max_streams=8, time_limit_s=args.time_limit)
        c0 = clock()
        try:
            plan = plan_remat(graph, budget, policy="asap", ctx=ctx, levels=8, policy_time_limit_s=2.0)
        except StreamplanError as e:
            print(f"| {budget} | {since(c0, clock())} | {e.short()} | | | | | | |")
            continue
        spent = since(c0, clock())
        base, peak = plan.baseline_worst_case_peak_bytes, plan.worst_case_peak_bytes
        print(
            f"| {budget} | {spent} | {base / MIB:,.0f} | {peak / MIB:,.0f} | {base / peak:.2f}x | "
            f"{100 * plan.added_compute_ms / plan.baseline_makespan_ms:+.1f}% | {plan.recomputed_ops} | "
            f"{plan.recomputed_flops / 1e9:,.0f} | {plan.candidates} / {plan.evaluated} / {plan.analyses} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
