"""``--fusion`` across the commands that schedule, on the seed discussion's graphs."""

import json

from helpers.cli import assert_user_error, cli


def test_saved_fused_schedule_verifies_simulates_and_runs(tmp_path):
    path = tmp_path / "s.json"
    r = cli("schedule", "seed-concat", "--policy", "asap", "--fusion", "stream-aware", "-o", str(path))
    assert r.returncode == 0, r.stderr
    saved = json.loads(path.read_text())
    assert saved["fusion"]["mode"] == "stream-aware"
    assert len(saved["launch_order"]) == 3  # two kernels and the concatenation they write in place
    assert cli("verify", "seed-concat", str(path)).returncode == 0
    r = cli("simulate", "seed-concat", "--schedule", str(path), "--json")
    assert r.returncode == 0, r.stderr
    sim = json.loads(r.stdout)
    assert (sim["fusion"], sim["kernels"], sim["streams"]) == ("stream-aware", 2, 2)
    r = cli("run", "seed-concat", "--schedule", str(path), "--repeat", "1", "--chaos", "--json")
    assert r.returncode == 0, r.stderr
    run = json.loads(r.stdout)
    assert run["matches_eager"] and run["fusion"] == "stream-aware" and run["kernels"] == 2


def test_compare_all_three_orders_shows_first_collapsing_the_branches():
    r = cli("compare", "seed-concat", "--policies", "sequential,asap", "--fusion", "all", "--json")
    assert r.returncode == 0, r.stderr
    rows = {(x["policy"], x["fusion"]): x for x in json.loads(r.stdout)["rows"]}
    assert len(rows) == 6
    assert (rows["asap", "none"]["kernels"], rows["asap", "none"]["streams"]) == (6, 2)
    assert (rows["asap", "first"]["kernels"], rows["asap", "first"]["streams"]) == (1, 1)
    assert (rows["asap", "stream-aware"]["kernels"], rows["asap", "stream-aware"]["streams"]) == (2, 2)
    mib = 1 << 20
    assert rows["asap", "first"]["memory"]["worst_case_peak_bytes"]["upper"] == 2 * mib
    r = cli("compare", "seed-concat", "--policies", "asap", "--fusion", "none,first")
    assert r.returncode == 0 and "fusion" in r.stdout and "first" in r.stdout


def test_explain_names_the_merged_branches_and_what_stream_aware_keeps():
    r = cli("explain", "seed-concat", "--policy", "asap", "--fusion", "first")
    assert r.returncode == 0, r.stderr
    assert "atan2 = atan1, atan4 = atan3" in r.stdout  # the two branches compute the same thing
    assert "removed parallelism" in r.stdout
    assert "stream-aware" in r.stdout and "2 kernels on 2 streams" in r.stdout
    # one of a thing is singular: "6 ops became 1 kernel", "first: 1 kernel on 1 stream"
    assert "6 ops became 1 kernel before" in r.stdout and "first: 1 kernel on 1 stream," in r.stdout
    r = cli("explain", "random:40:3", "--policy", "asap", "--fusion", "first", "--json")
    assert r.returncode == 0, r.stderr
    note = json.loads(r.stdout)["fusion"]
    assert note["merged_branches"] and all(len(m["branches"]) >= 2 for m in note["merged_branches"])
    assert note["parallelism_kernels"] <= note["parallelism_ops"]
    r = cli("explain", "seed-example2", "--policy", "asap", "--fusion", "stream-aware", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["fusion_mode"] == "stream-aware"


def test_memory_and_plot_take_fusion(tmp_path):
    r = cli("memory", "seed-example2", "--policy", "asap", "--fusion", "first", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["fusion"] == "first" and d["worst_case_peak_bytes"]["upper"] == 1 << 20  # one kernel: x -> f
    out = tmp_path / "m.png"
    r = cli("plot", "seed-example2", "--fusion", "stream-aware", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_bad_fusion_modes_and_records(tmp_path):
    assert_user_error(cli("schedule", "seed-concat", "--fusion", "later"), "later", "stream-aware")
    assert_user_error(cli("compare", "seed-concat", "--fusion", "first,later"), "later")
    path = tmp_path / "s.json"
    assert cli("schedule", "seed-concat", "--fusion", "first", "-o", str(path)).returncode == 0
    saved = json.loads(path.read_text())
    saved["fusion"]["groups"] = {"k": ["atan0", "nope"]}
    path.write_text(json.dumps(saved))
    assert_user_error(cli("simulate", "seed-concat", "--schedule", str(path)), "nope")


def test_compare_a_zoo_model_in_every_order():
    r = cli(
        "compare", "squeezenet", "--policies", "sequential,asap", "--fusion", "all", "--no-memory", "--json"
    )
    assert r.returncode == 0, r.stderr
    rows = {(x["policy"], x["fusion"]): x for x in json.loads(r.stdout)["rows"]}
    unfused = rows["sequential", "none"]["kernels"]
    first = rows["sequential", "first"]["kernels"]
    assert first < unfused
    # one stream: fusing along it finds the same kernels as fusing first
    assert rows["sequential", "stream-aware"]["kernels"] == first
    assert first <= rows["asap", "stream-aware"]["kernels"] <= unfused
    for row in rows.values():
        assert row["makespan_ms"] > 0 and not row.get("error")
