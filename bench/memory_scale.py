"""How the memory analysis scales, and a before/after check that every figure is unchanged.

    nice .venv/bin/python bench/memory_scale.py [--sizes 1000,10000,100000,200000]
                                                [--policies sequential,asap] [--time-limit 10]
    nice .venv/bin/python bench/memory_scale.py --check REV [--items random:2000@asap,...]

Scale mode: each (size, policy) runs in a fresh process (so its peak RSS is its own) and
prints the seconds of every step of ``analyze_memory`` (CPU seconds, which a busy
machine inflates less than wall seconds, and wall seconds), its total, the peak RSS of
the process, the worst-case figure and the width of its interval, then the growth per
10x ops of the total.

Check mode: the same figures (host-order trace, worst case and its witness, simulated
peak, torch-cuda, arena offsets and bound, every allocator replay) computed by the
source tree of git revision REV and by this one, side by side; exit 1 on any difference.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20
DEFAULT_ITEMS = (
    "seed-example2@asap,seed-concat@nimble,random:300@asap,random:300@wavefront,random:2000@asap,"
    "random:2000@nimble,random:2000@memory,random:8000:3@asap,random:20000@wavefront,"
    "random:100000@asap,random:100000@sequential"
)


def _digest(x) -> str:
    return hashlib.sha256(json.dumps(x, sort_keys=True, default=str).encode()).hexdigest()[:16]


def figures(items: list[str], time_limit_s: float) -> dict:
    """Every memory figure of each ``spec@policy``, digests for the long ones."""
    from streamplan.cost.simulate import simulate
    from streamplan.memory.allocators import MODELS, replay
    from streamplan.memory.report import analyze_memory
    from streamplan.models import load_model
    from streamplan.schedule.registry import make_schedule

    out = {}
    for item in items:
        spec, policy = item.rsplit("@", 1)
        g = load_model(spec)
        s = make_schedule(g, policy)
        tl = simulate(g, s, "v100")
        t0 = time.process_time()
        r = analyze_memory(g, s, timeline=tl, time_limit_s=time_limit_s)
        cpu_s = time.process_time() - t0
        wc = r.worst_case
        fig = {
            "host_order": [r.host_order.peak_bytes, _digest(r.host_order.to_dict())],
            "worst_case": [
                wc.lower_bytes,
                wc.upper_bytes,
                wc.exact,
                _digest([wc.finished, wc.running, wc.live]),
            ],
            "simulated": [
                r.simulated.peak_bytes,
                _digest(
                    [r.simulated.peak_ms, list(r.simulated.running_at_peak), list(r.simulated.live_at_peak)]
                ),
                _digest(r.simulated.samples),
            ],
            "torch_cuda": r.torch_cuda and r.torch_cuda.to_dict(),
            "arena": [r.arena.arena_bytes, r.arena.order, _digest(sorted(r.arena.offsets.items()))],
            "arena_bound": [
                r.arena.lower_bound_bytes,
                r.arena.lower_bound_exact,
                _digest(sorted(r.arena.bound_storages)),
            ],
        }
        for m in MODELS:
            a = replay(g, s, m, timeline=tl)
            steps = [(x.op, x.allocated_bytes, x.reserved_bytes) for x in a.trace]
            fig[f"replay {m}"] = [a.allocated_peak_bytes, a.reserved_peak_bytes, _digest(steps)]
        out[item] = {"figures": fig, "cpu_s": round(cpu_s, 2)}
        print(f"  {item}: {cpu_s:.2f} CPU s", file=sys.stderr, flush=True)
    return out


def check(rev: str, items: list[str], time_limit_s: float) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        results = {}
        for label, src in ((rev, Path(tmp) / "src"), ("this tree", ROOT / "src")):
            print(f"{label}:", file=sys.stderr)
            env = {**os.environ, "PYTHONPATH": str(src)}
            cmd = [sys.executable, __file__, "--figures", ",".join(items), "--time-limit", str(time_limit_s)]
            r = subprocess.run(cmd, env=env, capture_output=True, text=True)
            sys.stderr.write(r.stderr)
            if r.returncode:
                return r.returncode
            results[label] = json.loads(r.stdout)
    before, after = results[rev], results["this tree"]
    bad = 0
    print(f"{'item':28} {'figures':10} {rev + ' CPU s':>14} {'now CPU s':>10}")
    for item in items:
        fa, fb = before[item]["figures"], after[item]["figures"]
        diff = [k for k in fa if fa[k] != fb.get(k)]
        bad += bool(diff)
        verdict = "identical" if not diff else "DIFFER: " + ", ".join(diff)
        print(f"{item:28} {verdict:10} {before[item]['cpu_s']:14.2f} {after[item]['cpu_s']:10.2f}")
    return 1 if bad else 0


def one_size(n: int, policy: str, time_limit_s: float) -> dict:
    """Every step of ``analyze_memory`` on random:n under ``policy``, timed (run in a child)."""
    from streamplan.cost.simulate import simulate
    from streamplan.memory.report import analyze_memory
    from streamplan.models import load_model
    from streamplan.schedule.registry import make_schedule

    g = load_model(f"random:{n}")
    s = make_schedule(g, policy)
    tl = simulate(g, s, "v100")
    steps: list[tuple[str, float, float]] = []
    marks = [("start", time.process_time(), time.perf_counter())]

    def progress(step, done=None, total=None):
        if step != marks[-1][0] and not (done is not None and step.startswith("worst-case")):
            marks.append((step, time.process_time(), time.perf_counter()))

    rep = analyze_memory(g, s, timeline=tl, time_limit_s=time_limit_s, progress=progress)
    marks.append(("end", time.process_time(), time.perf_counter()))
    for (name, c0, w0), (_, c1, w1) in zip(marks[1:], marks[2:], strict=False):
        steps.append((name.split(":")[0], c1 - c0, w1 - w0))
    wc = rep.worst_case
    return {
        "n": n,
        "policy": policy,
        "streams": s.num_streams,
        "steps": steps,
        "cpu_s": marks[-1][1] - marks[0][1],
        "wall_s": marks[-1][2] - marks[0][2],
        "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "worst_case": [wc.lower_bytes, wc.upper_bytes, wc.exact, wc.method],
    }


def scale(sizes: list[int], policies: list[str], time_limit_s: float) -> None:
    rows = []
    for policy in policies:
        for n in sizes:
            cmd = [sys.executable, __file__, "--one", f"{n}@{policy}", "--time-limit", str(time_limit_s)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                sys.exit(r.stderr)
            row = json.loads(r.stdout)
            rows.append(row)
            lo, hi, exact, method = row["worst_case"]
            width = 0.0 if exact else (hi - lo) / hi
            print(
                f"\nrandom:{n} under {policy} ({row['streams']} streams): memory figures "
                f"{row['cpu_s']:.1f} CPU s, {row['wall_s']:.1f} wall s, peak RSS {row['rss_mib']:.0f} MiB"
            )
            for name, cpu, wall in row["steps"]:
                print(f"  {name:22} {cpu:7.2f} CPU s {wall:7.2f} wall s")
            wc = (
                f"{lo / MIB:.2f} MiB exact"
                if exact
                else f"[{lo / MIB:.2f}, {hi / MIB:.2f}] MiB, width {width:.2%}"
            )
            print(f"  worst case: {wc} ({method})")
    print("\ngrowth of the CPU seconds per 10x ops:")
    for policy in policies:
        by_n = {r["n"]: r["cpu_s"] for r in rows if r["policy"] == policy}
        for n in sizes:
            if n * 10 in by_n and by_n[n] > 0:
                print(f"  {policy}: {n} -> {n * 10}: {by_n[n * 10] / by_n[n]:.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000,200000")
    ap.add_argument("--policies", default="sequential,asap")
    ap.add_argument("--time-limit", type=float, default=10.0, help="worst-case solver budget, seconds")
    ap.add_argument("--check", metavar="REV", help="compare every figure with git revision REV's")
    ap.add_argument("--items", default=DEFAULT_ITEMS, help="spec@policy list for --check")
    ap.add_argument("--figures", help=argparse.SUPPRESS)  # child of --check
    ap.add_argument("--one", help=argparse.SUPPRESS)  # child of the scale mode
    args = ap.parse_args()
    if args.figures:
        print(json.dumps(figures(args.figures.split(","), args.time_limit)))
    elif args.one:
        n, policy = args.one.split("@")
        print(json.dumps(one_size(int(n), policy, args.time_limit)))
    elif args.check:
        sys.exit(check(args.check, args.items.split(","), args.time_limit))
    else:
        scale([int(x) for x in args.sizes.split(",")], args.policies.split(","), args.time_limit)


if __name__ == "__main__":
    main()
