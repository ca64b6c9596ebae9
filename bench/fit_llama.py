"""Llama-3-8B at full size on this machine: capture its training step, fit it on a GPU, and set its
peak by role beside the published arithmetic and beside PyTorch's MemTracker.

The step is the one people train: mixed precision (bf16 parameters, activations and gradients;
fp32 master weights and AdamW state), SDPA attention (the flash kernel), sequence 4096,
transformers' causal-LM loss. For each micro-batch, one fresh process captures it from
``hf:llama-3-8b`` (no capture cache) and reports the seconds and the peak RSS of the capture,
then the seconds ``fit`` takes on the device (H100 80GB by default) and its answer.
``--memtracker`` runs ``torch.distributed._tools.mem_tracker.MemTracker`` under
``FakeTensorMode`` on the same model (same config, same dtype, the same loss, backward,
fp32-master AdamW step and copy back, the AdamW moments present before the step as in steady
state) and reports its peak by category.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python bench/fit_llama.py --batches 1 4 --memtracker

Prints a Markdown report (``-o FILE`` also writes the JSON of every measurement).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

GIB = 1 << 30
SPEC = "hf:llama-3-8b"
PARAMS = 8_030_261_248  # published (model card); the test suite checks the built model against it


def _capture_and_fit(batch: int, seq: int, devices: list[str]) -> dict:
    """In this (fresh) process: capture, then fit on each device."""
    from streamplan.app.session import Session
    from streamplan.models import ModelRequest
    from streamplan.schedule.settings import Settings

    start = time.perf_counter()
    spec = SPEC if seq == 4096 else f"{SPEC}@{seq}"
    request = ModelRequest(spec, batch=batch, train=True, optimizer="adamw", precision="mixed-bf16")
    graph = request.load(cache=None)
    capture_s = time.perf_counter() - start
    capture_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out = {
        "batch": batch,
        "ops": len(graph.nodes),
        "capture_s": capture_s,
        "capture_peak_rss_bytes": capture_rss,
    }
    fits = []
    for device in devices:
        start = time.perf_counter()
        answer = Session(graph, Settings(device=device), source=request).fit(search_batch=False)
        fits.append({"fit_s": time.perf_counter() - start, "answer": answer.to_dict(), "text": str(answer)})
    out["fits"] = fits
    out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return out


def _memtracker(batch: int, seq: int) -> dict:
    """PyTorch's MemTracker on the same step under FakeTensorMode: peak bytes by its categories."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker

    from streamplan.zoo.hub import HF_MODELS

    entry = HF_MODELS["llama-3-8b"]
    config = transformers.LlamaConfig(**entry.config_kwargs)
    config._attn_implementation = "sdpa"
    config.use_cache = False
    start = time.perf_counter()
    with FakeTensorMode(allow_non_fake_inputs=True):
        torch.set_default_dtype(torch.bfloat16)  # built in bf16 (a fake module cannot be cast after)
        model = transformers.LlamaForCausalLM(config)
        torch.set_default_dtype(torch.float32)
        params = list(model.parameters())
        masters = [p.detach().float().requires_grad_() for p in params]
        # one AdamW per parameter, stepped as its gradient is cast up: each fp32 gradient lives
        # only for its own update, as in streamplan's step (casting them all first would hold
        # 4 more bytes per parameter)
        opts = [torch.optim.AdamW([m], lr=1e-3, weight_decay=0.01, foreach=False) for m in masters]
        for m, opt in zip(masters, opts, strict=True):  # steady state: the moments exist before the step
            opt.state[m] = {
                "step": torch.tensor(0.0),
                "exp_avg": torch.zeros_like(m),
                "exp_avg_sq": torch.zeros_like(m),
            }
        ids = torch.randint(0, config.vocab_size, (batch, seq))
        tracker = MemTracker()
        tracker.track_external(model, *opts, *masters)  # the masters exist before the step, as the state
        with tracker:
            out = model(input_ids=ids, attention_mask=torch.ones_like(ids))
            loss = model.loss_function(logits=out.logits, labels=ids, vocab_size=config.vocab_size)
            loss.backward()
            for m, p, opt in zip(masters, params, opts, strict=True):
                m.grad = p.grad.float()
                opt.step()
                m.grad = None
                with torch.no_grad():
                    p.copy_(m)
        snapshot = tracker.get_tracker_snapshot("peak")
    (device_stats,) = snapshot.values()
    return {
        "batch": batch,
        "seconds": time.perf_counter() - start,
        "peak_bytes": {str(getattr(k, "value", k)): int(v) for k, v in device_stats.items()},
    }


