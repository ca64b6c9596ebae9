"""The CPU runtime stops promptly and leaves no thread behind: when an op raises inside a
worker (the error names the op and its stream), and when the caller is interrupted (Ctrl-C)."""

from __future__ import annotations

import _thread
import signal
import subprocess
import sys
import threading
import time

import pytest

import streamplan.runtime.cpu as cpu
from helpers.cli import assert_user_error, cli
from streamplan.errors import ExecutionError
from streamplan.models import load_model
from streamplan.runtime import run
from streamplan.schedule import make_schedule
from streamplan.schedule.context import ScheduleContext

SLOW_OP_S = 0.01


def _workers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("streamplan-s")]


def _in_thread(fn, timeout_s: float):
    """Run ``fn`` with a deadline (a hang fails the test instead of stalling the suite)."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            box["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout_s)
    assert not t.is_alive(), f"still running after {timeout_s} s"
    return box


@pytest.fixture
def graph_and_schedule():
    g = load_model("random:400")
    s = make_schedule(g, "asap", ScheduleContext(max_streams=4))
    assert s.num_streams >= 3
    return g, s


def test_an_op_raising_in_a_worker_stops_the_run_naming_op_and_stream(graph_and_schedule, monkeypatch):
    g, s = graph_and_schedule
    victim = s.launch_order[len(s.launch_order) // 3]
    real = cpu.call_node

    def call_node(node, inputs, device):
        if node.id == victim:
            raise RuntimeError("injected failure")
        time.sleep(SLOW_OP_S)  # the other workers are busy when it happens
        return real(node, inputs, device)

    monkeypatch.setattr(cpu, "call_node", call_node)
    t0 = time.perf_counter()
    box = _in_thread(lambda: run(g, s, chaos=True), timeout_s=60)
    elapsed = time.perf_counter() - t0
    err = box.get("error")
    assert isinstance(err, ExecutionError), box
    assert f"%{victim}" in err.message and f"on stream {s.streams[victim]}" in err.message
    assert "injected failure" in err.message
    assert elapsed < SLOW_OP_S * len(s.launch_order) / 2  # stopped, not run to the end
    assert not _workers()


def test_ctrl_c_stops_every_worker_promptly(graph_and_schedule, monkeypatch):
    g, s = graph_and_schedule
    real = cpu.call_node
    started = threading.Event()

    def call_node(node, inputs, device):
        started.set()
        time.sleep(SLOW_OP_S)
        return real(node, inputs, device)

    monkeypatch.setattr(cpu, "call_node", call_node)

    def interrupt():
        started.wait(30)
        time.sleep(0.2)
        _thread.interrupt_main()  # what Ctrl-C does: KeyboardInterrupt in the main thread

    threading.Thread(target=interrupt, daemon=True).start()
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        run(g, s, repeat=50)
    assert time.perf_counter() - t0 < 10
    assert not _workers()


def test_ctrl_c_while_the_workers_start_is_still_an_interrupt(graph_and_schedule, monkeypatch):
    """Ctrl-C between two workers' starts: the ones not started are not joined (joining one
    raised RuntimeError, an internal error instead of exit 130)."""
    g, s = graph_and_schedule
    real_start = threading.Thread.start
    starts = []

    def start(self):
        if self.name.startswith("streamplan-s"):
            starts.append(self.name)
            if len(starts) == 2:
                raise KeyboardInterrupt
        return real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    with pytest.raises(KeyboardInterrupt):
        run(g, s, repeat=1)
    monkeypatch.undo()
    deadline = time.monotonic() + 10
    while _workers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _workers()


def _spawn(args, *, ignore_sigint: bool):
    def child():
        signal.signal(signal.SIGINT, signal.SIG_IGN if ignore_sigint else signal.SIG_DFL)

    return subprocess.Popen(
        [sys.executable, "-m", "streamplan.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=child,
    )


@pytest.mark.slow
@pytest.mark.parametrize("ignore_sigint", [False, True], ids=["default", "inherited-ignored"])
def test_sigint_during_run_exits_130_with_nothing_written(tmp_path, ignore_sigint):
    """A long ``run`` signalled with SIGINT stops within seconds, status 130, no trace file; also
    when started the way a script starts a background job (SIGINT inherited as ignored)."""
    trace = tmp_path / "trace.json"
    p = _spawn(
        ["run", "random:300", "--chaos", "--repeat", "1000", "--trace", str(trace)],
        ignore_sigint=ignore_sigint,
    )
    try:
        time.sleep(8)  # imports, schedule, the first timed runs
        assert p.poll() is None, p.communicate()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, (p.returncode, err)
    assert "interrupted" in err and "Traceback" not in err
    assert not trace.exists() and list(tmp_path.iterdir()) == []


def test_an_op_failing_in_a_cli_run_is_one_clear_line(monkeypatch):
    real = cpu.call_node

    def call_node(node, inputs, device):
        if node.id == "n7":
            raise RuntimeError("injected failure")
        return real(node, inputs, device)

    monkeypatch.setattr(cpu, "call_node", call_node)
    r = cli("run", "random:40", "--policy", "asap", "--repeat", "1")
    assert_user_error(r, "%n7", "on stream", "injected failure")
    assert not _workers()


def test_a_model_that_fails_by_itself_is_a_user_error(tmp_path):
    model = tmp_path / "bad.py"
    model.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.register_buffer('idx', torch.tensor([10]))\n"
        "    def forward(self, x):\n"
        "        return torch.index_select(x.sin(), 0, self.idx)\n"
        "def build():\n"
        "    return M(), (torch.randn(4, 4),)\n"
    )
    assert_user_error(cli("run", f"{model}:build", "--repeat", "1"), "run eagerly", "IndexError")
