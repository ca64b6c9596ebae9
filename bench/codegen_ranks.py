"""Generated rank programs (``streamplan codegen --train --parallel``) run on gloo processes that
import torch only, against one eager step of the whole batch and against the runtime's ranks.

For each case: the plan, the optimizer, the fusion mode; the largest error of an updated
parameter against eager PyTorch for the generated module and for ``run_ranks`` (the runtime),
and the wall time of the generated ranks (two processes, from start to the last exit).

    PYTHONPATH=src:tests HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 python bench/codegen_ranks.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

CASES = (
    ("fsdp=2", "adam", "none", True),
    ("fsdp=2,record_stream=false,in_flight=none", "momentum", "none", True),
    ("fsdp=2", "momentum", "first", True),
    ("ddp=2", "momentum", "none", False),
    ("ddp=2,bucket=4KiB", "adam", "none", False),
)


def main() -> None:
    import torch

    from helpers.codegen_ranks import RANKS, Case, eager_step, run_generated_ranks
    from streamplan.ir.training import training_step
    from streamplan.runtime.distributed import _assemble, run_ranks

    print(
        "| plan | optimizer | fusion | generated max abs error | runtime max abs error | equal | generated wall |"
    )
    print("|---|---|---|---|---|---|---|")
    for plan, optimizer, fusion, whole in CASES:
        case = Case(plan, optimizer, fusion=fusion)
        start = time.perf_counter()
        outputs = run_generated_ranks(case, Path(tempfile.mkdtemp(prefix="codegen-ranks-")), whole)
        wall = time.perf_counter() - start
        step = training_step(case.step_graph)
        by_fqn = {case.step_graph.param_names[p]: p for p in step.gradients}
        updated = _assemble(case.graph, outputs, by_fqn, RANKS)
        reference, _ = eager_step(case)
        error = max((updated[k] - reference[k]).abs().max().item() for k in reference)
        equal = all(torch.allclose(updated[k], reference[k], rtol=1e-4, atol=1e-6) for k in reference)
        runtime = run_ranks(case.problem, plan, optimizer=optimizer, policy="overlap")
        print(
            f"| {plan} | {optimizer} | {fusion} | {error:.3g} | {runtime.max_abs_error:.3g} | "
            f"{equal and runtime.matches} | {wall:.1f} s |"
        )


if __name__ == "__main__":
    main()