def _child(args: list[str]) -> dict:
    r = subprocess.run(
        [sys.executable, __file__, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _published() -> dict[str, float]:
    """Mixed-precision Adam's model states (Rajbhandari et al., ZeRO, 2020: 2 + 2 + 12 bytes per parameter)."""
    return {
        "parameters": 2 * PARAMS,
        "gradients": 2 * PARAMS,
        "master weights + optimizer state": 12 * PARAMS,
    }


def _report(results: list[dict], trackers: list[dict]) -> str:
    lines = [
        "| micro-batch | ops | capture (s) | capture peak RSS (GiB) | fit on | fit (s) | verdict | reserved peak (GiB) |"
    ]
    lines.append("|---|---|---|---|---|---|---|---|")
    for r in results:
        for f in r["fits"]:
            a = f["answer"]
            lines.append(
                f"| {r['batch']} | {r['ops']:,} | {r['capture_s']:.1f} | {r['capture_peak_rss_bytes'] / GIB:.2f} | "
                f"{a['device']} | {f['fit_s']:.1f} | {'fits' if a['fits'] else 'does not fit'} | "
                f"{a['peak']['reserved_peak_bytes'] / GIB:.2f} |"
            )
    lines.append("")
    for r in results:
        a = r["fits"][0]["answer"]
        roles = a["peak"]["by_role_bytes"]
        master = a["resident_bytes"]["master_weights"]
        tracker = next((t for t in trackers if t["batch"] == r["batch"]), None)
        mt = tracker["peak_bytes"] if tracker else {}
        pub = _published()

        def g(x):
            return "–" if x is None else f"{x / GIB:.2f}"

        lines += [
            f"Peak by role, micro-batch {r['batch']} (GiB; streamplan at the default execution's peak, "
            f"{a['peak']['peak_op']} in the {a['peak']['phase']}):",
            "",
            "| role | streamplan | published arithmetic (ZeRO, 16 B/param) | MemTracker (FakeTensor) |",
            "|---|---|---|---|",
            f"| parameters (bf16) | {g(roles['parameters'])} | {g(pub['parameters'])} | {g(mt.get('Parameter'))} |",
            f"| gradients (bf16) | {g(roles['gradients'])} | {g(pub['gradients'])} | {g(mt.get('Gradient'))} |",
            f"| fp32 master weights + AdamW state | {g(roles['optimizer_state'])} ({g(master)} + "
            f"{g(roles['optimizer_state'] - master)}) | {g(pub['master weights + optimizer state'])} | "
            # MemTracker files the masters, tensors it was handed, under Other
            f"{g(mt['Optstate'] + mt['Other']) if mt else '–'} ({g(mt.get('Other'))} + {g(mt.get('Optstate'))}) |",
            f"| saved activations | {g(roles['saved_activations'])} | – | {g(mt.get('Activation'))} |",
            f"| temporaries | {g(roles['temporaries'])} | – | {g(mt.get('Temp'))} |",
            f"| inputs and buffers | {g(roles['inputs'] + roles['buffers'])} | – | {g(mt.get('Buffer'))} |",
            f"| cuBLAS workspace | {g(roles['workspace'])} | – | – |",
            f"| allocator slack | {g(roles['allocator_slack'])} | – | – |",
            f"| **total** | **{g(a['peak']['reserved_peak_bytes'])}** (tensors {g(a['peak']['tensor_peak_bytes'])}) "
            f"| {g(sum(pub.values()))} (model states only) | {g(mt.get('Total'))} |",
            "",
        ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, nargs="*", default=[1, 4])
    ap.add_argument("--devices", nargs="*", default=["h100"])
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--memtracker", action="store_true")
    ap.add_argument("-o", "--output", help="write every measurement as JSON")
    ap.add_argument("--report-from", help="print the report of a JSON written by -o, measuring nothing")
    ap.add_argument("--child", choices=["capture", "memtracker"], help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child == "capture":
        print(json.dumps(_capture_and_fit(args.batch, args.seq, args.devices)))
        return
    if args.child == "memtracker":
        print(json.dumps(_memtracker(args.batch, args.seq)))
        return
    if args.report_from:
        data = json.loads(Path(args.report_from).read_text())
        print(_report(data["results"], data["memtracker"]))
        return
    results = [
        _child(["--child", "capture", "--batch", str(b), "--seq", str(args.seq), "--devices", *args.devices])
        for b in args.batches
    ]
    trackers = []
    if args.memtracker:
        trackers = [
            _child(["--child", "memtracker", "--batch", str(b), "--seq", str(args.seq)]) for b in args.batches
        ]
    print(_report(results, trackers))
    for r in results:
        for f in r["fits"]:
            print(f"\n```\n{f['text']}\n```")
    for t in trackers:
        print(f"MemTracker at micro-batch {t['batch']}: {t['seconds']:.1f} s")
    if args.output:
        Path(args.output).write_text(json.dumps({"results": results, "memtracker": trackers}, indent=1))


if __name__ == "__main__":
    main()
