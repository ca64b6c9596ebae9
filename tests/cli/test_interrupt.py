"""Ctrl-C always means: exit 130, "interrupted", nothing written, at once — also in the middle of
the exact worst-case solver (CP-SAT caught SIGINT itself: the command went on with a weaker
figure and exit 0, or died by the signal without a word)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time

from helpers.cli import cli

SOLVING = b"worst-case peak: CP-SAT"
INTO_THE_SOLVE_S = 3.0  # its model is built in 1-3 s, then the one CP-SAT solve takes about 6 s


def _interrupt_when_solving(args: list[str], cwd) -> tuple[subprocess.CompletedProcess, float | None]:
    env = dict(os.environ, STREAMPLAN_PROGRESS="1")  # the progress line says when the solve starts
    p = subprocess.Popen(
        [sys.executable, "-m", "streamplan.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
    )
    seen = b""
    deadline = time.monotonic() + 120
    while SOLVING not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([p.stderr], [], [], 1.0)
        if ready:
            chunk = os.read(p.stderr.fileno(), 65536)
            if not chunk:
                break
            seen += chunk
    assert SOLVING in seen, seen[-500:]
    time.sleep(INTO_THE_SOLVE_S)
    assert p.poll() is None, "the command ended before it was interrupted"
    p.send_signal(signal.SIGINT)
    sent = time.monotonic()
    said = None  # when "interrupted" reached stderr: what the person at the terminal waits for
    rest = b""
    while True:
        ready, _, _ = select.select([p.stderr], [], [], 0.05)
        if ready:
            chunk = os.read(p.stderr.fileno(), 65536)
            if not chunk:
                break
            rest += chunk
            if said is None and b"interrupted" in rest:
                said = time.monotonic() - sent
        elif time.monotonic() - sent > 120:
            break
    out = p.stdout.read()
    p.wait(timeout=60)  # exiting may take longer: the interpreter unloads ortools, matplotlib...
    return subprocess.CompletedProcess(args, p.returncode, out.decode(), (seen + rest).decode()), said


def test_ctrl_c_in_the_worst_case_solver_stops_the_command_at_once(tmp_path):
    args = ["plot", "random-train:1500", "--policies", "asap", "--time-limit", "60", "-o", "m.png"]
    r, said = _interrupt_when_solving(args, tmp_path)
    assert r.returncode == 130, (r.returncode, r.stdout, r.stderr[-500:])
    assert r.stderr.rstrip().endswith("interrupted"), r.stderr[-300:]
    assert said is not None and said < 2.0, said
    assert list(tmp_path.iterdir()) == []  # no image, no temporary file


def test_an_interrupted_json_command_still_prints_one_json_document(monkeypatch):
    from streamplan.errors import Interrupted
    from streamplan.models import ModelRequest

    def ctrl_c(*args, **kwargs):
        raise Interrupted  # what SIGINT raises under the command line's handler

    monkeypatch.setattr(ModelRequest, "load", ctrl_c)
    r = cli("memory", "seed-example2", "--policy", "asap", "--json")
    assert r.returncode == 130 and r.stderr.strip().splitlines()[-1] == "interrupted", r
    assert json.loads(r.stdout)["error"]["kind"] == "Interrupted"
