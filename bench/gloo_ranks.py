"""Rank programs run for real on gloo processes against one eager step of the whole batch.

For each case: the plan, the ranks, the optimizer and the policy; whether every updated
parameter equals eager PyTorch's (``torch.allclose``, rtol 1e-4, atol 1e-6) and the largest
error; on one stream (``sequential``) each rank's peak of kernel allocations against the
prediction (the exact replay plus its measured op scratch).

    PYTHONPATH=src:tests HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 python bench/gloo_ranks.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

CASES = (
    ("stack", "fsdp=2", "adam", "sequential"),
    ("stack", "fsdp=4", "adam", "overlap"),
    ("stack", "fsdp=4,reshard=false,record_stream=false,in_flight=none", "momentum", "overlap"),
    ("stack", "ddp=2", "sgd", "sequential"),
    ("stack", "ddp=4,bucket=4KiB", "adam", "overlap"),
    ("llama-tiny", "fsdp=2", "adam", "sequential"),
    ("llama-tiny", "fsdp=4", "adam", "overlap"),
    ("llama-tiny", "ddp=4", "sgd", "overlap"),
)


def problem(name: str, ranks: int):
    from streamplan.frontends.training import TrainingProblem

    if name == "stack":
        from helpers.parallel_models import stack_problem

        return stack_problem(8)
    from streamplan.model_files import load_user

    module, inputs, loss_fn, targets = load_user("bench/models/llama.py:tiny", batch=None, with_targets=True)
    import torch

    gen = torch.Generator().manual_seed(5)
    tokens = torch.randint(0, 256, (2 * ranks, inputs[0].shape[1]), generator=gen)
    labels = torch.randint(0, 256, (2 * ranks, inputs[0].shape[1]), generator=gen)
    return TrainingProblem(module, (tokens,), loss_fn, (labels,), "next-token cross entropy")


def main() -> None:
    from streamplan.parallel import ParallelPlan
    from streamplan.runtime.distributed import run_ranks

    print(
        "| model | plan | ranks | optimizer | policy | equal to eager | max rel. error | "
        "rank peaks: tracked / predicted (one stream) | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, plan, optimizer, policy in CASES:
        ranks = ParallelPlan.parse(plan).ranks
        t0 = time.perf_counter()
        r = run_ranks(
            problem(name, ranks), plan, optimizer=optimizer, policy=policy, chaos=policy == "overlap"
        )
        peaks = ", ".join(
            f"{x.tracked_peak_bytes}" + (f" / {x.predicted_peak_bytes}" if x.predicted_peak_bytes else "")
            for x in r.ranks
        )
        print(
            f"| {name} | `{plan}` | {ranks} | {optimizer} | {policy} | {'yes' if r.matches else 'NO'} | "
            f"{r.max_rel_error:.1e} | {peaks} | {time.perf_counter() - t0:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
