"""``streamplan remat``: the JSON the checks read, the files it writes, and its user errors."""

from __future__ import annotations

import json

from helpers.cli import assert_user_error, cli
from streamplan.ir.schedule import StreamSchedule
from streamplan.ir.serialize import load
from streamplan.schedule.verify import schedule_problems

FIELDS = (
    "budget_bytes",
    "worst_case_peak_bytes",
    "baseline_worst_case_peak_bytes",
    "makespan_ms",
    "baseline_makespan_ms",
    "added_compute_ms",
    "recomputed_ops",
    "solver",
    "optimality_gap",
)


def test_json_files_and_the_rewritten_graph_everywhere(tmp_path):
    g, s = tmp_path / "g.json", tmp_path / "s.json"
    r = cli(
        "remat", "random-train:12", "--budget", "0.8x", "--max-streams", "3", "--levels", "6",
        "--json", "-o", str(g), "--schedule-out", str(s),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert all(k in d for k in FIELDS)
    assert d["solver"] == "scalable" and d["optimality_gap"] is None and d["recomputed_ops"] > 0
    assert d["worst_case_peak_bytes"] <= d["budget_bytes"] < d["baseline_worst_case_peak_bytes"]
    graph, sched = load(g), StreamSchedule.load(s)
    assert schedule_problems(graph, sched) == []
    assert sum(1 for n in graph.nodes if n.recompute_of) == d["recomputed_ops"]
    assert cli("verify", str(g), str(s)).returncode == 0
    shown = cli("show", str(g), "--graph")
    assert shown.returncode == 0 and "(recompute of " in shown.stdout
    mem = cli("memory", str(g), "--policy", "asap", "--json")
    assert mem.returncode == 0, mem.stderr
    png = tmp_path / "p.png"
    assert (
        cli("plot", str(g), "--policies", "asap", "-o", str(png)).returncode == 0 and png.stat().st_size > 0
    )


def test_text_output_and_the_separate_mode():
    r = cli(
        "remat", "random-train:12", "--budget", "0.9x", "--separate", "--policy", "nimble", "--levels", "6"
    )
    assert r.returncode == 0, r.stderr
    assert "worst-case peak" in r.stdout and "planned for one stream, then scheduled" in r.stdout


def test_user_errors():
    assert_user_error(cli("remat", "random-train:8", "--budget", "lots"), "cannot read the memory budget")
    assert_user_error(cli("remat", "random-train:8", "--budget", "1MiB", "--solver", "magic"), "unknown")
    j = cli("remat", "random-train:8", "--budget", "10KiB", "--json")
    assert_user_error(j, "no plan fits a budget of", "no plan can go below")
    assert json.loads(j.stdout)["error"]["kind"] == "BudgetError"


def test_a_training_step_through_the_cli(tmp_path):
    g = tmp_path / "g.json"
    r = cli(
        "remat", "random:20", "--train", "--optimizer", "sgd", "--budget", "0.7x", "--levels", "6",
        "--json", "-o", str(g),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert all(k in d for k in FIELDS) and d["recomputed_ops"] > 0
    assert d["worst_case_peak_bytes"] <= d["budget_bytes"] < d["baseline_worst_case_peak_bytes"]
    assert load(g).meta.get("training") is not None
    low = cli("remat", "random:20", "--train", "--budget", "0.05x", "--levels", "4")
    assert_user_error(low, "the smallest worst-case peak found is", "no plan can go below")


def test_a_checkpointing_policy_priced_through_the_cli(tmp_path):
    from helpers.training import block_graph
    from streamplan.ir.serialize import dumps

    g = tmp_path / "blocks.json"
    g.write_text(dumps(block_graph("adam")))
    r = cli(
        "remat", str(g), "--checkpointing", "full", "--policy", "sequential", "--max-streams", "1", "--json"
    )
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["solver"] == "full activation checkpointing" and d["recomputed_flops"] > 0
    assert d["worst_case_peak_bytes"] < d["baseline_worst_case_peak_bytes"]
    text = cli("remat", str(g), "--checkpointing", "selective", "--policy", "sequential")
    assert text.returncode == 0 and "selective activation checkpointing" in text.stdout
    assert_user_error(cli("remat", "random-train:8"), "either --budget")
    assert_user_error(cli("remat", str(g), "--budget", "0.5x", "--checkpointing", "full"), "either --budget")
    assert_user_error(cli("remat", str(g), "--checkpointing", "most"), "unknown checkpointing policy")
    assert_user_error(cli("remat", "random-train:8", "--checkpointing", "full"), "not a training step")


def test_the_search_time_limit_answers_with_what_it_has():
    r = cli(
        "remat",
        "random-train:12",
        "--budget",
        "0.8x",
        "--levels",
        "6",
        "--search-time-limit",
        "0.01",
        "--json",
    )
    if r.returncode == 0:
        assert json.loads(r.stdout)["search_complete"] is False
    else:
        assert_user_error(r, "time limit stopped it")
    full = cli(
        "remat",
        "random-train:12",
        "--budget",
        "0.8x",
        "--levels",
        "6",
        "--search-time-limit",
        "600",
        "--json",
    )
    assert full.returncode == 0 and json.loads(full.stdout)["search_complete"] is True
