"""``fit`` for every curated Hugging Face config on three devices, as one table.

Each model's training step (mixed-precision AdamW: bf16 parameters, activations and
gradients, fp32 master weights and state; its default attention; its kind's loss; batch 1
at its default sequence) is captured once at full size on the meta device, in a fresh
process (through the capture cache unless ``--no-cache``), then ``fit`` answers on each
device with each change's search limited to ``--time-limit`` seconds. A model whose capture
fails is a row saying why.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python bench/fit_table.py --devices h100 h200 l4
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


def _one(name: str, devices: list[str], time_limit: float, cache: bool) -> dict:
    from streamplan.app.model_session import analyze
    from streamplan.errors import StreamplanError

    start = time.perf_counter()
    try:
        session = analyze(
            f"hf:{name}", train=True, optimizer="adamw", precision="mixed-bf16", batch=1, cache=cache,
            time_limit_s=time_limit,
        )  # fmt: skip
    except StreamplanError as e:
        return {"model": name, "error": e.short().splitlines()[0]}
    capture_s = time.perf_counter() - start
    rows = []
    for device in devices:
        start = time.perf_counter()
        answer = session.with_settings(device=device).fit()
        rows.append({"fit_s": time.perf_counter() - start, "answer": answer.to_dict()})
    params = sum(
        st.nbytes
        for sid, st in session.graph.storages().items()
        if session.graph.roles.get(sid) == "parameter"
    )
    return {
        "model": name,
        "ops": len(session.graph.nodes),
        "param_bytes": params,
        "capture_s": capture_s,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "rows": rows,
    }


def _cheapest(answer: dict) -> str:
    if answer["fits"]:
        return "—"
    fitting = [c for c in answer["changes"] if c["fits"]]
    if fitting:
        c = fitting[0]
        return f"{c['kind']}: {c['summary']} ({c['batch_ms']:.0f} ms)"
    cut = [c["kind"] for c in answer["changes"] if c["cut_short"]]
    none = "none fits on one device"
    return none + (f" ({', '.join(cut)} cut short)" if cut else "")


def _table(results: list[dict]) -> str:
    lines = [
        "| model | ops | attention | device | verdict | reserved peak (GiB) | usable (GiB) | step (ms) | "
        "cheapest change that fits | capture (s) | fit (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['model']} | | | | capture failed: {r['error']} | | | | | | |")
            continue
        for row in r["rows"]:
            a = row["answer"]
            lines.append(
                f"| {r['model']} | {r['ops']:,} | {a['attention']['kernel']} | {a['device']} | "
                f"{'fits' if a['fits'] else 'does not fit'} | {a['peak']['reserved_peak_bytes'] / GIB:.1f} | "
                f"{a['usable_bytes'] / GIB:.1f} | {a['step_ms']:.0f} | {_cheapest(a)} | {r['capture_s']:.0f} | "
                f"{row['fit_s']:.1f} |"
            )
    return "\n".join(lines)


def main() -> None:
    from streamplan.zoo.hub import HF_MODELS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", default=list(HF_MODELS))
    ap.add_argument("--devices", nargs="*", default=["h100", "h200", "l4"])
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--no-cache", action="store_true")
    ap.add_argument("-o", "--output", help="write every answer as JSON")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_one(args.child, args.devices, args.time_limit, not args.no_cache)))
        return
    results = []
    for name in args.models:
        cmd = [
            sys.executable,
            __file__,
            "--child",
            name,
            "--devices",
            *args.devices,
            "--time-limit",
            str(args.time_limit),
        ]
        if args.no_cache:
            cmd.append("--no-cache")
        r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        if r.returncode != 0:
            results.append({"model": name, "error": (r.stderr.strip().splitlines() or ["crashed"])[-1][:200]})
        else:
            results.append(json.loads(r.stdout.strip().splitlines()[-1]))
        print(f"{name}: done", file=sys.stderr, flush=True)
    print(_table(results))
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
