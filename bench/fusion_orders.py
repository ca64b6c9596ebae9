"""Fusion and scheduling in three orders: kernels, makespan and peaks per model, policy and device.

For each model, device and policy: ``none`` (ops as captured), ``first`` (fuse, then
schedule: fusion may merge parallel branches) and ``stream-aware`` (schedule, then fuse
along each stream). Columns: kernels launched, streams used, simulated makespan, speedup
over the same fusion's ``sequential``, worst-case peak of live activations over every
timing (MiB; an interval when the search stops early), the kernels that merged branches a
scheduler could have run in parallel, and the ops dropped as repeats of earlier ones.

    OMP_NUM_THREADS=1 .venv/bin/python bench/fusion_orders.py [--models ...] [--devices v100 h100]
                                                             [--cuda-graphs]

``--cuda-graphs`` simulates every schedule replayed as one CUDA graph (device label
``h100 graphs``).
"""

from __future__ import annotations

import argparse

from streamplan.app.analysis import run_policy
from streamplan.app.context import make_context
from streamplan.fusion.branches import merged_branches
from streamplan.fusion.transform import kernel_count
from streamplan.memory.worst_case import worst_case_peak
from streamplan.models import load_model
from streamplan.schedule.context import FUSION_MODES

MODELS = ["seed-example2", "seed-concat", "inception_v3", "randwire", "nasnet_a"]
POLICIES = ["sequential", "asap", "ios"]
MiB = 1 << 20


def _peak(graph, schedule) -> str:
    wc = worst_case_peak(graph, schedule, time_limit_s=20.0)
    if wc.exact:
        return f"{wc.upper_bytes / MiB:.2f}"
    return f"[{wc.lower_bytes / MiB:.2f}, {wc.upper_bytes / MiB:.2f}]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--devices", nargs="*", default=["v100", "h100"])
    ap.add_argument("--policies", nargs="*", default=POLICIES)
    ap.add_argument("--cuda-graphs", action="store_true", help="simulate each schedule as one CUDA graph")
    args = ap.parse_args(argv)
    label = " graphs" if args.cuda_graphs else ""
    print(
        "| model | device | policy | fusion | kernels | streams | makespan ms | speedup | worst-case MiB | merged |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.models:
        graph = load_model(name, batch=1)
        for device in args.devices:
            for mode in FUSION_MODES:
                ctx = make_context(device=device, fusion=mode, cuda_graphs=args.cuda_graphs)
                base_ms = None
                for policy in args.policies:
                    run = run_policy(graph, policy, ctx)
                    g = run.scheduled_graph(graph)
                    if policy == "sequential":
                        base_ms = run.makespan_ms
                    speedup = f"{base_ms / run.makespan_ms:.2f}" if base_ms else "-"
                    merged = len(merged_branches(run.fusion)) if run.fusion else "-"
                    repeats = len(run.fusion.duplicates) if run.fusion else "-"
                    print(
                        f"| {name} | {device}{label} | {policy} | {mode} | {kernel_count(g)} | "
                        f"{run.schedule.num_streams} | {run.makespan_ms:.4f} | {speedup} | "
                        f"{_peak(g, run.schedule)} | {merged} | {repeats} |",
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
