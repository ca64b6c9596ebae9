"""How the simulator scales: random:N graphs (N = 1k, 10k, 100k), one stream and four streams.

    .venv/bin/python bench/simulate_scale.py [--sizes 1000 10000 100000]

The multi-stream schedule puts op i on stream i % 4 (waits derived by
``schedule.events``), which makes many ops run at once: the worst case for the
processor-sharing event loop. Times are wall seconds for ``simulate`` alone.
"""

from __future__ import annotations

import argparse
import time

from streamplan.cost import simulate
from streamplan.schedule.events import with_derived_waits
from streamplan.zoo.random_dag import random_dag


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="*", type=int, default=[1000, 10_000, 100_000])
    ap.add_argument("--device", default="v100")
    args = ap.parse_args()
    print(f"{'N':>7} {'schedule':<10} {'waits':>7} {'simulate s':>10} {'makespan ms':>12}")
    for n in args.sizes:
        graph = random_dag(n, 0)
        ids = graph.node_ids
        for name, streams in (
            ("1 stream", {op: 0 for op in ids}),
            ("4 streams", {op: i % 4 for i, op in enumerate(ids)}),
        ):
            schedule = with_derived_waits(graph, ids, streams, name)
            t0 = time.perf_counter()
            timeline = simulate(graph, schedule, args.device)
            elapsed = time.perf_counter() - t0
            print(
                f"{n:>7} {name:<10} {schedule.num_waits:>7} {elapsed:>10.2f} {timeline.makespan_ms:>12.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
