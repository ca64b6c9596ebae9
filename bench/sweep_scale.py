"""Sweep throughput (rows per minute): local pool vs Ray, with and without shared captures.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/python bench/sweep_scale.py [--workers 2] [--quick]

The default sweep is 120 rows: squeezenet and inception_v3 (torch captures) and three
random:100 graphs, at batch 1 and 8, under six policies on v100 and h100. Each
configuration runs in a fresh process, so its figure includes what a user pays:
starting the workers (and Ray), importing torch where a worker captures, the captures
and the jobs. ``--quick`` is a 36-row sweep for a smoke test. Last, what starting a
pool costs with forkserver and with spawned workers (medians of 3, fresh processes).

``--training`` sweeps training steps instead: squeezenet and random:60:1 at batch 8,
optimizers sgd and adam, with and without CUDA graphs, under sequential, wavefront, asap
and nimble (32 rows, 4 training captures), to show what sharing a training capture
saves. (IOS and the budget search take tens of seconds each on a SqueezeNet training
step, which would only measure them.)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

MODELS = "squeezenet,inception_v3,random:100:0,random:100:1,random:100:2"
QUICK_MODELS = "seed-example1,random:40:1,squeezenet"
POLICIES = "sequential,memory,wavefront,asap,nimble,ios"
CONFIGS = [  # (label, engine, workers, share captures)
    ("local, 1 worker, shared captures", "local", 1, True),
    ("local, shared captures", "local", None, True),
    ("local, shared captures, spawned workers", "spawn", None, True),
    ("local, a capture per job", "local", None, False),
    ("ray, shared captures", "ray", None, True),
    ("ray, a capture per job", "ray", None, False),
]


def one(engine: str, workers: int | None, share: bool, quick: bool, training: bool = False) -> dict:
    """Run one configuration here (the child process) and return its figures."""
    from streamplan.sweep import LocalEngine, RayEngine, SweepSettings, SweepSpec, run_sweep

    settings = SweepSettings()
    if training:
        spec = SweepSpec.of(
            models="squeezenet,random:60:1",
            batches=[8],
            train=True,
            optimizers="sgd,adam",
            cuda_graphs="false,true",
            policies="sequential,wavefront,asap,nimble",
        )
    else:
        spec = SweepSpec.of(
            models=QUICK_MODELS if quick else MODELS,
            batches=[1, 8],
            policies="sequential,asap,ios" if quick else POLICIES,
            devices="v100,h100",
        )
    t0 = time.perf_counter()
    init_s = 0.0
    if engine == "ray":
        import ray

        ray.init(num_cpus=workers or os.cpu_count(), include_dashboard=False, log_to_driver=False)
        init_s = time.perf_counter() - t0
        eng = RayEngine()
    else:  # "spawn": workers that import streamplan each, instead of forking from a preloaded server
        eng = LocalEngine(workers, start_method="spawn" if engine == "spawn" else None)
    result = run_sweep(spec, settings=settings, engine=eng, share_captures=share)
    wall_s = time.perf_counter() - t0
    return {
        "rows": len(result.rows),
        "failed": result.failed,
        "wall_s": wall_s,
        "init_s": init_s,
        "job_s": sum(r.elapsed_s for r in result.rows),  # time inside jobs, summed over workers
    }


def startup(method: str) -> tuple[float, float]:
    """Seconds to finish a one-row sweep in a fresh process, then a second one in the same
    process (a new pool, as after a worker died or in a Python session's next sweep)."""
    from streamplan.sweep import LocalEngine, SweepSpec, run_sweep

    spec = SweepSpec.of(models="random:40:1", policies="ios")
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        run_sweep(spec, engine=LocalEngine(1, start_method=method))
        times.append(time.perf_counter() - t0)
    return times[0], times[1]


def startup_table(repeats: int = 3) -> None:
    """Pool starts: forkserver (preloaded) vs spawn, alternated in fresh processes."""
    times: dict[str, list[tuple[float, float]]] = {"forkserver": [], "spawn": []}
    for _ in range(repeats):
        for method in times:
            cmd = [sys.executable, __file__, "--startup-child", method]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            times[method].append(tuple(json.loads(out)))
    print("\n| start method | first one-row sweep s | second one-row sweep s (new pool) |\n|---|---|---|")
    for method, ts in times.items():
        first = sorted(t[0] for t in ts)[len(ts) // 2]
        second = sorted(t[1] for t in ts)[len(ts) // 2]
        print(f"| {method} | {first:.2f} | {second:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=None, help="workers (default: one per core)")
    ap.add_argument("--quick", action="store_true", help="a 36-row sweep")
    ap.add_argument("--training", action="store_true", help="a 32-row sweep of training steps")
    ap.add_argument(
        "--only", help="run only the configurations whose label contains this text (or one of A|B)"
    )
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--startup-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.startup_child:
        print(json.dumps(startup(args.startup_child)))
        return
    if args.child:
        engine, workers, share = args.child
        figures = one(engine, int(workers) or None, share == "1", args.quick, args.training)
        print(json.dumps(figures))
        return
    cores = os.cpu_count()
    size = "32 rows of training steps" if args.training else f"{'36' if args.quick else '120'} rows"
    print(f"{cores} cores; sweep of {size}\n")
    print("| configuration | workers | rows | failed | wall s | of which Ray start s | rows/min | job s |")
    print("|---|---|---|---|---|---|---|---|")
    for label, engine, workers, share in CONFIGS:
        if args.only and not any(part in label for part in args.only.split("|")):
            continue
        w = workers or args.workers or cores
        cmd = [sys.executable, __file__, "--child", engine, str(w), "1" if share else "0"]
        if args.quick:
            cmd.append("--quick")
        if args.training:
            cmd.append("--training")
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        f = json.loads(out.strip().splitlines()[-1])
        rpm = 60 * f["rows"] / f["wall_s"]
        print(
            f"| {label} | {w} | {f['rows']} | {f['failed']} | {f['wall_s']:.1f} | {f['init_s']:.1f} | "
            f"{rpm:.0f} | {f['job_s']:.1f} |",
            flush=True,
        )
    if not args.only and not args.training:
        startup_table()


if __name__ == "__main__":
    main()
