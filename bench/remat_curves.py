"""Peak against added compute: how far rematerialization takes the worst-case peak, and at what cost.

.venv/bin/python bench/remat_curves.py [--zoo] [--graph random-train:200] [--plot docs/remat_curves.png]

Part 1 (``--zoo``): the zoo's inference graphs (batch 1, activations, asap): the baseline
worst-case peak against the floor no plan can go below (the largest op's inputs +
outputs), and the lowest budget (in 5% steps) a plan meets.
Part 2: one graph, budgets 1.0x down to 0.1x of the baseline worst case, under the
``sequential`` and ``asap`` policies: the worst-case peak reached, the added compute and
the makespan (v100 model), for each solver; optionally a plot of peak vs added compute.
"""

from __future__ import annotations

import argparse

from streamplan.app import plan_remat
from streamplan.errors import BudgetError
from streamplan.memory.worst_case import worst_case_peak
from streamplan.models import load_model
from streamplan.remat.budget import peak_floor
from streamplan.schedule import ScheduleContext, make_schedule

MIB = 1 << 20
ZOO = ("squeezenet", "resnet50", "inception_v3", "randwire", "nasnet_a", "bert_base", "gpt2")


def zoo_table(ctx: ScheduleContext) -> None:
    print("| model | ops | baseline worst case MiB (asap) | floor MiB | floor set by | lowest budget met |")
    print("|---|---|---|---|---|---|")
    for m in ZOO:
        g = load_model(m)
        base = worst_case_peak(g, make_schedule(g, "asap", ctx)).upper_bytes
        floor = peak_floor(g)
        lowest = "1.00x"
        for k in range(19, 0, -1):
            try:
                plan_remat(g, f"{k / 20}x", policy="asap", ctx=ctx, levels=6, rounds=1)
                lowest = f"{k / 20:.2f}x"
            except BudgetError:
                break
        print(
            f"| {m} | {len(g.nodes)} | {base / MIB:.2f} | {floor.bytes / MIB:.2f} | {floor.op} | {lowest} |",
            flush=True,
        )


def curves(spec: str, ctx: ScheduleContext, solvers: list[str], plot: str | None) -> None:
    g = load_model(spec)
    print(
        f"\n{spec} ({len(g.nodes)} ops): worst-case peak / added compute / makespan, relative to the baseline"
    )
    print("| policy | solver | budget | peak | added compute | makespan | recomputed |")
    print("|---|---|---|---|---|---|---|")
    points: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for policy in ("sequential", "asap"):
        for solver in solvers:
            for k in range(10, 0, -1):
                budget = k / 10
                try:
                    p = plan_remat(g, f"{budget}x", policy=policy, solver=solver, ctx=ctx)
                except BudgetError:
                    print(f"| {policy} | {solver} | {budget:.1f}x | no plan | | | |", flush=True)
                    break
                compute = sum(ctx.cost.op_time_ms(g, n) for n in g.nodes)
                peak = p.worst_case_peak_bytes / p.baseline_worst_case_peak_bytes
                added = p.added_compute_ms / compute
                span = p.makespan_ms / p.baseline_makespan_ms
                points.setdefault((policy, solver), []).append((added * 100, peak))
                print(
                    f"| {policy} | {solver} | {budget:.1f}x | {peak:.3f} | +{added:.1%} | {span:.3f} | "
                    f"{p.recomputed_ops} |",
                    flush=True,
                )
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.5))
        for (policy, solver), pts in sorted(points.items()):
            xs, ys = zip(*sorted(pts), strict=True)
            ax.plot(xs, ys, "o-", label=f"{policy}, {solver}", markersize=3)
        ax.set_xlabel("added compute (% of the graph's op time, v100 model)")
        ax.set_ylabel("worst-case peak / baseline worst-case peak")
        ax.set_title(f"{spec}: peak vs added compute")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(plot, dpi=110)
        print(f"\nwrote {plot}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--zoo", action="store_true")
    ap.add_argument("--graph", default="random-train:200")
    ap.add_argument("--solvers", nargs="+", default=["greedy", "scalable"])
    ap.add_argument("--plot", default=None)
    args = ap.parse_args()
    ctx = ScheduleContext(max_streams=8, time_limit_s=10)
    if args.zoo:
        zoo_table(ctx)
    curves(args.graph, ctx, args.solvers, args.plot)


if __name__ == "__main__":
    main()
