"""What the capture cache saves: ``streamplan show MODEL`` captured, then read back from the cache.

    nice .venv/bin/python bench/capture_cache.py [--models inception_v3,squeezenet] [--repeat 3]

Each command is a fresh process (what a user's session of commands is). The cache lives
in a temporary directory (``STREAMPLAN_CACHE_DIR``), so the user's own is not touched.
Prints the wall seconds of the first (capturing) run and of each cached run, and
whether a cached run imported torch (it must not).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

PROBE = (
    "import sys\nfrom streamplan.cli import main\nsys.argv = ['streamplan', 'show', {model!r}, '--json']\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\nsys.stderr.write('torch imported: %s' % ('torch' in sys.modules))\n"
)


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - t0
    if r.returncode:
        sys.exit(r.stderr)
    return elapsed, r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="inception_v3,squeezenet")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    exe = [sys.executable, "-m", "streamplan.cli"]
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "STREAMPLAN_CACHE_DIR": cache, "OMP_NUM_THREADS": "1"}
        for model in args.models.split(","):
            first, _ = timed([*exe, "show", model, "--json"], env)
            cached = [timed([*exe, "show", model, "--json"], env)[0] for _ in range(args.repeat)]
            _, probe = timed([sys.executable, "-c", PROBE.format(model=model)], env)
            nocache, _ = timed([*exe, "show", model, "--json", "--no-cache"], env)
            print(
                f"streamplan show {model}: first run {first:.2f} s (captures), --no-cache {nocache:.2f} s, "
                f"cached runs {', '.join(f'{t:.2f}' for t in cached)} s "
                f"(median {statistics.median(cached):.2f} s); cached run {probe.stderr.strip()}"
            )


if __name__ == "__main__":
    main()
