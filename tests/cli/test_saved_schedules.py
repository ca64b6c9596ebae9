"""Saved schedules everywhere: ``--schedule FILE`` on memory, explain, plot, compare (as on
simulate and run), and a schedule used with another graph said in one line."""

from __future__ import annotations

import json

import pytest

from helpers.cli import assert_user_error, cli
from streamplan.ir.fingerprint import fingerprint_mismatch, graph_fingerprint
from streamplan.models import load_model
from streamplan.schedule.registry import make_schedule

MiB = 1 << 20


@pytest.fixture(scope="module")
def asap_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("sched") / "asap.json"
    r = cli("schedule", "seed-example2", "--policy", "asap", "-o", p)
    assert r.returncode == 0, r
    return p


def test_saved_schedules_carry_the_fingerprint_of_their_graph(asap_file):
    meta = json.loads(asap_file.read_text())["meta"]
    g = load_model("seed-example2")
    assert meta["graph"] == graph_fingerprint(g) and meta["graph"]["name"] == "seed-example2"
    assert meta["graph"]["batch"] == 1


@pytest.mark.parametrize(
    "command,extra",
    [
        ("memory", []),
        ("explain", []),
        ("compare", []),
        ("simulate", []),
        ("verify", None),
        ("plot", ["-o", "PLOT"]),
        ("run", ["--repeat", "1"]),
    ],
)
def test_a_schedule_for_another_graph_is_one_line(command, extra, asap_file, tmp_path):
    if extra is None:
        r = cli(command, "seed-concat", asap_file)
        assert r.returncode == 1 and r.stderr.count("\n") <= 3, r
    else:
        args = [str(tmp_path / "p.png") if a == "PLOT" else a for a in extra]
        r = cli(command, "seed-concat", "--schedule", asap_file, *args)
        assert_user_error(r)
        assert not (tmp_path / "p.png").exists()
    assert "schedule was made for seed-example2 at batch 1, not seed-concat at batch 1" in r.stderr
    assert "never launched" not in r.stderr  # not the list of every unknown op


def test_mismatch_lines():
    g1, g4 = load_model("seed-example2"), load_model("seed-example2", batch=4)
    s = make_schedule(g1, "asap")
    assert fingerprint_mismatch(s.meta, g1) is None
    assert (
        fingerprint_mismatch(s.meta, g4) == "schedule was made for seed-example2 at batch 1, not at batch 4"
    )
    other = load_model("random:20")
    assert fingerprint_mismatch(s.meta, other) == (
        "schedule was made for seed-example2 at batch 1, not random:20:0 at batch 1"
    )
    assert fingerprint_mismatch({}, other) is None  # hand-made schedules have no fingerprint


def test_the_same_graph_at_another_batch_uses_the_schedule_with_a_note(asap_file):
    r = cli("memory", "seed-example2", "--batch", "2", "--schedule", asap_file, "--json")
    assert r.returncode == 0, r
    assert "not at batch 2" in r.stderr and "used as it is" in r.stderr
    assert json.loads(r.stdout)["worst_case_peak_bytes"]["upper"] == 8 * MiB


def test_memory_of_a_saved_schedule_equals_the_policy(asap_file):
    saved = json.loads(cli("memory", "seed-example2", "--schedule", asap_file, "--json").stdout)
    fresh = json.loads(cli("memory", "seed-example2", "--policy", "asap", "--json").stdout)
    for key in ("host_order_peak_bytes", "worst_case_peak_bytes", "simulated_peak_bytes", "arena_bytes"):
        assert saved[key] == fresh[key], key


def test_compare_adds_a_row_per_saved_schedule(asap_file):
    d = json.loads(cli("compare", "seed-example2", "--schedule", asap_file, "--json").stdout)
    rows = {row["policy"]: row for row in d["rows"]}
    assert set(rows) == {"sequential", str(asap_file)}  # alone, a saved schedule meets the baseline
    assert rows[str(asap_file)]["memory"]["worst_case_peak_bytes"]["upper"] == 4 * MiB
    assert rows[str(asap_file)]["speedup"] is not None


def test_explain_a_saved_schedule_and_against_one(asap_file, tmp_path):
    r = cli("explain", "seed-example2", "--schedule", asap_file, "--vs", "sequential", "--json")
    assert r.returncode == 0, r
    assert json.loads(r.stdout)["other"]["memory"]["worst_case_peak_bytes"]["upper"] == 4 * MiB
    seq = tmp_path / "seq.json"
    cli("schedule", "seed-example2", "--policy", "sequential", "-o", seq)
    r = cli("explain", "seed-example2", "--policy", "asap", "--vs", seq, "--json")
    d = json.loads(r.stdout)
    assert d["base"]["memory"]["worst_case_peak_bytes"]["upper"] == 3 * MiB


def test_plot_draws_a_saved_schedule(asap_file, tmp_path):
    out = tmp_path / "p.svg"
    r = cli("plot", "seed-example2", "--schedule", asap_file, "-o", out)
    assert r.returncode == 0, r
    assert out.read_bytes().startswith(b"<?xml")


def test_the_schedule_file_is_never_overwritten_by_a_plot(asap_file, tmp_path):
    odd = tmp_path / "sched.png"  # a schedule whose name looks like an image
    odd.write_text(asap_file.read_text())
    assert_user_error(cli("plot", "seed-example2", "--schedule", odd, "-o", odd, "--force"), "input file")
    assert odd.read_text() == asap_file.read_text()


@pytest.mark.parametrize("command", ["memory", "explain", "simulate", "run"])
def test_a_fusion_that_disagrees_with_the_saved_schedule_is_refused(command, asap_file, tmp_path):
    """A saved schedule runs the kernels it was made for: --fusion first on an unfused schedule
    (or stream-aware on one fused first) is one line, not silently ignored."""
    r = cli(command, "seed-example2", "--schedule", asap_file, "--fusion", "first")
    assert_user_error(r, "made with --fusion none, not first")
    fused = tmp_path / "first.json"
    assert cli("schedule", "seed-example2", "--fusion", "first", "-o", fused).returncode == 0
    assert_user_error(
        cli(command, "seed-example2", "--schedule", fused, "--fusion", "stream-aware"),
        "made with --fusion first, not stream-aware",
    )
    extra = ["--repeat", "1"] if command == "run" else []
    r = cli(command, "seed-example2", "--schedule", fused, "--fusion", "first", *extra)
    assert r.returncode == 0, r


def test_the_written_line_counts_in_the_singular_for_one(tmp_path):
    r = cli("schedule", "seed-concat", "--fusion", "first", "-o", tmp_path / "one.json")
    assert r.returncode == 0, r
    assert "1 op on 1 stream, 0 events" in r.stderr
