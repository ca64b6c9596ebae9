"""The journal: one synced line per row, torn last lines cut off, rows known by their job's axes."""

from __future__ import annotations

import json

import pytest

from streamplan.errors import FileFormatError
from streamplan.files import OutputFileError
from streamplan.sweep import Job, Journal, SweepMismatchError, SweepRow, SweepSettings, read_rows

S = SweepSettings()


def _row(policy: str, error: str | None = None) -> SweepRow:
    job = Job("seed-example1", policy=policy)
    if error:
        return SweepRow.failed(job, S, error)
    return SweepRow(job, S, {"policy": policy, "makespan_ms": 1.5, "speedup": 1.0}, graph="seed-example1")


def test_rows_are_appended_one_line_each_and_read_back(tmp_path):
    path = tmp_path / "r.jsonl"
    with Journal.open(path, S) as j:
        assert j.rows == {}
        j.append(_row("asap"))
        j.append(_row("ios", "it broke"))
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line)["settings"] == S.to_dict() for line in lines)
    assert [r.job.policy for r in read_rows(path)] == ["asap", "ios"]
    with Journal.open(path, S) as j:
        assert set(j.rows) == {_row("asap").key, _row("ios").key}


def test_a_torn_last_line_is_cut_off_on_reopening(tmp_path):
    path = tmp_path / "r.jsonl"
    with Journal.open(path, S) as j:
        j.append(_row("asap"))
    whole = path.read_bytes()
    path.write_bytes(whole + json.dumps(_row("ios").to_dict()).encode()[:40])  # a crash mid-write
    with Journal.open(path, S) as j:
        assert j.dropped_torn_line and list(j.rows) == [_row("asap").key]
        j.append(_row("ios"))
    assert path.read_bytes().startswith(whole) and len(read_rows(path)) == 2


def test_other_settings_or_other_files_are_refused(tmp_path):
    path = tmp_path / "r.jsonl"
    with Journal.open(path, S) as j:
        j.append(_row("asap"))
    with pytest.raises(SweepMismatchError, match="memory True there, False now"):
        Journal.open(path, SweepSettings(memory=False))
    with Journal.open(path, SweepSettings(memory=False), restart=True) as j:  # restart discards them
        assert j.rows == {}
    assert path.read_text() == ""
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"a": 1}\n')
    with pytest.raises(FileFormatError, match="not a sweep row"):
        Journal.open(notes, S)
    notes.write_text("hello\n")
    with pytest.raises(FileFormatError, match="line 1 is not JSON"):
        Journal.open(notes, S)
    with pytest.raises(FileFormatError, match="line 1 is not JSON"):
        Journal.open(notes, S, restart=True)  # not even to start again
    assert notes.read_text() == "hello\n"  # never touched


def test_retry_failed_drops_the_failed_rows(tmp_path):
    path = tmp_path / "r.jsonl"
    with Journal.open(path, S) as j:
        j.append(_row("asap"))
        j.append(_row("ios", "it broke"))
    with Journal.open(path, S, retry_failed=True) as j:
        assert list(j.rows) == [_row("asap").key]
        j.append(_row("ios"))
    rows = read_rows(path)
    assert [r.ok for r in rows] == [True, True] and len(path.read_text().splitlines()) == 2


def test_two_sweeps_cannot_write_one_file(tmp_path):
    path = tmp_path / "r.jsonl"
    with Journal.open(path, S):
        with pytest.raises(OutputFileError, match="another sweep is writing this file"):
            Journal.open(path, S)
    Journal.open(path, S).close()  # free again once the first is closed
