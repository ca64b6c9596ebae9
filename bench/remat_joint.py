"""Joint rematerialization + scheduling against "remat for one stream, then schedule".

.venv/bin/python bench/remat_joint.py [--graph random-train:200] [--policies asap nimble]

At each budget (a factor of the policy's baseline worst case), the same solver and
policy: *separate* plans on the one-stream order and schedules the result once;
*joint* also plans on the policy's launch order and alternates planning and scheduling
(``remat --separate`` vs the default). Prints the makespans (v100 model), the worst-case
peaks reached and which is faster; "no plan" when a mode meets nothing.
"""

from __future__ import annotations

import argparse

from streamplan.app import plan_remat
from streamplan.errors import BudgetError
from streamplan.models import load_model
from streamplan.schedule import ScheduleContext

MIB = 1 << 20


def run(g, budget: str, policy: str, solver: str, ctx: ScheduleContext, joint: bool):
    try:
        return plan_remat(g, budget, policy=policy, solver=solver, ctx=ctx, joint=joint)
    except BudgetError:
        return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--graph", default="random-train:200")
    ap.add_argument("--policies", nargs="+", default=["asap", "nimble"])
    ap.add_argument("--solver", default="scalable")
    ap.add_argument("--budgets", nargs="+", default=["0.9x", "0.8x", "0.7x", "0.6x", "0.5x", "0.4x", "0.3x"])
    ap.add_argument("--max-streams", type=int, default=8)
    args = ap.parse_args()
    ctx = ScheduleContext(max_streams=args.max_streams, time_limit_s=10)
    g = load_model(args.graph)
    print(
        f"{args.graph} ({len(g.nodes)} ops), solver {args.solver}, v100 model, makespan ms / worst-case MiB"
    )
    print("| policy | budget | separate | joint | joint vs separate |")
    print("|---|---|---|---|---|")
    for policy in args.policies:
        for budget in args.budgets:
            sep = run(g, budget, policy, args.solver, ctx, joint=False)
            joint = run(g, budget, policy, args.solver, ctx, joint=True)

            def cell(p):
                return (
                    "no plan" if p is None else f"{p.makespan_ms:.3f} / {p.worst_case_peak_bytes / MIB:.2f}"
                )

            if sep and joint:
                verdict = f"{(joint.makespan_ms / sep.makespan_ms - 1) * 100:+.1f}%"
            elif joint:
                verdict = "only joint fits"
            else:
                verdict = "-"
            print(f"| {policy} | {budget} | {cell(sep)} | {cell(joint)} | {verdict} |", flush=True)


if __name__ == "__main__":
    main()
