"""Capture time and size of training-step graphs (AOTAutograd joint graph under FakeTensor).

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/python bench/training_capture.py [--batch 32] \
        [--models inception_v3 ...] [--random 1000 10000 100000]

Builds each model's training problem (weights, inputs, labels: not timed), then times
``capture_training`` alone (no optimizer; ``--optimizer`` adds one), and beside it the
inference capture (``torch.export``) of the same module and inputs: on a shared machine
the ratio of the two is steadier than either time. The first trace in a
process pays a one-off warm-up, so a tiny step is captured first. ``random:N`` steps are
built on the IR without torch; their time is the whole build, and for N up to
``--analyse-up-to`` the asap schedule and every memory figure are timed too.
"""

from __future__ import annotations

import argparse
import time

import torch

from streamplan.frontends.torch_capture import capture
from streamplan.frontends.training import TrainingProblem, capture_training
from streamplan.memory.report import analyze_memory
from streamplan.schedule import make_schedule
from streamplan.training_models import training_problem_of
from streamplan.zoo.random_train import random_training_dag

MODELS = ["inception_v3", "resnet50", "randwire", "nasnet_a", "bert_base", "gpt2"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--optimizer", default="none")
    ap.add_argument("--random", nargs="*", type=int, default=[1000, 10000, 100000])
    ap.add_argument("--analyse-up-to", type=int, default=10000)
    args = ap.parse_args()
    torch.set_num_threads(1)
    warm = torch.nn.Linear(2, 2)
    capture_training(TrainingProblem(warm, (torch.randn(1, 2),)))  # one-off tracer warm-ups
    capture(warm, torch.randn(1, 2))
    print(
        f"{'model':14} {'batch':>5} {'capture s':>10} {'ops':>6} {'storages':>9} {'saved MiB':>10} "
        f"{'GFLOP':>8} {'inference s':>12}"
    )
    for name in args.models:
        problem, _ = training_problem_of(name, batch=args.batch)
        t0 = time.perf_counter()
        capture(problem.module.eval(), problem.inputs, name=name)
        inference_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        g = capture_training(problem, optimizer=args.optimizer, name=name)
        secs = time.perf_counter() - t0
        saved = sum(g.storages()[s].nbytes for s, r in g.roles.items() if r == "saved_activation")
        print(
            f"{name:14} {args.batch:>5} {secs:>10.2f} {len(g):>6} {len(g.storages()):>9} "
            f"{saved / 2**20:>10.1f} {g.total_flops() / 1e9:>8.1f} {inference_s:>12.2f}",
            flush=True,
        )
        del problem, g
    for n in args.random:
        t0 = time.perf_counter()
        g = random_training_dag(n, 0, optimizer=args.optimizer)
        line = f"{'random:' + str(n):14} {1:>5} {time.perf_counter() - t0:>10.2f} {len(g):>6} {len(g.storages()):>9}"
        if n <= args.analyse_up_to:
            t0 = time.perf_counter()
            s = make_schedule(g, "asap")
            t1 = time.perf_counter()
            wc = analyze_memory(g, s).worst_case
            line += (
                f"   asap {t1 - t0:.2f} s, every memory figure {time.perf_counter() - t1:.2f} s (worst case "
                f"{'exact' if wc.exact else 'interval'} {wc.lower_bytes / 2**20:.1f}-{wc.upper_bytes / 2**20:.1f} MiB)"
            )
        print(line, flush=True)


if __name__ == "__main__":
    main()
