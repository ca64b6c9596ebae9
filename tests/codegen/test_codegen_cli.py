"""``streamplan codegen`` from the command line: files, stdout, saved schedules, bad input."""

from __future__ import annotations

import json

from helpers.cli import assert_user_error, cli


def test_codegen_writes_the_same_file_twice(tmp_path) -> None:
    first, second = tmp_path / "a.py", tmp_path / "b.py"
    for path in (first, second):
        r = cli("codegen", "seed-example2", "--policy", "asap", "-o", str(path))
        assert r.returncode == 0, r.stderr
        assert f"wrote {path}" in r.stderr
    assert first.read_bytes() == second.read_bytes()
    text = first.read_text()
    assert "class SeedExample2Asap(torch.nn.Module):" in text and "import streamplan" not in text
    assert_user_error(cli("codegen", "seed-example2", "-o", str(first)), "already exists")


def test_codegen_to_stdout_and_json(tmp_path) -> None:
    r = cli("codegen", "seed-example1", "--policy", "nimble", "--class-name", "Diamond")
    assert r.returncode == 0 and r.stdout.startswith('"""seed-example1 under the nimble schedule')
    assert "class Diamond(torch.nn.Module):" in r.stdout
    r = cli("codegen", "seed-example1", "--policy", "nimble", "-o", str(tmp_path / "d.py"), "--json")
    result = json.loads(r.stdout)
    assert result["class_name"] == "SeedExample1Nimble" and result["predictions"]["makespan_ms"] > 0


def test_codegen_of_a_saved_schedule(tmp_path) -> None:
    schedule = tmp_path / "s.json"
    assert cli("schedule", "seed-example2", "--policy", "wavefront", "-o", str(schedule)).returncode == 0
    r = cli("codegen", "seed-example2", "--schedule", str(schedule), "-o", str(tmp_path / "w.py"))
    assert r.returncode == 0, r.stderr
    assert "under the wavefront schedule" in (tmp_path / "w.py").read_text()
    assert_user_error(
        cli("codegen", "seed-example2", "--schedule", str(schedule), "-o", str(schedule)), "input"
    )


def test_codegen_bad_input() -> None:
    assert_user_error(
        cli("codegen", "seed-example2", "--class-name", "not a name"), "cannot name a Python class"
    )
    assert_user_error(cli("codegen", "seed-example2", "--policy", "fastest"), "unknown policy")
    assert_user_error(cli("codegen", "no_such_model"), "unknown model")
