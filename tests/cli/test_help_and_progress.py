"""Help that teaches (every option explained, the memory columns, --version, exit statuses),
progress on stderr only, and explain's --vs side simulated too."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys

import click
import pytest
import typer.main

from helpers.cli import cli
from streamplan.cli import app
from streamplan.schedule.registry import POLICIES


def _commands():
    group = typer.main.get_command(app)
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            for sub, c in cmd.commands.items():
                yield f"{name} {sub}", c
        else:
            yield name, cmd


def test_every_option_of_every_command_has_help():
    missing = [
        f"{name} {p.opts[0]}"
        for name, cmd in _commands()
        for p in cmd.params
        if isinstance(p, click.Option) and not (p.help or "").strip()
    ]
    assert not missing, missing


@pytest.mark.parametrize("name", ["--force", "--repeat", "--seed", "--include-inputs"])
def test_the_options_that_had_no_help_now_do(name):
    text = " ".join(cli("run" if name in ("--repeat", "--seed") else "compare", "--help").stdout.split())
    if name == "--force":
        text = " ".join(cli("export", "--help").stdout.split())
    assert re.search(re.escape(name) + r"(?: \S+)? [a-z]", text), text


MEMORY_ROWS = ("host-order peak", "worst-case peak", "simulated peak", "torch-cuda", "static arena")
COMPARE_COLUMNS = ("streams, events", "latency", "speedup", "search", "host-order", "worst-case", "simulated")


@pytest.mark.parametrize(
    "command,columns",
    [("memory", MEMORY_ROWS), ("compare", (*COMPARE_COLUMNS, "torch alloc/resv", "arena, arena LB"))],
)
def test_memory_and_compare_help_explain_each_column(command, columns):
    text = cli(command, "--help").stdout
    assert "docs/memory.md" in text
    for column in columns:
        assert re.search(rf"^\s+{re.escape(column)}\s+\S", text, re.M), column
    assert "[a, b]" in text and "--time-limit" in text


def test_policy_help_lists_the_policies():
    text = " ".join(cli("memory", "--help").stdout.split())
    assert all(p in text for p in POLICIES)


def test_version_no_args_and_unknown_command():
    from streamplan import __version__

    r = cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"streamplan {__version__}"
    r = cli()
    assert r.returncode == 0 and "Usage" in r.stdout and "memory" in r.stdout
    r = cli("frobnicate")
    assert r.returncode == 2 and "frobnicate" in r.stderr


def test_a_worst_case_interval_is_explained_where_it_is_printed():
    args = ["random:2000", "--policy", "asap", "--time-limit", "0.01"]
    r = cli("memory", *args)
    assert r.returncode == 0, r
    head = " ".join("\n".join(r.stdout.splitlines()[:8]).split())
    assert "proven bounds" in head and "an interval: some timing reaches the first figure" in head
    r = cli("compare", args[0], "--policies", "sequential,asap", "--time-limit", "0.01")
    text = " ".join(r.stdout.split())
    assert re.search(r"\[[\d.]+, [\d.]+\]", text) and "a longer --time-limit can close it" in text
    r = cli("explain", *args)
    assert "search stopped before closing the gap" in " ".join(r.stdout.split())


def test_explain_vs_side_is_simulated_too():
    r = cli("explain", "seed-example2", "--policy", "asap", "--vs", "sequential", "--json")
    d = json.loads(r.stdout)
    assert d["base"]["memory"]["simulated_peak_bytes"] == 3 << 20
    assert d["other"]["memory"]["simulated_peak_bytes"] == 4 << 20
    text = cli("explain", "seed-example2", "--policy", "asap", "--vs", "sequential").stdout
    assert re.search(r"simulated\s+3.000 MiB ->\s+4.000 MiB", text)
    assert "simulated peak       -" not in text


# -- progress -------------------------------------------------------------------------------------
@pytest.fixture
def recorded_steps(monkeypatch):
    """Every step the commands report, recorded instead of drawn."""
    steps: list[tuple[str, int | None, int | None]] = []

    @contextlib.contextmanager
    def recorder(console, *, enabled=True, eta=False):
        yield lambda step, done=None, total=None: steps.append((step, done, total))

    # every command opens its display where it loads the model (cli/options.py)
    monkeypatch.setattr("streamplan.cli.progress.progress_display", recorder)
    return steps


def test_progress_covers_capture_each_policy_and_each_memory_figure(recorded_steps, tmp_path):
    model = tmp_path / "m.py"
    model.write_text(
        "import torch\n"
        "def build():\n"
        "    return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), (torch.randn(2, 4),)\n"
    )
    r = cli("compare", f"{model}:build", "--policies", "sequential,asap", "--no-cache", "--json")
    assert r.returncode == 0, r
    names = [s for s, _, _ in recorded_steps]
    assert any("capturing" in s for s in names)
    for policy in ("sequential", "asap"):
        assert f"{policy}: scheduling" in names and f"{policy}: simulating" in names
        for figure in ("liveness", "host-order peak", "static arena", "worst-case peak", "torch-cuda replay"):
            assert f"{policy}: {figure}" in names, (policy, figure)
    recorded_steps.clear()
    cli("compare", "random:600", "--policies", "asap", "--time-limit", "2")
    solver = [s for s in recorded_steps if "CP-SAT" in s[0]]
    assert solver and "at most 2 s" in solver[0][0] and solver[0][2]  # the time limit, segments counted


def test_capture_step_names_the_cache(recorded_steps, tmp_path):
    model = tmp_path / "m.py"
    model.write_text("import torch\ndef build():\n    return torch.nn.ReLU(), (torch.randn(2, 4),)\n")
    env = {"STREAMPLAN_CACHE_DIR": str(tmp_path / "c")}
    cli("show", f"{model}:build", env=env)
    cli("show", f"{model}:build", env=env)
    names = [s for s, _, _ in recorded_steps]
    assert any("capturing" in s for s in names) and any("from the capture cache" in s for s in names)


def _untimed(text: str) -> str:
    """The output without the measured search times (they differ from run to run)."""
    return re.sub(r'"search_time_s": [0-9.e-]+', '"search_time_s": T', text)


def _run(args, progress: bool):
    env = {k: v for k, v in os.environ.items() if k != "STREAMPLAN_PROGRESS"}
    if progress:
        env["STREAMPLAN_PROGRESS"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "streamplan.cli", *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_progress_goes_to_stderr_and_never_into_json():
    # small enough that every worst case is exact within the time limit on a loaded machine
    # (a time-limited interval may end elsewhere from run to run), large enough to show progress
    args = ["compare", "random:600", "--policies", "sequential,asap", "--json"]
    shown = _run(args, progress=True)
    quiet = _run(args, progress=False)
    assert shown.returncode == quiet.returncode == 0
    assert json.loads(shown.stdout)["rows"] and _untimed(shown.stdout) == _untimed(quiet.stdout)
    assert "worst-case peak" in shown.stderr and "asap" in shown.stderr  # drawn on stderr
    assert quiet.stderr == ""  # not a terminal: nothing at all
