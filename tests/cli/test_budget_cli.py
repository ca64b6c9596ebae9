"""The budget, CUDA-graph and bound parts of the command line, end to end."""

from __future__ import annotations

import json

from helpers.cli import assert_user_error, cli

MiB = 1 << 20


def test_schedule_with_a_budget_prints_its_meta():
    r = cli("schedule", "seed-example2", "--policy", "budget", "--budget", "3MiB", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["policy"] == "budget" and d["meta"]["budget_bytes"] == 3 * MiB
    assert d["meta"]["figure_bytes"] <= 3 * MiB
    r = cli(
        "schedule",
        "random:60:1",
        "--policy",
        "budget",
        "--budget",
        "1.2x",
        "--device",
        "h100",
        "--cuda-graphs",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("schedule budget:")


def test_budget_user_errors():
    r = cli("schedule", "seed-example2", "--policy", "budget", "--budget", "2MiB")
    assert_user_error(r, "below the smallest worst-case peak", "3.000 MiB", "rematerialization")
    assert_user_error(
        cli("schedule", "seed-example2", "--policy", "asap", "--budget", "2MiB"), "--policy budget"
    )
    assert_user_error(
        cli("schedule", "seed-example2", "--policy", "budget", "--budget", "lots"), "cannot read"
    )
    r = cli("schedule", "seed-example2", "--policy", "budget", "--budget", "2MiB", "--json")
    assert r.returncode == 2 and json.loads(r.stdout)["error"]["kind"] == "BudgetError"


def test_compare_rows_carry_the_bound():
    r = cli("compare", "seed-example2", "--no-memory", "--json", "--policies", "sequential,asap")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert all(row["bound_ms"] > 0 and row["makespan_ms"] >= row["bound_ms"] for row in rows)
    assert all(row["bound_ratio"] >= 1 for row in rows)
    r = cli("compare", "seed-example2", "--no-memory", "--policies", "sequential,asap")
    assert "bound" in r.stdout and "x bound" in r.stdout


def test_simulate_with_cuda_graphs():
    plain = json.loads(cli("simulate", "random:40:2", "--device", "h100", "--json").stdout)
    graphs = json.loads(cli("simulate", "random:40:2", "--device", "h100", "--cuda-graphs", "--json").stdout)
    assert graphs["cuda_graphs"] is True and plain["cuda_graphs"] is False
    assert graphs["makespan_ms"] != plain["makespan_ms"]
    assert_user_error(cli("simulate", "random:40:2", "--device", "cpu", "--cuda-graphs"), "no CUDA graphs")


def test_explain_has_a_latency_part():
    r = cli("explain", "seed-example2", "--policy", "asap", "--json")
    assert r.returncode == 0, r.stderr
    lat = json.loads(r.stdout)["latency"]
    assert lat["bound"]["bound_ms"] <= lat["sequential_ms"] and lat["max_speedup"] >= 1
    assert lat["with_cuda_graphs"]["bound_ms"] > 0
    r = cli("explain", "seed-example2", "--policy", "asap")
    assert "latency on v100" in r.stdout and "No schedule can take less than" in r.stdout


def test_pareto_json_table_and_plot(tmp_path):
    png = tmp_path / "front.png"
    r = cli("pareto", "random:30:3", "--points", "4", "--time-limit", "0.5", "--json", "-o", str(png))
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert len(d["points"]) >= 4
    for p in d["points"]:
        assert {"budget_bytes", "makespan_ms", "worst_case_peak_bytes", "streams"} <= set(p)
        assert p["worst_case_peak_bytes"] <= p["budget_bytes"]
    assert {f["policy"] for f in d["fixed"]} >= {"sequential", "asap", "nimble"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = cli(
        "pareto", "seed-example2", "--points", "3", "--time-limit", "1", "--device", "h100", "--cuda-graphs"
    )
    assert r.returncode == 0 and "fastest schedule per budget" in r.stdout and "fixed policies" in r.stdout
    assert_user_error(cli("pareto", "random:30:3", "-o", str(tmp_path / "front.bmp")), "image format")


def test_pareto_takes_a_training_step():
    """Every command that takes a model spec takes --train and --optimizer, pareto included."""
    r = cli(
        "pareto",
        "random:6:1",
        "--train",
        "--optimizer",
        "sgd",
        "--points",
        "2",
        "--time-limit",
        "0.2",
        "--json",
    )
    assert r.returncode == 0, r
    d = json.loads(r.stdout)
    assert d["model"].endswith("/train") and d["points"]
    assert all(p["worst_case_peak_bytes"] <= p["budget_bytes"] for p in d["points"])
    assert_user_error(cli("pareto", "random:6:1", "--optimizer", "adam"), "needs --train")
