"""Per op kind: what a calibrated CPU profile predicts against what the CPU runtime measures.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/python bench/cpu_kinds.py \\
        [--profile FILE.json] [--models randwire nasnet_a ...] [--kind conv1x1] [--repeat 5]

Calibrates (``calibrate --on cpu``; or loads ``--profile``), runs each model
sequentially on the CPU runtime (median per op over ``--repeat`` runs after a warm-up)
and prints, per op kind, the sum of the ops' measured spans beside the sum of the
profile's per-op predictions, and their ratio. A kind far from 1 while the others are
near it is what the calibration gets wrong for that model (this is how the causes in
BENCHMARKS.md's CPU leave-one-model-out sections were found). ``--kind K`` also lists
that kind's ops grouped by input shape.

A measured span is the op's call only; a prediction includes the profile's fixed time
per op, which also stands for the interpreter's work between ops. For long ops this
does not matter; for small kinds (batch norm, relu, add: tens of µs) the ratio reads
lower than 1 even when the whole model's sum agrees. Machine load moves whole-model
latencies by several percent between runs; ratios within one run move much less.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict


def main(argv: list[str] | None = None) -> int:
    import torch

    from streamplan.app.calibrate import calibrate
    from streamplan.cost import AnalyticCostModel, simulate
    from streamplan.cost.kinds import op_features
    from streamplan.cost.op_classes import is_view_op
    from streamplan.cost.profile import load_profile
    from streamplan.models import load_model
    from streamplan.runtime import run
    from streamplan.schedule import make_schedule

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default=None, help="a calibrated profile file (default: calibrate now)")
    ap.add_argument("--models", nargs="*", default=["randwire", "nasnet_a", "resnet50", "googlenet"])
    ap.add_argument("--kind", default=None, help="also list this kind's ops by input shape")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    profile = load_profile(a.profile) if a.profile else calibrate("cpu").profile
    cost = AnalyticCostModel(profile)
    for name in a.models:
        g = load_model(name) if name.endswith(".json") else load_model(name, batch=1)
        schedule = make_schedule(g, "sequential")
        r = run(g, schedule, repeat=a.repeat, warmup=1)
        spans: dict[str, list[float]] = defaultdict(list)
        for tl in r.timelines:
            for s in tl.spans:
                spans[s.op].append(s.end_ms - s.start_ms)
        by_kind: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
        by_shape: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
        for n in g.nodes:
            if n.id not in spans or is_view_op(g, n):
                continue
            kind = op_features(g, n).kind
            measured, predicted = statistics.median(spans[n.id]), cost.op_time_ms(g, n)
            for table, key in ((by_kind, kind), (by_shape, str([g.values[v].shape for v in n.inputs[:2]]))):
                if table is by_kind or kind == a.kind:
                    row = table[key]
                    row[0] += 1
                    row[1] += measured
                    row[2] += predicted
        predicted_ms = simulate(g, schedule, cost).makespan_ms
        print(f"== {name}: measured {r.measured_ms:.1f} ms, predicted {predicted_ms:.1f} ms "
              f"({100 * (predicted_ms / r.measured_ms - 1):+.1f}%)")  # fmt: skip
        for title, table in (("kind", by_kind), (f"{a.kind} by input shape", by_shape)):
            if table:
                print(f"   {title:<44} {'ops':>4} {'measured ms':>12} {'predicted ms':>13} {'ratio':>6}")
            for key, (count, measured, predicted) in sorted(table.items(), key=lambda kv: -kv[1][1]):
                ratio = measured / predicted if predicted > 0 else float("nan")
                print(f"   {key:<44} {count:4d} {measured:12.2f} {predicted:13.2f} {ratio:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
