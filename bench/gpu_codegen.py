"""GPU check of generated modules: `streamplan codegen` output run on CUDA, against eager and the header.

For each model, batch and policy: capture, schedule and simulate on the profile of the GPU
found, write the torch-only module (``streamplan.app.codegen_policy``), import it, copy the
model's weights in, and on CUDA: compare its outputs with eager PyTorch's, time it (CUDA
events, median), and measure ``max_memory_allocated`` after ``reset_peak_memory_stats`` with
only the generated module's weights and the inputs resident — the state the header's
prediction (the ``torch-cuda`` replay, inputs and weights resident) describes. The prediction
leaves out op workspaces (cuDNN, cuBLAS), so the measurement may exceed it by those.

    python bench/gpu_codegen.py --out gpu_codegen.json
    python bench/gpu_codegen.py --dry-run          # squeezenet on the CPU: outputs only

Every row prints as it finishes; the table prints last.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MODELS = ("inception_v3", "nasnet_a", "squeezenet")
POLICIES = ("sequential", "asap", "ios")
MIB = 2**20


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--batches", nargs="*", type=int, default=[1, 32])
    ap.add_argument("--policies", nargs="*", default=list(POLICIES))
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--budget-s", type=float, default=100.0, help="stop starting new rows after this")
    ap.add_argument("--out", default=None, help="JSON file for the rows")
    ap.add_argument("--dry-run", action="store_true", help="squeezenet, batch 1, on the CPU (outputs only)")
    return ap.parse_args(argv)


def _import(source: str, folder: Path, name: str) -> Any:
    path = folder / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _generate(graph: Any, policy: str, ctx: Any, model: str) -> Any:
    """The generated module (with its predictions); without ortools the worst case is left as bounds."""
    from streamplan.app.codegen import codegen_policy

    try:
        return codegen_policy(graph, policy, ctx, model=model)
    except ImportError:
        import streamplan.app.codegen as cg
        from streamplan.memory import worst_case

        original = worst_case.worst_case_peak
        cg.worst_case_peak = lambda g, s, **kw: original(g, s, **{**kw, "max_exact_ops": 0})
        try:
            return codegen_policy(graph, policy, ctx, model=model)
        finally:
            cg.worst_case_peak = original


def load(name: str, batch: int, device: str) -> tuple[Any, tuple, Any]:
    """(module in eval mode, inputs, captured graph) of a zoo model."""
    import torch

    from streamplan.frontends.torch_capture import capture
    from streamplan.zoo.registry import ZOO

    module, inputs = ZOO[name].load_factory()(batch)
    module = module.eval()
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    if device == "cpu":  # the dry run: small images
        inputs = tuple(torch.randn(x.shape[0], x.shape[1], 64, 64) if x.dim() == 4 else x for x in inputs)
    return module, inputs, capture(module, inputs, name=name)


def run_row(loaded: tuple, policy: str, device: str, repeat: int, folder: Path) -> dict[str, Any]:
    import torch

    from streamplan.app.context import make_context
    from streamplan.app.run import profile_for
    from streamplan.runtime import compare_outputs
    from streamplan.runtime.compare import _flat_tensors

    module, inputs, graph = loaded
    name, batch = graph.name, int(inputs[0].shape[0])
    ctx = make_context(device=profile_for(device), max_streams=8, time_limit_s=2.0)
    generated = _generate(graph, policy, ctx, name)
    code = _import(generated.source, folder, f"{name}_{batch}_{policy}")
    scheduled = getattr(code, generated.class_name)()
    scheduled.load_weights(module)
    with torch.no_grad():
        module.to(device)
        xs = tuple(x.to(device) for x in inputs)
        reference = tuple(t.cpu() for t in _flat_tensors(module(*xs)))
        module.to("cpu")  # only the generated module's weights stay resident
        scheduled.to(device)
        outputs = tuple(t.cpu() for t in _flat_tensors(scheduled(*xs)))  # also the warm-up
        ok, max_abs, _ = compare_outputs(outputs, reference)
        row: dict[str, Any] = {
            "model": name,
            "batch": batch,
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
            row["resident_bytes"] = int(torch.cuda.memory_allocated())
            times = []
            for _ in range(max(1, repeat)):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                result = scheduled(*xs)
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end))
                del result
            row["measured_ms"] = statistics.median(times)
            row["max_memory_allocated_bytes"] = int(torch.cuda.max_memory_allocated())
            row["allocated_relative_error"] = (
                row["predicted_allocated_bytes"] - row["max_memory_allocated_bytes"]
            ) / row["max_memory_allocated_bytes"]
        scheduled.to("cpu")
    return row


def _line(r: dict[str, Any]) -> str:
    if "error" in r:
        return f"{r['model']:13} {r['batch']:3} {r['policy']:10} FAILED: {r['error']}"
    text = (
        f"{r['model']:13} {r['batch']:3} {r['policy']:10} {r['streams']:2} streams  "
        f"match={'yes' if r['matches_eager'] else 'NO '} (max abs {r['max_abs_error']:.2g})  "
        f"predicted {r['predicted_ms']:.3f} ms, {r['predicted_allocated_bytes'] / MIB:.1f} MiB"
    )
    if "measured_ms" in r:
        text += (
            f"  measured {r['measured_ms']:.3f} ms, max_memory_allocated "
            f"{r['max_memory_allocated_bytes'] / MIB:.1f} MiB ({r['allocated_relative_error']:+.1%})"
        )
    return text


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    import torch

    torch.set_num_threads(1)
    if args.dry_run:
        device, models, batches, policies = "cpu", ["squeezenet"], [1], ["sequential", "nimble"]
    elif not torch.cuda.is_available():
        print("no CUDA device: use --dry-run on the CPU", file=sys.stderr)
        return 2
    else:
        device, models, batches, policies = "cuda", args.models, args.batches, args.policies
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name in models:
            for batch in batches:
                loaded = None
                for policy in policies:
                    if time.perf_counter() - t0 > args.budget_s:
                        rows.append(
                            {"model": name, "batch": batch, "policy": policy, "error": "skipped: budget"}
                        )
                        continue
                    try:
                        loaded = loaded or load(name, batch, device)
                        row = run_row(loaded, policy, device, args.repeat, Path(tmp))
                    except Exception as e:  # a row that fails is reported, the others still run
                        row = {
                            "model": name,
                            "batch": batch,
                            "policy": policy,
                            "error": f"{type(e).__name__}: {e}",
                        }
                    rows.append(row)
                    print(_line(row), flush=True)
    return finish(rows, args.out, device, "generated modules (codegen)", _line)


def finish(rows: list[dict[str, Any]], out: str | None, device: str, title: str, line) -> int:
    """Write the rows (and their summary) to ``out``, print them; 1 if a row failed or differed."""
    failed = [r for r in rows if "error" in r and not r["error"].startswith("skipped")]
    mismatched = [r for r in rows if r.get("matches_eager") is False]
    summary = {"rows": len(rows), "failed": len(failed), "outputs_differ": len(mismatched), "device": device}
    if out:
        Path(out).write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
    print(f"\n{title} on", device)
    for r in rows:
        print(line(r))
    print(json.dumps(summary))
    return 1 if failed or mismatched else 0


if __name__ == "__main__":
    raise SystemExit(main())
