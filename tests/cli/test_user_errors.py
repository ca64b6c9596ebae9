"""Bad input is a user error everywhere: exit 2, one or two lines, nothing half-written, and
under ``--json`` an error object on stdout that a strict JSON parser accepts."""

from __future__ import annotations

import json
import os
import stat

import pytest

from helpers.cli import assert_user_error, cli, sp
from streamplan.errors import ScheduleError


def strict_json(text: str):
    """``json.loads`` that refuses NaN and Infinity, as strict parsers (and other languages) do."""

    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def assert_json_error(r, kind: str | None = None, *fragments: str) -> dict:
    assert r.returncode == 2, r
    err = strict_json(r.stdout)["error"]
    assert set(err) == {"kind", "message", "where", "hint"}
    if kind:
        assert err["kind"] == kind, err
    for f in fragments:
        assert f in err["message"] + (err["hint"] or ""), err
    return err


# -- policies ---------------------------------------------------------------------------------
def test_compare_with_an_unknown_policy_is_a_user_error():
    assert_user_error(cli("compare", "seed-example2", "--policies", "sequential,fastest"), "fastest")
    r = cli("compare", "seed-example2", "--policies", "sequential,fastest", "--json")
    assert_json_error(r, "ScheduleError", "fastest", "asap")


@pytest.mark.parametrize("policies", ["", " , ", ","])
def test_compare_with_no_policy_is_a_user_error(policies):
    assert_user_error(cli("compare", "seed-example2", "--policies", policies), "no policy")


@pytest.mark.parametrize("command", ["plot", "compare"])
def test_every_command_taking_policies_checks_them(command, tmp_path):
    args = ["-o", str(tmp_path / "p.png")] if command == "plot" else []
    assert_user_error(cli(command, "seed-example2", "--policies", "asap,nope", *args), "nope")
    assert not (tmp_path / "p.png").exists()


def test_compare_json_is_strict_when_a_policy_fails(monkeypatch):
    """A policy that fails on a graph gives a row with an error and null figures, never NaN."""
    import streamplan.fusion.plan as plan

    real = plan.make_schedule

    def failing(graph, policy, ctx=None):
        if policy == "asap":
            raise ScheduleError("asap cannot schedule this graph")
        return real(graph, policy, ctx)

    monkeypatch.setattr(plan, "make_schedule", failing)
    r = cli("compare", "seed-example2", "--policies", "sequential,asap", "--json")
    assert r.returncode == 0, r
    rows = {row["policy"]: row for row in strict_json(r.stdout)["rows"]}
    assert rows["asap"]["makespan_ms"] is None and rows["asap"]["memory"] is None
    assert "cannot schedule" in rows["asap"]["error"]
    assert rows["sequential"]["makespan_ms"] > 0


def test_emit_json_writes_null_for_nan_and_infinities(capsys):
    from streamplan.cli.common import emit_json

    emit_json({"a": float("nan"), "b": [float("inf"), -float("inf"), 1.5], "c": (1, 2)})
    assert strict_json(capsys.readouterr().out) == {"a": None, "b": [None, None, 1.5], "c": [1, 2]}


# -- errors as JSON -----------------------------------------------------------------------------
def test_json_errors_are_objects_on_stdout():
    r = cli("memory", "no_such_model", "--json")
    assert_json_error(r, "ModelSpecError", "no_such_model")
    assert "error:" in r.stderr  # the person at the terminal still reads it
    r = cli("memory", "seed-example2", "--max-streams", "0", "--json")
    assert_json_error(r, "UsageError")


