"""Joint rematerialization + scheduling against "remat for one stream, then schedule".

.venv/bin/python bench/remat_joint.py [--graph random-train:200] [--train --optimizer sgd]
    [--joint budget asap] [--separate asap ios] [--budgets 0.8x 0.6x]

At each budget (a factor of the sequential baseline's worst case, so every column shares
one byte budget): *separate* (``remat --separate --policy P``) plans on one-stream orders
and schedules the result once with P; *joint* (``remat --policy P``) also plans on the
policy's launch orders and fewer streams, alternating planning and scheduling — with
``budget`` the policy itself searches under each solver target. Prints the makespans
(v100 model) and worst-case peaks, and the best joint against the best separate.
"""

from __future__ import annotations

import argparse
import time

from streamplan.app import plan_remat
from streamplan.errors import BudgetError
from streamplan.memory.worst_case import worst_case_peak
from streamplan.models import load_model
from streamplan.schedule import ScheduleContext, make_schedule
from streamplan.schedule.context import MemoryBudget

MIB = 1 << 20


def run(g, budget: int, policy: str, ctx: ScheduleContext, joint: bool, policy_s: float):
    try:
        return plan_remat(g, budget, policy=policy, ctx=ctx, joint=joint, policy_time_limit_s=policy_s)
    except BudgetError:
        return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--graph", default="random-train:200")
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--optimizer", default="none")
    ap.add_argument("--joint", nargs="+", default=["budget", "asap"])
    ap.add_argument("--separate", nargs="+", default=["asap", "ios"])
    ap.add_argument("--budgets", nargs="+", default=["0.9x", "0.7x", "0.5x"])
    ap.add_argument("--max-streams", type=int, default=4)
    ap.add_argument("--policy-time-limit", type=float, default=1.0)
    ap.add_argument("--levels", type=int, default=6)
    args = ap.parse_args()
    ctx = ScheduleContext(max_streams=args.max_streams, time_limit_s=10)
    g = load_model(args.graph, train=args.train, optimizer=args.optimizer)
    seq = make_schedule(g, "sequential", ctx)
    base = worst_case_peak(g, seq).upper_bytes
    print(
        f"{args.graph} train={args.train} optimizer={args.optimizer} ({len(g.nodes)} ops), scalable solver,"
    )
    print(
        f"v100 model, cap {args.max_streams} streams; budgets are factors of the sequential peak {base / MIB:.2f} MiB"
    )
    print("cells: makespan ms / worst-case MiB (search s)")
    cols = [("separate", p) for p in args.separate] + [("joint", p) for p in args.joint]
    print("| budget | " + " | ".join(f"{m} {p}" for m, p in cols) + " | best joint vs best separate |")
    print("|---" * (len(cols) + 2) + "|")
    for text in args.budgets:
        budget = MemoryBudget.parse(text).limit_for(base)
        cells, best = [], {"separate": None, "joint": None}
        for mode, policy in cols:
            t0 = time.perf_counter()
            p = run(g, budget, policy, ctx, mode == "joint", args.policy_time_limit)
            dt = time.perf_counter() - t0
            if p is None:
                cells.append(f"no plan ({dt:.0f} s)")
                continue
            cells.append(f"{p.makespan_ms:.3f} / {p.worst_case_peak_bytes / MIB:.2f} ({dt:.0f} s)")
            if best[mode] is None or p.makespan_ms < best[mode].makespan_ms:
                best[mode] = p
        sep, joint = best["separate"], best["joint"]
        if sep and joint:
            verdict = f"{(joint.makespan_ms / sep.makespan_ms - 1) * 100:+.1f}% ({joint.policy})"
        else:
            verdict = "only joint fits" if joint else "-"
        print(f"| {text} | " + " | ".join(cells) + f" | {verdict} |", flush=True)


if __name__ == "__main__":
    main()
