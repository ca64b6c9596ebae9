"""Model specs from the command line: empty models, --batch, Python specs, the measured table
checked before any capture; the same answer from every command."""

from __future__ import annotations

import json

import pytest

from helpers.cli import assert_user_error, cli
from streamplan.ir.serialize import graph_to_dict
from streamplan.models import load_model

MiB = 1 << 20

EMPTY_MODEL = """
import torch

class Shape(torch.nn.Module):
    def forward(self, x):
        return x.shape[0]

def build():
    return Shape(), (torch.randn(2, 3),)
"""


@pytest.fixture(scope="module")
def empty_model(tmp_path_factory):
    p = tmp_path_factory.mktemp("empty") / "shape_only.py"
    p.write_text(EMPTY_MODEL)
    return f"{p}:build"


@pytest.mark.parametrize("command", ["show", "compare", "memory", "explain", "schedule", "run"])
def test_a_model_without_operators_is_refused_the_same_way_everywhere(command, empty_model):
    r = cli(command, empty_model)
    assert_user_error(r, "no operators")
    assert "internal error" not in r.stderr


def test_a_graph_file_without_operators_is_refused(tmp_path):
    d = graph_to_dict(load_model("seed-example2"))
    d["nodes"], d["outputs"] = [], ["x"]
    d["values"] = [v for v in d["values"] if v["id"] == "x"]
    p = tmp_path / "empty.json"
    p.write_text(json.dumps(d))
    assert_user_error(cli("memory", p), "no operators")


def test_batch_rebuilds_the_seed_graphs():
    r = cli("show", "seed-example2", "--batch", "4", "--json")
    assert r.returncode == 0, r
    info = json.loads(r.stdout)
    assert info["input_bytes"] == 4 * MiB and info["activation_bytes"] == 24 * MiB and info["batch"] == 4
    r = cli("compare", "seed-example2", "--batch", "4", "--policies", "sequential,asap", "--json")
    d = json.loads(r.stdout)
    assert d["batch"] == 4
    rows = {row["policy"]: row for row in d["rows"]}
    assert rows["asap"]["memory"]["worst_case_peak_bytes"]["upper"] == 16 * MiB  # 4 units of 4 MiB


def test_batch_is_refused_for_graph_files_and_json_reports_the_batch_used(tmp_path):
    p = tmp_path / "g.json"
    assert cli("export", "seed-example2", "--batch", "2", "-o", p).returncode == 0
    assert_user_error(cli("compare", p, "--batch", "4"), "batch", "export")
    d = json.loads(cli("compare", p, "--policies", "sequential", "--json").stdout)
    assert d["batch"] == 2  # what the file was built at, not a default
    old = json.loads(p.read_text())
    old["meta"].pop("batch")  # a file from before graphs recorded their batch
    p.write_text(json.dumps(old))
    assert json.loads(cli("compare", p, "--policies", "sequential", "--json").stdout)["batch"] is None


@pytest.mark.parametrize("batch", ["0", "-3"])
def test_batch_below_one_is_refused(batch):
    r = cli("show", "seed-example2", "--batch", batch)
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_python_spec_without_a_function_suggests_one(tmp_path):
    f = tmp_path / "specs.py"
    f.write_text("def build():\n    pass\n\ndef other():\n    pass\n")
    r = cli("show", f)
    assert_user_error(r, "specs.py:FUNCTION", f"{f}:build")
    assert_user_error(cli("show", tmp_path / "missing.py"), "FUNCTION")


def test_measured_table_is_checked_before_the_model_is_captured(tmp_path):
    marker = tmp_path / "captured"
    model = tmp_path / "m.py"
    model.write_text(f"def build():\n    open({str(marker)!r}, 'w').close()\n    raise SystemExit('no')\n")
    for command in ("memory", "simulate"):
        assert_user_error(
            cli(command, f"{model}:build", "--measured", tmp_path / "missing.json"), "missing.json"
        )
    assert not marker.exists()


@pytest.mark.parametrize("gib", ["-1", "0", "nan", "inf"])
def test_device_memory_is_refused_in_the_units_typed(gib):
    r = cli("memory", "seed-example2", "--device-memory-gib", gib)
    assert_user_error(r, f"{gib} GiB" if gib not in ("nan", "inf") else "GiB")
    assert "bytes" not in r.stderr


def test_predicted_out_of_memory_heads_the_output_and_exits_3():
    from streamplan.cli.errors import EXIT_OUT_OF_MEMORY

    r = cli("memory", "seed-example2", "--policy", "asap", "--device-memory-gib", "0.003")
    assert r.returncode == EXIT_OUT_OF_MEMORY == 3, r
    assert r.stdout.splitlines()[0].startswith("OUT OF MEMORY")
    r = cli("memory", "seed-example2", "--policy", "asap", "--device-memory-gib", "0.003", "--json")
    assert r.returncode == 3 and json.loads(r.stdout)["out_of_memory"]["op"]
    r = cli("memory", "seed-example2", "--policy", "asap", "--device-memory-gib", "1", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["out_of_memory"] is None


def test_exit_statuses_are_documented():
    from streamplan.cli import errors

    for status in ("0 ", "1 ", "2 ", "3 ", "130"):
        assert f"\n{status}" in errors.__doc__
    r = cli("memory", "--help")
    assert "exit status 3" in " ".join(r.stdout.split())


def test_worst_case_grammar_one_segment(monkeypatch):
    # the position bound settles this small graph without the solver; without it, CP-SAT runs
    # over one segment and the method must say so in the singular
    import streamplan.memory.worst_case as worst_case

    monkeypatch.setattr(worst_case, "POSITION_BOUND_MAX_OPS", 0)
    from streamplan.models import load_model
    from streamplan.schedule.registry import make_schedule

    g = load_model("seed-example2")
    wc = worst_case.worst_case_peak(g, make_schedule(g, "asap"))
    assert wc.method.endswith("over 1 segment"), wc.method
