"""Every combination of ``--fusion`` x ``--schedule`` x ``--train`` on compare, memory, explain and run.

A saved schedule keeps the fusion it was made with: ``compare`` shows it beside the policies
of any fusion mode (its speedup over the baseline of its own mode); ``memory``, ``explain``
and ``run`` take it under ``--fusion none`` or its own mode, and refuse another fused mode in
one line. Nothing crashes.
"""

from __future__ import annotations

import json

import pytest

from helpers.cli import assert_user_error, cli

MODEL = "random:12:3"
MODES = ("none", "first", "stream-aware")
OTHER = {"none": "first", "first": "none", "stream-aware": "first"}  # a saved schedule of another mode
COMMANDS = ("compare", "memory", "explain", "run")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A saved asap schedule per (training step or not, fusion mode)."""
    root = tmp_path_factory.mktemp("schedules")
    out = {}
    for train in (False, True):
        for mode in MODES:
            path = root / f"{'train' if train else 'infer'}-{mode}.json"
            args = ["schedule", MODEL, "--policy", "asap", "--fusion", mode, "-o", path]
            r = cli(*args, *(["--train"] if train else []))
            assert r.returncode == 0, r
            out[train, mode] = path
    return out


def _args(command: str, mode: str, schedule, train: bool) -> list:
    args = [command, MODEL, "--fusion", mode, "--json"]
    if schedule is not None:
        args += ["--schedule", schedule]
    if command == "compare":
        args += ["--policies", "sequential,asap", "--no-memory"]
    elif schedule is None:
        args += ["--policy", "asap"]
    if command == "run":
        args += ["--repeat", "1"]
    return args + (["--train"] if train else [])


@pytest.mark.parametrize("train", [False, True], ids=["inference", "train"])
@pytest.mark.parametrize("schedule", [None, "same", "other"], ids=["policy", "saved-same", "saved-other"])
@pytest.mark.parametrize("mode", MODES)
def test_every_command_takes_every_combination(saved, mode, schedule, train):
    made = {None: None, "same": mode, "other": OTHER[mode]}[schedule]
    path = None if made is None else saved[train, made]
    for command in COMMANDS:
        r = cli(*_args(command, mode, path, train))
        refused = command != "compare" and made is not None and mode != "none" and made != mode
        if refused:
            assert_user_error(r, f"made with --fusion {made}, not {mode}")
            continue
        assert r.returncode == 0, (command, r)
        d = json.loads(r.stdout)
        if command == "compare":
            rows = {(x["policy"], x["fusion"]): x for x in d["rows"]}
            assert ("asap", mode) in rows and ("sequential", mode) in rows
            if path is not None:
                row = rows[str(path), made]  # the saved schedule runs the kernels it was made for
                assert row["speedup"] and row["makespan_ms"] > 0
                if made == mode:  # the policy's own schedule, saved: the same row
                    assert row["makespan_ms"] == pytest.approx(rows["asap", mode]["makespan_ms"])
        else:
            ran = made if made is not None else mode
            fusion = d.get("fusion_mode", d.get("fusion"))
            assert fusion == ran or (command == "explain" and isinstance(fusion, dict)), (command, d.keys())
            if command == "run":
                assert d["matches_eager"]
