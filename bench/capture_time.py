"""Capture time and graph size per zoo model (torch.export under FakeTensor: no real compute).

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/python bench/capture_time.py [--batch 32] [--models ...]

Builds each model (random weights, not timed), then times ``streamplan.capture`` alone. The
first export in a process pays a one-off warm-up, so a tiny module is captured first.
"""

from __future__ import annotations

import argparse
import time

import torch

from streamplan.frontends.torch_capture import capture
from streamplan.zoo.registry import ZOO

MODELS = [
    "squeezenet",
    "resnet50",
    "inception_v3",
    "randwire",
    "nasnet_a",
    "nasnet_a_large",
    "bert_base",
    "gpt2",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--models", nargs="*", default=MODELS)
    args = ap.parse_args()
    torch.set_num_threads(1)
    capture(torch.nn.ReLU(), torch.randn(2))  # one-off export warm-up
    print(f"{'model':15} {'batch':>5} {'capture s':>10} {'ops':>6} {'storages':>9} {'GFLOP':>9}")
    for name in args.models:
        module, inputs = ZOO[name].load_factory()(args.batch)
        t0 = time.perf_counter()
        g = capture(module, inputs, name=name)
        secs = time.perf_counter() - t0
        print(
            f"{name:15} {args.batch:>5} {secs:>10.2f} {len(g):>6} {len(g.storages()):>9} "
            f"{g.total_flops() / 1e9:>9.1f}",
            flush=True,
        )
        del module, g


if __name__ == "__main__":
    main()
