"""What the hardening changed, measured side by side in one run.

    nice .venv/bin/python bench/hardening.py [--batch 1024] [--interrupts 3]

1. Capture memory at a large batch: ``streamplan show squeezenet --batch B`` (example inputs
   built as fake tensors) against capturing the same model from real example inputs at that
   batch (what every capture did before), each in a fresh process: peak RSS and seconds.
2. Ctrl-C in the exact worst-case solver: ``plot random-train:1500 --policies asap`` is sent
   SIGINT three seconds into its CP-SAT step; the seconds until it prints "interrupted" and
   until the process has ended (the interpreter unloading ortools and matplotlib), its status
   and whether anything was written (CP-SAT used to catch the signal itself and finish).
3. One-stream kernel allocations, measured against predicted, on the models written as timm
   and transformers write theirs (``tests/helpers/outside_models.py``).
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REAL_INPUTS = """
import sys, time, resource
from streamplan.frontends.torch_capture import capture
from streamplan.zoo.registry import get_model
t0 = time.perf_counter()
module, inputs = get_model("squeezenet").load_factory()({batch})  # real tensors at the batch
capture(module, inputs, name="squeezenet")
print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""
FAKE_INPUTS = """
import sys, time, resource
from streamplan.models import load_model
t0 = time.perf_counter()
load_model("squeezenet", batch={batch})  # the path every command takes
print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def capture_memory(batch: int, env: dict[str, str]) -> None:
    for what, code in (
        ("real example inputs (before)", REAL_INPUTS),
        ("fake example inputs (now)", FAKE_INPUTS),
    ):
        r = subprocess.run(
            [sys.executable, "-c", code.format(batch=batch)], capture_output=True, text=True, env=env
        )
        if r.returncode:
            sys.exit(r.stderr)
        seconds, rss_kib = r.stdout.split()
        print(
            f"  squeezenet at batch {batch}, {what}: {float(seconds):.2f} s, peak RSS {int(rss_kib) / 1024:.0f} MiB"
        )


def interrupt_once(env: dict[str, str], into_solve_s: float = 3.0) -> tuple[int, float | None, float, bool]:
    """(status, seconds until "interrupted" is printed, seconds until the process ends, wrote)."""
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.Popen(
            [sys.executable, "-m", "streamplan.cli", "plot", "random-train:1500", "--policies", "asap",
             "--time-limit", "60", "-o", "m.png"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=d, env={**env, "STREAMPLAN_PROGRESS": "1"},
        )  # fmt: skip
        seen = b""
        while b"worst-case peak: CP-SAT" not in seen:
            select.select([p.stderr], [], [], 1.0)
            chunk = os.read(p.stderr.fileno(), 65536)
            if not chunk:
                sys.exit("the command ended before its solve: " + seen.decode()[-300:])
            seen += chunk
        time.sleep(into_solve_s)
        p.send_signal(signal.SIGINT)
        t0 = time.perf_counter()
        said, rest = None, b""
        while chunk := os.read(p.stderr.fileno(), 65536):
            rest += chunk
            if said is None and b"interrupted" in rest:
                said = time.perf_counter() - t0
        p.wait(timeout=120)
        return p.returncode, said, time.perf_counter() - t0, any(Path(d).iterdir())


def tracked(env: dict[str, str]) -> None:
    code = (
        "import sys; sys.path.insert(0, {tests!r})\n"
        "from helpers.outside_models import SPECS\n"
        "from streamplan.app.run import run_model\n"
        "from streamplan.models import load_model\n"
        "from streamplan.schedule.context import ScheduleContext\n"
        "for name in ('position_buckets', 'tiny_t5_encoder', 'autocast_on', 'bicubic'):\n"
        "    spec = f'{{SPECS}}:{{name}}'\n"
        "    r = run_model(spec, 'sequential', ScheduleContext(cost='cpu'), graph=load_model(spec), repeat=1)\n"
        "    c = r.comparison\n"
        "    print(f'  {{name}}: outputs match eager {{c.matches_eager}}, kernel allocations measured '\n"
        "          f'{{c.result.tracked_peak_bytes}} B, predicted {{r.predicted_tracked_peak_bytes}} B')\n"
    ).format(tests=str(ROOT / "tests"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    print(r.stdout.rstrip() or r.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--interrupts", type=int, default=3)
    args = ap.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    print("1. capture memory at a large batch")
    capture_memory(args.batch, env)
    print("2. Ctrl-C three seconds into the worst-case CP-SAT step (plot random-train:1500)")
    for _ in range(args.interrupts):
        status, said, ended, wrote = interrupt_once(env)
        shown = f"{said:.2f} s" if said is not None else "never"
        print(
            f"  'interrupted' printed after {shown}, exit status {status} after {ended:.2f} s; file written: {wrote}"
        )
    print("3. one-stream kernel allocations (CPU), measured vs predicted")
    tracked(env)


if __name__ == "__main__":
    main()
