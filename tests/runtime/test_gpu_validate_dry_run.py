"""bench/gpu_validate.py must not first fail on a lent GPU: its CPU dry run goes end to end."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "gpu_validate.py"


@pytest.mark.slow
def test_dry_run_writes_rows_and_a_measured_table(tmp_path, capsys, monkeypatch):
    spec = importlib.util.spec_from_file_location("gpu_validate", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gpu_validate", module)  # its dataclasses look it up
    spec.loader.exec_module(module)
    out, table = tmp_path / "gv.json", tmp_path / "measured.json"
    from streamplan.cost import get_device, profile_to_json

    profile = tmp_path / "mine.json"  # a profile file, as `streamplan calibrate` writes, for the predictions
    profile.write_text(profile_to_json(get_device("cpu").replace(name="cpu-mine")))
    argv = ["--dry-run", "--out", str(out), "--measured-out", str(table), "--profile", str(profile)]
    assert module.main(argv) == 0
    result = json.loads(out.read_text())
    rows = [r for r in result["rows"] if "measured_ms" in r]
    assert {r["policy"] for r in rows} == {"sequential", "nimble"}
    assert all(r["matches_eager"] for r in rows)
    assert all(r["predicted_allocated_op_memory_bytes"] >= r["predicted_allocated_bytes"] for r in rows)
    assert result["summary"]["rows_failed"] == 0
    from streamplan.cost.measured import MeasuredTable

    measured = MeasuredTable.load(table)
    assert measured.ops and measured.scratch_bytes and measured.device == "cpu-mine"
    printed = capsys.readouterr().out
    assert "squeezenet" in printed  # the table is printed last
    budget = [r for r in result["budget_rows"] if "measured_ms" in r]
    assert budget and all(
        r["matches_eager"] and r["worst_case_upper_bytes"] <= r["budget_bytes"] for r in budget
    )
    assert "budget schedules" in printed
