"""How the memory analysis scales: every figure on random:N for N = 1k, 10k, 100k.

    nice .venv/bin/python bench/memory_scale.py [--sizes 1000,10000,100000] [--policy asap]
                                                [--time-limit 10]

Prints seconds per step. Host-order, liveness, simulated peak, allocator replay and
arena placement should grow close to linearly; the worst-case step is a CP-SAT
search per independent segment (between ops ordered with every other op) and turns
into a proven interval when its time limit runs out; the arena bound is one max-flow
on a network of O(storages x streams) edges.
"""

from __future__ import annotations

import argparse
import time

from streamplan.memory.arena import check_arena, lower_bound, plan_arena
from streamplan.memory.host_order import trace_from_liveness
from streamplan.memory.liveness import liveness
from streamplan.memory.simulated import simulated_memory
from streamplan.memory.worst_case import cut_positions, worst_case_peak
from streamplan.models import load_model

MIB = 1 << 20


def schedule_for(graph, policy: str):
    try:
        from streamplan.schedule.registry import make_schedule
    except ImportError:  # before the policies existed: round-robin over 4 streams
        from streamplan.schedule.events import with_derived_waits

        order = list(graph.node_ids)
        return with_derived_waits(graph, order, {op: i % 4 for i, op in enumerate(order)}, "round-robin")
    return make_schedule(graph, policy)


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def run(n: int, policy: str, time_limit_s: float, check: bool) -> None:
    g = load_model(f"random:{n}")
    s, t_sched = timed(schedule_for, g, policy)
    live, t_live = timed(liveness, g, s)
    host, t_host = timed(trace_from_liveness, live, s)
    sim_s, alloc_s, sim_peak, alloc = float("nan"), float("nan"), None, None
    try:
        from streamplan.cost.simulate import simulate

        tl, t_simulate = timed(simulate, g, s, "v100")
        sim, sim_s = timed(simulated_memory, g, s, tl, live=live)
        sim_peak = sim.peak_bytes
        from streamplan.memory.allocators import replay

        alloc, alloc_s = timed(replay, g, s, "torch-cuda", timeline=tl)
    except ImportError:
        pass
    (bound, _, bound_exact), t_bound = timed(lower_bound, live)
    arena, t_arena = timed(plan_arena, g, s, live=live)
    cap = arena.lower_bound_bytes if arena.lower_bound_exact else arena.arena_bytes
    wc, t_wc = timed(worst_case_peak, g, s, live=live, upper_bound_bytes=cap, time_limit_s=time_limit_s)
    cuts = len(cut_positions(live, list(s.launch_order)))
    print(
        f"\nrandom:{n} under {s.policy}: {len(g.nodes)} ops, {len(live.lives)} storages, "
        f"{s.num_streams} streams, {cuts} cut ops (schedule made in {t_sched:.2f} s)"
    )
    print(f"  liveness + HB          {t_live:8.2f} s")
    print(f"  host-order trace       {t_host:8.2f} s   peak {host.peak_bytes / MIB:9.2f} MiB")
    if sim_peak is not None:
        print(
            f"  simulated peak         {sim_s:8.2f} s   peak {sim_peak / MIB:9.2f} MiB "
            f"(simulator itself {t_simulate:.2f} s)"
        )
    if alloc is not None:
        print(
            f"  torch-cuda replay      {alloc_s:8.2f} s   allocated {alloc.allocated_peak_bytes / MIB:.2f} MiB, "
            f"reserved {alloc.reserved_peak_bytes / MIB:.2f} MiB"
        )
    print(f"  arena bound (max-flow) {t_bound:8.2f} s   bound {bound / MIB:9.2f} MiB (exact={bound_exact})")
    print(
        f"  arena plan (incl bound){t_arena:8.2f} s   arena {arena.arena_bytes / MIB:9.2f} MiB, "
        f"ratio {arena.ratio:.3f}, order {arena.order}"
    )
    print(
        f"  worst case             {t_wc:8.2f} s   [{wc.lower_bytes / MIB:.2f}, {wc.upper_bytes / MIB:.2f}] MiB "
        f"exact={wc.exact} ({wc.method})"
    )
    if check:
        bad, t_check = timed(check_arena, live, arena.offsets)
        print(f"  arena check            {t_check:8.2f} s   {len(bad)} overlapping may-coexist pairs")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--policy", default="asap")
    ap.add_argument("--time-limit", type=float, default=10.0, help="worst-case solver budget, seconds")
    ap.add_argument("--check", action="store_true", help="also run the independent arena checker")
    args = ap.parse_args()
    for n in (int(x) for x in args.sizes.split(",")):
        run(n, args.policy, args.time_limit, args.check)


if __name__ == "__main__":
    main()
