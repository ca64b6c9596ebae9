"""The scalable budget search against the exact CP-SAT optimum on small random graphs.

Ops take fixed times (1-10 ms), at most 4 run at once and never fill the device, launches and
events cost nothing: the simulator and the exact model then agree, so the exact optimum is a
lower bound on any schedule's simulated makespan. Budgets are 1.0, 1.2, 1.5 or 2.0x the floor.
Prints the distribution of the search's gap (its makespan over the exact schedule's, minus 1).

    OMP_NUM_THREADS=1 .venv/bin/python bench/budget_gap.py [--graphs 40] [--min-ops 8] [--max-ops 16]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from streamplan.budget.exact import exact_budget_schedule
from streamplan.budget.figures import memory_floor
from streamplan.cost import FakeCostModel, simulate
from streamplan.frontends.argcodec import tensor_ref
from streamplan.ir.graph import Graph, Node, Value
from streamplan.memory import worst_case_peak
from streamplan.schedule import MemoryBudget, ScheduleContext, make_schedule

MIB = 1 << 20
STREAMS = 4


def random_graph(rng: random.Random, n: int) -> Graph:
    values = {"x": Value("x", (256, 1024), "float32", MIB, "input")}
    nodes, used = [], set()
    for i in range(n):
        ins = [f"v{j}" for j in sorted(rng.sample(range(i), rng.randint(1, min(i, 2))))] if i else ["x"]
        used.update(ins)
        size = rng.randint(1, 4) * MIB
        values[f"v{i}"] = Value(f"v{i}", (256, 1024), "float32", size, "activation")
        op = "aten.atan.default" if len(ins) == 1 else "aten.add.Tensor"
        nodes.append(
            Node(f"n{i}", op, tuple(ins), (f"v{i}",), {"args": [tensor_ref(x) for x in ins], "kwargs": {}})
        )
    outputs = tuple(f"v{i}" for i in range(n) if f"v{i}" not in used)
    return Graph("gap", tuple(nodes), values, ("x",), (), outputs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", type=int, default=40)
    ap.add_argument("--min-ops", type=int, default=8)
    ap.add_argument("--max-ops", type=int, default=16)
    ap.add_argument("--exact-s", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    gaps, optimal, search_s, exact_s = [], 0, [], []
    for _ in range(a.graphs):
        g = random_graph(rng, rng.randint(a.min_ops, a.max_ops))
        cost = FakeCostModel({op: float(rng.randint(1, 10)) for op in g.node_ids}, occupancy=1 / STREAMS)
        floor = memory_floor(g, MemoryBudget(limit_bytes=0)).figure_bytes
        limit = int(floor * rng.choice([1.0, 1.2, 1.5, 2.0]))
        ctx = ScheduleContext(max_streams=STREAMS, cost=cost, budget=MemoryBudget(limit))
        t0 = time.perf_counter()
        found = make_schedule(g, "budget", ctx.replace(options={"solver": "search"}))
        search_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        exact = exact_budget_schedule(g, ctx, limit, time_limit_s=a.exact_s)
        exact_s.append(time.perf_counter() - t0)
        optimal += exact.optimal
        assert (
            worst_case_peak(g, found).upper_bytes <= limit
            and worst_case_peak(g, exact.schedule).upper_bytes <= limit
        )
        gaps.append(simulate(g, found, cost).makespan_ms / simulate(g, exact.schedule, cost).makespan_ms - 1)
    q = statistics.quantiles(gaps, n=10)
    print(
        f"{a.graphs} graphs of {a.min_ops}-{a.max_ops} ops, {optimal} proven optimal within {a.exact_s:g} s"
    )
    print(
        f"gap: mean {100 * statistics.mean(gaps):.1f}%, median {100 * statistics.median(gaps):.1f}%, "
        f"p90 {100 * q[-1]:.1f}%, max {100 * max(gaps):.1f}%; "
        f"{sum(g <= 0.05 + 1e-9 for g in gaps)} of {len(gaps)} within 5%, {sum(g <= 1e-9 for g in gaps)} at 0%"
    )
    print(
        f"search {statistics.mean(search_s):.2f} s mean; exact {statistics.mean(exact_s):.2f} s mean, {max(exact_s):.1f} s max"
    )


if __name__ == "__main__":
    main()
