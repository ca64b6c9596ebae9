"""Remat on a Llama-style step against the frameworks' checkpointing policies, at equal peak.

OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/python bench/remat_llama.py [--spec bench/specs_llama.py:llama3_8b]
    [--factors 0.9 0.7 0.5 0.35 0.25 0.2] [--device h100]

One stream (``sequential``), where a plan's worst-case peak is its exact peak. Rows:

- the step as captured (the baseline);
- torchtitan's per-layer *full* activation checkpointing and its op-level *selective* policy,
  written as plans over the model's numbered blocks (``streamplan.remat.checkpoint``) and
  priced by the same analysis (``plan_checkpointing``);
- ``plan_remat`` with each policy's predicted peak as its budget (equal peak), then at
  budgets from ``--factors`` of the baseline down towards the floor.

Each row: the worst-case peak, the recomputed FLOPs (the captured ops' counts), the
simulated step time against the baseline, the search's seconds. Then whether the plans'
step times never rise as the budget grows (monotone in the budget).
"""

from __future__ import annotations

import argparse
import time

MIB = 1 << 20


def main() -> None:
    from streamplan.app.context import make_context
    from streamplan.app.remat import plan_checkpointing, plan_remat
    from streamplan.cache import CaptureCache
    from streamplan.errors import BudgetError
    from streamplan.models import ModelRequest

    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", default="bench/specs_llama.py:llama3_8b")
    ap.add_argument("--factors", type=float, nargs="+", default=[0.9, 0.7, 0.5, 0.35, 0.25, 0.2])
    ap.add_argument("--device", default="h100")
    ap.add_argument("--levels", type=int, default=12)
    args = ap.parse_args()

    graph = ModelRequest(args.spec, train=True, optimizer="adam").load(cache=CaptureCache())
    ctx = make_context(device=args.device, max_streams=1, time_limit_s=10)
    print(f"{args.spec}: {len(graph.nodes)} ops, {args.device}, one stream\n")
    print(
        "| plan | budget MiB | worst-case peak MiB | recomputed TFLOP | step ms (vs baseline) | recomputed ops | s |"
    )
    print("|---|---|---|---|---|---|---|")
    rows: list[tuple[int, float, float]] = []  # (budget, step ms, flops) of streamplan's plans

    def show(name: str, budget, plan, seconds: float) -> None:
        base = plan.baseline_makespan_ms
        b = "" if budget is None else f"{budget / MIB:,.0f}"
        print(
            f"| {name} | {b} | {plan.worst_case_peak_bytes / MIB:,.0f} | {plan.recomputed_flops / 1e12:,.2f} | "
            f"{plan.makespan_ms:,.1f} ({100 * (plan.makespan_ms / base - 1):+.1f}%) | {plan.recomputed_ops} | "
            f"{seconds:.1f} |",
            flush=True,
        )

    def search(name: str, budget) -> None:
        t = time.perf_counter()
        try:
            plan = plan_remat(graph, budget, policy="sequential", ctx=ctx, levels=args.levels)
        except BudgetError as e:
            print(
                f"| {name} | {budget / MIB if isinstance(budget, int) else budget} | no plan: {e.short()[:80]} | | | | |"
            )
            return
        show(name, plan.budget_bytes, plan, time.perf_counter() - t)
        rows.append((plan.budget_bytes, plan.makespan_ms, plan.recomputed_flops))

    t = time.perf_counter()
    policies = {}
    for policy in ("full", "selective"):
        t = time.perf_counter()
        policies[policy] = plan_checkpointing(graph, policy, policy="sequential", ctx=ctx)
        if policy == "full":
            base = policies[policy]
            print(
                f"| baseline (nothing recomputed) | | {base.baseline_worst_case_peak_bytes / MIB:,.0f} | 0 | "
                f"{base.baseline_makespan_ms:,.1f} | 0 | |"
            )
        show(f"torchtitan {policy} AC", None, policies[policy], time.perf_counter() - t)
    for policy, plan in policies.items():
        search(f"streamplan at {policy} AC's peak", plan.worst_case_peak_bytes)
    base_bytes = policies["full"].baseline_worst_case_peak_bytes
    for f in args.factors:
        search(f"streamplan at {f}x", int(f * base_bytes))
    rows.sort()
    monotone = all(b[1] <= a[1] + 1e-9 for a, b in zip(rows, rows[1:], strict=False))
    print(f"\nstep time never rises as the budget grows: {'yes' if monotone else 'NO'} ({len(rows)} budgets)")


if __name__ == "__main__":
    main()
