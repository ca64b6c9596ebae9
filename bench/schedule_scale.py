"""Time schedule + verify + simulate per policy on network-like random DAGs (random:N) as N grows.

    nice .venv/bin/python bench/schedule_scale.py [--sizes 1000,10000,100000] [--policies ...]

sequential, asap and wavefront are near-linear (vector clocks per stream in the
verifier and in wait derivation); memory runs heuristics in O(n * width) plus an
exact search that gives up after a fixed number of states; nimble needs an
O(n^2/64)-bit closure (1.25 GB at 100k ops), so it stops at 10k by default.
"""

from __future__ import annotations

import argparse
import time

from streamplan.cost.simulate import simulate
from streamplan.models import load_model
from streamplan.schedule import make_schedule, verify_schedule
from streamplan.schedule.context import ScheduleContext

QUADRATIC = {"nimble": 10_000, "ios": 1_000}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--policies", default="sequential,memory,wavefront,asap,nimble")
    ap.add_argument("--max-streams", type=int, default=8)
    ap.add_argument("--all", action="store_true", help="also run nimble beyond 10k ops")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    policies = args.policies.split(",")
    print(
        f"{'ops':>8} {'policy':<11} {'streams':>7} {'events':>7} {'schedule_s':>10} {'verify_s':>9} "
        f"{'simulate_s':>10} {'total_s':>8}"
    )
    for n in sizes:
        t0 = time.perf_counter()
        g = load_model(f"random:{n}")
        print(f"{n:>8} {'(load)':<11} {'':>7} {'':>7} {time.perf_counter() - t0:>10.2f}")
        for policy in policies:
            if not args.all and n > QUADRATIC.get(policy, n):
                print(f"{n:>8} {policy:<11} skipped (super-linear; use --all)")
                continue
            t0 = time.perf_counter()
            s = make_schedule(g, policy, ScheduleContext(max_streams=args.max_streams))
            t1 = time.perf_counter()
            verify_schedule(g, s)
            t2 = time.perf_counter()
            simulate(g, s, "v100")
            t3 = time.perf_counter()
            print(
                f"{n:>8} {policy:<11} {s.num_streams:>7} {s.num_events:>7} {t1 - t0:>10.2f} "
                f"{t2 - t1:>9.2f} {t3 - t2:>10.2f} {t3 - t0:>8.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
