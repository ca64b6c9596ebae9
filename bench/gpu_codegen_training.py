"""GPU check of generated training steps: `streamplan codegen --train` output run on CUDA streams.

For each model, optimizer and policy: capture the training step, schedule and simulate it on
the profile of the GPU found, write the torch-only module, copy the weights and the starting
optimizer state in, and on CUDA: compare what one step returns (the loss and the updated
parameters, or the gradients) with eager PyTorch's step on the same device
(``loss.backward()`` + ``torch.optim``, random ops seeded alike), time the step (CUDA events,
median; each call is the next step) and measure ``max_memory_allocated`` with only the
module's tensors and the batch resident, beside the header's prediction (op workspaces are
not predicted).

    python bench/gpu_codegen_training.py --out gpu_codegen_training.json
    python bench/gpu_codegen_training.py --dry-run     # squeezenet at 64x64 on the CPU: outputs only
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_codegen import _generate, _import, finish  # noqa: E402

MODELS = ("squeezenet", "inception_v3")
OPTIMIZERS = ("sgd", "adam")
POLICIES = ("sequential", "nimble")
MIB = 2**20


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--optimizers", nargs="*", default=list(OPTIMIZERS))
    ap.add_argument("--policies", nargs="*", default=list(POLICIES))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--budget-s", type=float, default=100.0, help="stop starting new rows after this")
    ap.add_argument("--out", default=None, help="JSON file for the rows")
    ap.add_argument("--dry-run", action="store_true", help="squeezenet, batch 2 at 64x64, on the CPU")
    return ap.parse_args(argv)


def _problem(name: str, batch: int, device: str) -> Any:
    import torch

    from streamplan.zoo.training import training_problem

    problem = training_problem(name, batch)
    if device == "cpu":  # the dry run: small images
        inputs = tuple(
            torch.randn(x.shape[0], x.shape[1], 64, 64) if x.dim() == 4 else x for x in problem.inputs
        )
        problem = dataclasses.replace(problem, inputs=inputs)
    return problem


def _state_dict(graph: Any, tensors: dict[str, Any]) -> dict[str, Any]:
    from streamplan.ir.training import training_step

    step = training_step(graph)
    out = {}
    for v, t in tensors.items():
        if v in step.optimizer_state:
            param, slot = step.optimizer_state[v]
            out[f"optimizer_state.{graph.param_names[param]}.{slot}"] = t
        else:
            out[graph.param_names.get(v, v)] = t
    return out


def run_row(
    name: str, optimizer: str, policy: str, args: argparse.Namespace, device: str, folder: Path
) -> dict:
    import torch

    from streamplan.app.context import make_context
    from streamplan.app.run import profile_for
    from streamplan.frontends.training import capture_training
    from streamplan.runtime import compare_outputs
    from streamplan.runtime.interpret import seeded_random_ops
    from streamplan.runtime.training import prepare_training

    batch = 2 if device == "cpu" else args.batch
    problem = _problem(name, batch, device)
    graph = capture_training(problem, optimizer=optimizer, name=name)
    ctx = make_context(device=profile_for(device), max_streams=8, time_limit_s=2.0)
    generated = _generate(graph, policy, ctx, name)
    step = getattr(_import(generated.source, folder, f"{name}_{optimizer}_{policy}"), generated.class_name)()
    prepared = prepare_training(problem, optimizer=optimizer, graph=graph, device=device)
    step.load_weights(_state_dict(graph, prepared.params))
    step.to(device)
    xs = tuple(x.to(device) for x in prepared.inputs)
    with seeded_random_ops():
        outputs = tuple(t.cpu() for t in step(*xs))  # also the warm-up
    ok, max_abs, _ = compare_outputs(outputs, tuple(t.cpu() for t in prepared.reference))
    row: dict[str, Any] = {
        "model": name,
        "batch": batch,
        "optimizer": optimizer,
        "policy": policy,
        "streams": generated.num_streams,
        "matches_eager": ok,
        "max_abs_error": max_abs,
        "predicted_ms": generated.predictions.makespan_ms,
        "predicted_allocated_bytes": generated.predictions.max_memory_allocated_bytes,
        "profile": generated.predictions.device,
    }
    if device != "cpu":
        del outputs
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        times = []
        for _ in range(max(1, args.repeat)):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            result = step(*xs)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
            del result
        row["measured_ms"] = statistics.median(times)
        row["max_memory_allocated_bytes"] = int(torch.cuda.max_memory_allocated())
    step.to("cpu")
    return row


def _line(r: dict[str, Any]) -> str:
    head = f"{r['model']:13} {r['optimizer']:5} {r['policy']:10}"
    if "error" in r:
        return f"{head} FAILED: {r['error']}"
    text = (
        f"{head} {r['streams']:2} streams  match={'yes' if r['matches_eager'] else 'NO '} "
        f"(max abs {r['max_abs_error']:.2g})  predicted {r['predicted_ms']:.3f} ms, "
        f"{r['predicted_allocated_bytes'] / MIB:.1f} MiB"
    )
    if "measured_ms" in r:
        text += f"  measured {r['measured_ms']:.3f} ms, max_memory_allocated {r['max_memory_allocated_bytes'] / MIB:.1f} MiB"
    return text


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    import torch

    torch.set_num_threads(1)
    if args.dry_run:
        device, models, optimizers, policies = "cpu", ["squeezenet"], ["adam"], ["sequential", "nimble"]
    elif not torch.cuda.is_available():
        print("no CUDA device: use --dry-run on the CPU", file=sys.stderr)
        return 2
    else:
        device, models, optimizers, policies = "cuda", args.models, args.optimizers, args.policies
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name in models:
            for optimizer in optimizers:
                for policy in policies:
                    key = {"model": name, "optimizer": optimizer, "policy": policy}
                    if time.perf_counter() - t0 > args.budget_s:
                        rows.append({**key, "error": "skipped: budget"})
                        continue
                    try:
                        row = run_row(name, optimizer, policy, args, device, Path(tmp))
                    except Exception as e:  # a row that fails is reported, the others still run
                        row = {**key, "error": f"{type(e).__name__}: {e}"}
                    rows.append(row)
                    print(_line(row), flush=True)
    return finish(rows, args.out, device, "generated training steps (codegen --train)", _line)


if __name__ == "__main__":
    raise SystemExit(main())