# -- output files -------------------------------------------------------------------------------
def _leftovers(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp") or p.name.startswith("."))


def test_output_path_that_is_a_directory(tmp_path):
    d = tmp_path / "out"
    d.mkdir()
    for force in ([], ["--force"]):
        assert_user_error(cli("schedule", "seed-example2", "-o", str(d), *force), "directory")
    assert list(d.iterdir()) == [] and _leftovers(tmp_path) == []


def test_output_path_in_proc_or_a_missing_directory():
    r = cli("schedule", "seed-example2", "-o", "/proc/version", "--force")
    assert_user_error(r, "cannot create a file in /proc")
    assert "internal error" not in r.stderr
    assert_user_error(cli("schedule", "seed-example2", "-o", "/nonexistent-dir/s.json"), "does not exist")


def test_output_path_that_is_not_a_regular_file(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert_user_error(cli("export", "seed-example2", "-o", str(fifo), "--force"), "not a regular file")
    assert stat.S_ISFIFO(fifo.stat().st_mode) and _leftovers(tmp_path) == []


def test_existing_output_kept_without_force_replaced_whole_with_it(tmp_path):
    p = tmp_path / "s.json"
    p.write_text("mine")
    p.chmod(0o640)
    assert_user_error(cli("schedule", "seed-example2", "-o", str(p)), "already exists", "--force")
    assert p.read_text() == "mine"
    r = cli("schedule", "seed-example2", "-o", str(p), "--force")
    assert r.returncode == 0, r
    assert strict_json(p.read_text())["launch_order"] and stat.S_IMODE(p.stat().st_mode) == 0o640
    assert _leftovers(tmp_path) == []


def test_a_failed_write_leaves_nothing_behind(tmp_path, monkeypatch):
    from streamplan.errors import StreamplanError
    from streamplan.files import write_output

    target = tmp_path / "x.json"
    target.write_text("before")

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(StreamplanError, match="No space left"):
        write_output(target, "after", force=True)
    assert target.read_text() == "before" and _leftovers(tmp_path) == []


# -- plot formats -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "suffix,magic", [(".png", b"\x89PNG"), (".svg", b"<?xml"), (".SVG", b"<?xml"), (".pdf", b"%PDF")]
)
def test_plot_writes_the_format_its_name_says(tmp_path, suffix, magic):
    out = tmp_path / f"m{suffix}"
    r = cli("plot", "seed-example2", "--policies", "sequential,asap", "-o", out)
    assert r.returncode == 0, r
    data = out.read_bytes()
    assert data.startswith(magic), data[:20]
    if suffix.lower() == ".svg":
        assert b"<svg" in data[:2000]


@pytest.mark.parametrize("name", ["m.gif", "m.jpg", "m"])
def test_plot_refuses_formats_it_cannot_write(tmp_path, name):
    assert_user_error(cli("plot", "seed-example2", "-o", tmp_path / name), ".png")
    assert list(tmp_path.iterdir()) == []


def test_subprocess_errors_are_one_line_and_exit_2(tmp_path):
    """The in-process runner is what most tests use; a real process must behave the same."""
    d = tmp_path / "d"
    d.mkdir()
    assert_user_error(sp("schedule", "seed-example2", "-o", str(d), "--force"), "directory")
    r = sp("compare", "seed-example2", "--policies", "fastest", "--json")
    assert_json_error(r, "ScheduleError", "fastest")


BUDGET_COMMANDS = [
    ["schedule", "--policy", "budget"],
    ["simulate", "--policy", "budget"],
    ["compare", "--policies", "sequential,budget"],
    ["memory", "--policy", "budget"],
    ["explain", "--policy", "budget"],
    ["plot", "--policies", "budget", "-o", "never.png"],
    ["remat"],
]


@pytest.mark.parametrize("command", BUDGET_COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize(
    "budget, said",
    [
        ("1e30", "larger than any device"),
        ("1e25", "larger than any device"),
        ("1e300x", "not a usable factor"),
    ],
)
def test_an_absurd_budget_is_one_clear_line_in_every_command(command, budget, said, tmp_path):
    """A budget no device holds is a typing slip: exit 2 naming it as typed (never a 300-digit
    number), before any model is loaded, in every command that takes a budget."""
    args = [a if a != "never.png" else tmp_path / a for a in command[1:]]
    r = cli(command[0], "random:6", *args, "--budget", budget)
    assert_user_error(r, said, repr(budget))
    assert not any(len(word) > 40 for word in r.stderr.split()), r.stderr
    assert not (tmp_path / "never.png").exists()
