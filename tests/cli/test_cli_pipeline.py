"""CLI end to end: schedule -> verify -> simulate -> compare -> memory -> explain -> plot -> run."""

import json

import pytest

from helpers.cli import assert_user_error, cli

MiB = 1 << 20


def test_schedule_save_verify_and_tamper(tmp_path):
    path = tmp_path / "s.json"
    r = cli("schedule", "seed-example2", "--policy", "asap", "-o", str(path))
    assert r.returncode == 0, r.stderr
    sched = json.loads(path.read_text())
    assert {"launch_order", "streams", "waits"} <= set(sched)
    assert len(set(sched["streams"].values())) == 2 and sched["waits"]
    r = cli("verify", "seed-example2", str(path))
    assert r.returncode == 0 and "valid" in r.stdout
    # delete a needed wait: verify must fail (exit 1) and name the unordered pair
    removed = sched["waits"].pop()
    path.write_text(json.dumps(sched))
    r = cli("verify", "seed-example2", str(path))
    assert r.returncode == 1
    assert f"{removed['after']} -> {removed['before']}" in r.stderr or (
        removed["after"] in r.stderr and removed["before"] in r.stderr
    )
    r = cli("verify", "seed-example2", str(path), "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["valid"] is False


def test_verify_malformed_schedule(tmp_path):
    p = tmp_path / "s.json"
    p.write_text('{"launch_order": ["a"]}')
    assert_user_error(cli("verify", "seed-example2", str(p)), "malformed schedule")


def test_unknown_policy_and_device():
    assert_user_error(cli("schedule", "seed-example2", "--policy", "fastest"), "fastest")
    assert_user_error(cli("simulate", "seed-example2", "--device", "tpu9"), "tpu9")


def test_simulate_with_trace(tmp_path):
    trace = tmp_path / "t.json"
    r = cli(
        "simulate", "seed-example2", "--policy", "asap", "--device", "v100", "--trace", str(trace), "--json"
    )
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["streams"] == 2 and d["makespan_ms"] > 0
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(1 for e in events if e.get("ph") == "X") == 6


def test_compare_json_rows_and_seed_answer():
    r = cli("compare", "seed-example2", "--policies", "sequential,asap", "--json")
    assert r.returncode == 0, r.stderr
    rows = {row["policy"]: row for row in json.loads(r.stdout)["rows"]}
    for row in rows.values():
        for key in ("policy", "streams", "events", "makespan_ms"):
            assert key in row
        mem = row["memory"]
        for key in (
            "host_order_peak_bytes",
            "worst_case_peak_bytes",
            "simulated_peak_bytes",
            "torch_cuda",
            "arena_bytes",
            "arena_lower_bound_bytes",
        ):
            assert key in mem
        assert {"allocated_peak_bytes", "reserved_peak_bytes"} <= set(mem["torch_cuda"])
    seq, asap = rows["sequential"]["memory"], rows["asap"]["memory"]
    assert seq["host_order_peak_bytes"] == seq["worst_case_peak_bytes"]["upper"] == 3 * MiB
    assert seq["arena_bytes"] == 3 * MiB
    assert asap["host_order_peak_bytes"] == 3 * MiB
    assert asap["worst_case_peak_bytes"] == {"lower": 4 * MiB, "upper": 4 * MiB, "exact": True}
    assert asap["arena_bytes"] == asap["arena_lower_bound_bytes"] == 5 * MiB
    assert 3 * MiB <= asap["simulated_peak_bytes"] <= 4 * MiB


def test_memory_and_explain_text():
    r = cli("memory", "seed-example2", "--policy", "asap")
    assert r.returncode == 0, r.stderr
    assert "host-order" in r.stdout and "torch-cuda" in r.stdout and "<- peak" in r.stdout
    r = cli("explain", "seed-example2", "--policy", "asap", "--vs", "sequential")
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "five tensors" in text and "pairwise" in text and "at most four" in text
    assert "kernel-bound" in text or "launch-bound" in text


def test_explain_warns_when_nothing_can_overlap():
    r = cli("explain", "random:1", "--policy", "asap", "--vs", "asap")
    assert r.returncode == 0, r.stderr
    assert "warning" in r.stdout.lower() or "cannot" in r.stdout.lower()


def test_plot_writes_png(tmp_path):
    out = tmp_path / "m.png"
    r = cli("plot", "seed-example2", "--policies", "sequential,asap", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert_user_error(cli("plot", "seed-example2", "-o", str(out)), "already exists")


def test_run_cpu_chaos_json():
    r = cli("run", "seed-example2", "--policy", "asap", "--on", "cpu", "--chaos", "--repeat", "2", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["matches_eager"] is True and d["max_abs_error"] == 0
    for key in (
        "matches_eager",
        "max_abs_error",
        "measured_ms",
        "measured_peak_bytes",
        "predicted_peak_bytes",
        "tracked_peak_bytes",
        "predicted_tracked_peak_bytes",
    ):
        assert key in d
    assert 3 * MiB <= d["measured_peak_bytes"] <= 4 * MiB
    assert d["tracked_peak_bytes"] >= d["measured_peak_bytes"]  # the kernels' own allocations


@pytest.mark.slow
def test_run_inception_asap_chaos():
    r = cli("run", "inception_v3", "--policy", "asap", "--on", "cpu", "--chaos", "--repeat", "1", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["matches_eager"] is True


@pytest.mark.slow
def test_inception_ios_beats_wavefront_beats_sequential():
    r = cli(
        "compare",
        "inception_v3",
        "--device",
        "v100",
        "--batch",
        "1",
        "--no-memory",
        "--json",
        "--policies",
        "sequential,wavefront,ios",
    )
    assert r.returncode == 0, r.stderr
    ms = {row["policy"]: row["makespan_ms"] for row in json.loads(r.stdout)["rows"]}
    assert ms["ios"] <= ms["wavefront"] <= ms["sequential"]


@pytest.mark.slow
def test_demo_answers_the_seed_question():
    r = cli("demo")
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "five tensors" in text and "inception_v3" in text and "ios" in text
    assert "run for real" in text and "outputs match eager: yes" in text  # part 3 ran the schedule


def test_measured_table_times_the_simulation_and_adds_op_memory(tmp_path):
    """A measured table (what bench/gpu_validate.py writes) replaces op costs and adds op scratch."""
    from streamplan.cost.measured import MeasuredTable, op_signature
    from streamplan.models import load_model

    g = load_model("seed-example2")
    ops = {op_signature(g, n): 1.0 for n in g.nodes}  # every op 1 ms
    scratch = {op_signature(g, g.nodes[0]): 64 * MiB}
    table = tmp_path / "m.json"
    MeasuredTable("h200", ops, scratch).save(table)
    r = cli("simulate", "seed-example2", "--policy", "sequential", "--measured", str(table), "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["measured"] == {"hits": len(g.nodes), "misses": 0}
    assert d["makespan_ms"] >= len(g.nodes) * 1.0
    base = json.loads(cli("memory", "seed-example2", "--json").stdout)
    r = cli("memory", "seed-example2", "--measured", str(table), "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["measured"]["op_memory"] is True
    grown = d["allocators"]["torch-cuda"]["allocated_peak_bytes"]
    assert grown >= base["allocators"]["torch-cuda"]["allocated_peak_bytes"] + 64 * MiB
    assert d["allocators"]["exact"] == base["allocators"]["exact"]  # the graph's tensors only
    table.write_text('{"schema": "streamplan.measured", "ops": {"x": "fast"}}')
    assert_user_error(cli("memory", "seed-example2", "--measured", str(table)), "malformed")


def test_run_trace_has_measured_and_simulated(tmp_path):
    from streamplan.models import load_model

    path = tmp_path / "t.json"
    r = cli("run", "seed-example2", "--policy", "asap", "--repeat", "1", "--trace", str(path))
    assert r.returncode == 0, r.stderr
    events = json.loads(path.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert any("measured" in n for n in names) and any("simulated" in n for n in names)
    ops = [e for e in events if e["ph"] == "X"]
    assert len(ops) == 2 * len(load_model("seed-example2").nodes)
    again = cli("run", "seed-example2", "--trace", str(path))  # never overwritten without --force
    assert again.returncode == 2 and "already exists" in again.stderr


def test_run_a_saved_schedule_and_refuse_a_broken_one(tmp_path):
    path = tmp_path / "s.json"
    assert cli("schedule", "seed-example2", "--policy", "nimble", "-o", str(path)).returncode == 0
    r = cli("run", "seed-example2", "--schedule", str(path), "--chaos", "--repeat", "1", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["policy"] == "nimble" and d["matches_eager"] is True and d["num_streams"] == 2
    sched = json.loads(path.read_text())
    sched["waits"] = []  # the verifier refuses it before anything runs
    path.write_text(json.dumps(sched))
    assert_user_error(cli("run", "seed-example2", "--schedule", str(path)), "not ordered")
