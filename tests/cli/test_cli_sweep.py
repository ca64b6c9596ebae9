"""``streamplan sweep`` end to end: a zoo model captured in a worker, exports, Ctrl-C and resuming."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from helpers.cli import assert_user_error, sp


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _key(row):
    return tuple(row[k] for k in ("model", "batch", "dtype", "device", "max_streams", "policy"))


def test_sweep_writes_rows_table_and_plots_then_skips_them(tmp_path):
    args = [
        "sweep",
        "--models",
        "seed-example1,squeezenet",
        "--batches",
        "1,2",
        "--policies",
        "sequential,asap,ios",
        "--devices",
        "v100",
        "--devices",
        "h100",
        "--workers",
        "2",
        "-o",
        "out.jsonl",
    ]
    r = sp(*args, "--csv", "out.csv", "--plots", "p", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = _rows(tmp_path / "out.jsonl")
    assert len(rows) == 2 * 2 * 3 * 2 and all(row["error"] is None for row in rows)
    sq = [row for row in rows if row["model"] == "squeezenet"]
    assert {row["batch"] for row in sq} == {1, 2} and all(row["graph"] == "squeezenet" for row in sq)
    assert all(row["memory"]["worst_case_peak_bytes"]["upper"] > 0 for row in sq)
    assert len((tmp_path / "out.csv").read_text().splitlines()) == len(rows) + 1
    assert (tmp_path / "p-speedup.png").stat().st_size > 0 and (tmp_path / "p-peak.png").exists()
    assert "best policy" in r.stdout and "squeezenet" in r.stdout
    before = (tmp_path / "out.jsonl").read_bytes()
    again = sp(*args, "--json", cwd=tmp_path)  # the same sweep again: every row is already there
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["ran"] == 0 and summary["skipped"] == len(rows) == len(summary["rows"])
    assert (tmp_path / "out.jsonl").read_bytes() == before
    assert_user_error(sp(*args, "--csv", "out.csv", cwd=tmp_path), "already exists", "--force")


def test_ctrl_c_keeps_every_finished_row_and_the_rerun_finishes(tmp_path):
    args = ["sweep", "--models", "random:60:1,random:60:2,random:60:3", "--policies", "sequential,ios"]
    # a short search limit: what is checked is the interrupt and the rerun, not IOS's search
    args += ["--devices", "v100,h100", "--workers", "2", "--time-limit", "1", "-o", "out.jsonl"]
    out = tmp_path / "out.jsonl"
    cmd = [sys.executable, "-m", "streamplan.cli", *args]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (out.exists() and out.read_text().count("\n") >= 1):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    kept = _rows(out)  # every line is a whole row
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "run the same command again" in stderr and "Traceback" not in stderr
    assert 1 <= len(kept) < 12
    r = sp(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = _rows(out)
    assert len(rows) == 12 == len({_key(row) for row in rows})  # finished, nothing twice
    assert rows[: len(kept)] == kept
    assert f"{len(kept)} already there" in r.stderr


def test_bad_sweeps_are_user_errors(tmp_path):
    assert_user_error(sp("sweep", "--models", "nope"), "unknown model 'nope'")
    assert_user_error(sp("sweep", "--models", "seed-example1", "--batches", "0"), "batch size")
    assert_user_error(sp("sweep", "--models", "random:8", "--budgets", "0.8x"), "budget-aware policies")
    assert_user_error(sp("sweep", "--models", "random:8", "--fusion", "fast"), "unknown fusion mode 'fast'")
    assert_user_error(sp("sweep", "--models", "seed-example1", "-o", "r.csv", cwd=tmp_path), "JSON Lines")
    assert_user_error(sp("sweep", "--file", "nope.toml", cwd=tmp_path), "cannot read the sweep file")
    (tmp_path / "s.toml").write_text('models = ["seed-example1"]\npolicies = ["asap"]\n')
    r = sp("sweep", "-f", "s.toml", "-o", "r.jsonl", "--workers", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert [row["policy"] for row in _rows(tmp_path / "r.jsonl")] == ["asap"]
    other = sp("sweep", "-f", "s.toml", "-o", "r.jsonl", "--no-memory", cwd=tmp_path)
    assert_user_error(other, "other settings", "--restart")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    (tmp_path / "ray.py").write_text("raise ImportError('no ray here')\n")  # shadows the real one
    assert_user_error(
        sp("sweep", "--models", "seed-example1", "--ray", cwd=tmp_path, env=env), "streamplan[ray]"
    )


@pytest.mark.slow  # a budget search on a training step, a CLI compare
def test_training_budget_and_cuda_graph_axes_give_compare_rows_and_a_pareto_plot(tmp_path):
    args = ["sweep", "--models", "random:8:1", "--policies", "sequential,asap,budget"]
    args += ["--budgets", "1.2x,none", "--train", "--optimizer", "sgd", "--cuda-graphs"]
    args += ["--workers", "2", "--time-limit", "2", "-o", "r.jsonl"]
    r = sp(*args, "--plots", "p", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    order = ["sequential", "asap", "budget"]  # rows are written as they finish: put them in job order
    rows = sorted(
        _rows(tmp_path / "r.jsonl"), key=lambda row: (order.index(row["policy"]), row["budget"] is None)
    )
    assert [(row["policy"], row["budget"]) for row in rows] == [
        ("sequential", None),
        ("asap", None),
        ("budget", "1.2x"),
        ("budget", None),
    ]
    assert all(row["train"] and row["optimizer"] == "sgd" and row["cuda_graphs"] for row in rows)
    assert all(row["error"] is None and row["bound_ratio"] >= 1.0 for row in rows), rows
    best = min(rows, key=lambda row: row["makespan_ms"])
    assert f" {best['policy']}{'@' + best['budget'] if best['budget'] else ''} " in r.stdout
    for what in ("speedup", "peak", "pareto"):
        assert (tmp_path / f"p-{what}.png").stat().st_size > 1000
    compare = sp(
        "compare",
        "random:8:1",
        "--train",
        "--optimizer",
        "sgd",
        "--cuda-graphs",
        "--json",
        "--policies",
        "sequential,asap",
    )
    assert compare.returncode == 0, compare.stderr
    for mine, theirs in zip(rows, json.loads(compare.stdout)["rows"]):  # sequential, asap
        assert set(theirs) <= set(mine)
        assert mine["bound_ms"] == theirs["bound_ms"] and mine["makespan_ms"] == theirs["makespan_ms"]
        assert mine["memory_breakdown"] == theirs["memory_breakdown"]
