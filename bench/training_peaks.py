"""Training-step memory on the zoo: every policy's peaks and what each peak is made of.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/python bench/training_peaks.py [--batch 8] \
        [--models ...] [--policies sequential,wavefront,asap] [--optimizer none] [--check]

For each model: the training step is captured, each policy scheduled, and every memory
figure computed (activations: host-order, worst case over all timings, arena bound); then
the composition of the worst-case instant (parameters, gradients, optimizer state, saved
activations, temporaries; inputs and buffers in "rest"), resident storages included, and
the phase it falls in. ``--check`` also runs each step once for real on the CPU (one
stream) and compares it with eager PyTorch and the measured peak with the prediction.
"""

from __future__ import annotations

import argparse
import time

import torch

from streamplan.app import compare_policies, make_context
from streamplan.app.training import training_answer
from streamplan.models import load_model

MODELS = ["resnet50", "inception_v3", "randwire", "nasnet_a", "bert_base", "gpt2"]
MIB = 2**20


def _interval(wc) -> str:
    return (
        f"{wc.upper_bytes / MIB:.1f}"
        if wc.exact
        else f"[{wc.lower_bytes / MIB:.1f}, {wc.upper_bytes / MIB:.1f}]"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--policies", default="sequential,wavefront,asap")
    ap.add_argument("--optimizer", default="none")
    ap.add_argument("--check", action="store_true", help="run each step on the CPU against eager")
    args = ap.parse_args()
    torch.set_num_threads(1)
    ctx = make_context(device="v100")
    for name in args.models:
        t0 = time.perf_counter()
        g = load_model(name, batch=args.batch, train=True, optimizer=args.optimizer)
        capture_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        rows = compare_policies(g, args.policies.split(","), ctx)
        print(
            f"\n{name} batch {args.batch} ({len(g)} ops; capture {capture_s:.1f} s, "
            f"{len(rows)} policies analysed in {time.perf_counter() - t0:.1f} s)"
        )
        print(
            f"  {'policy':10} {'host':>9} {'worst case':>16} {'arena LB':>9}  worst-case instant (MiB, residents included)"
        )
        for r in rows:
            m, b = r.memory, r.breakdown
            wc = b.peak("worst-case")
            c = wc.composition
            print(
                f"  {r.policy:10} {m.host_order_peak_bytes / MIB:>9.1f} {_interval(m.worst_case):>16} "
                f"{m.arena.lower_bound_bytes / MIB:>9.1f}  {'/'.join(wc.phases):9} total {wc.total_bytes / MIB:.1f} = "
                f"params {c['parameters'] / MIB:.1f}, grads {c['gradients'] / MIB:.1f}, "
                f"opt {c['optimizer_state'] / MIB:.1f}, saved {c['saved_activations'] / MIB:.1f} "
                f"({100 * c['saved_activations'] / wc.total_bytes:.0f}%), rest {c.rest_bytes / MIB:.1f}",
                flush=True,
            )
        answer = training_answer(rows)
        for line in answer.lines if answer else ():
            print(f"  > {line}")
        if args.check:
            from streamplan.app.run import run_model

            t0 = time.perf_counter()
            rep = run_model(
                name,
                "sequential",
                make_context(device="cpu"),
                graph=g,
                batch=args.batch,
                repeat=1,
                train=True,
                optimizer=args.optimizer,
            )
            d = rep.to_dict()
            print(
                f"  check on cpu (one stream, {time.perf_counter() - t0:.0f} s): matches eager {d['matches_eager']} "
                f"(max abs error {d['max_abs_error']:.2g}); peak live activations measured "
                f"{d['measured_peak_bytes'] / MIB:.1f} MiB, predicted {d['predicted_peak_bytes'] / MIB:.1f}; kernel "
                f"allocations measured {d['tracked_peak_bytes'] / MIB:.1f}, predicted "
                f"{d['predicted_tracked_peak_bytes'] / MIB:.1f}",
                flush=True,
            )
        del g, rows


if __name__ == "__main__":
    main()
