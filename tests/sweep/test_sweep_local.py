"""The local engine: every row once, resumable after an interruption, failures and dead workers recorded."""

from __future__ import annotations

import multiprocessing

import pytest

from helpers.sweeps import SMALL_MODELS, SMALL_POLICIES, model_file, squeezenet_json
from streamplan.sweep import LocalEngine, SweepInterrupted, SweepSpec, read_rows, run_sweep


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    models = [*SMALL_MODELS, str(squeezenet_json(folder))]
    return SweepSpec.of(models=models, policies=SMALL_POLICIES, devices="v100,h100")


@pytest.fixture(scope="module")
def full(spec, tmp_path_factory):
    """The uninterrupted sweep, written to a file."""
    path = tmp_path_factory.mktemp("full") / "full.jsonl"
    return run_sweep(spec, output=path, engine=LocalEngine(2))


def _by_key(rows):
    return {r.key: r.comparable() for r in rows}


def test_every_job_gives_one_row(spec, full):
    assert full.total == len(spec) == 4 * 4 * 2 and full.ran == full.total and full.complete
    assert all(r.ok for r in full.rows), [r.error for r in full.rows if r.error]
    assert [r.job for r in full.rows] == spec.jobs()  # the result is in job order
    written = read_rows(full.output)
    assert len(written) == len(spec) and _by_key(written) == _by_key(full.rows)
    ios = {r.job.device: r for r in full.rows if r.job.model == "random:24:1" and r.job.policy == "ios"}
    assert ios["v100"].speedup > 1.0 and ios["v100"].makespan_ms != ios["h100"].makespan_ms


def test_an_interrupted_sweep_resumes_to_the_same_rows(spec, full, tmp_path):
    path = tmp_path / "r.jsonl"

    def stop_after_seven(step, done, total):
        if done == 7:
            raise KeyboardInterrupt  # as Ctrl-C would, in the parent, between two rows

    with pytest.raises(SweepInterrupted) as stopped:
        run_sweep(spec, output=path, engine=LocalEngine(2), progress=stop_after_seven)
    assert len(stopped.value.result.rows) == 7 == len(read_rows(path))
    assert not multiprocessing.active_children()  # the workers were stopped, not left running
    with path.open("ab") as f:  # and a crash tore the line being written
        f.write(b'{"model": "seed-exam')
    again = run_sweep(spec, output=path, engine=LocalEngine(2))
    assert again.skipped == 7 and again.ran == len(spec) - 7
    lines = path.read_text().splitlines()
    assert len(lines) == len(spec)  # no duplicate and no torn row
    assert _by_key(read_rows(path)) == _by_key(full.rows)
    assert run_sweep(spec, output=path, engine=LocalEngine(2)).ran == 0  # a finished sweep runs nothing


def test_without_shared_captures_the_rows_are_the_same(spec, full):
    alone = run_sweep(spec, engine=LocalEngine(2), share_captures=False)
    assert _by_key(alone.rows) == _by_key(full.rows)


def test_a_failing_model_and_a_dying_worker_are_recorded_and_the_sweep_goes_on(tmp_path):
    model_file(tmp_path)
    spec = SweepSpec.of(
        models=["seed-example1", f"{tmp_path}/models.py:broken", f"{tmp_path}/models.py:dies"],
        policies="sequential,asap",
    )
    result = run_sweep(spec, output=tmp_path / "r.jsonl", engine=LocalEngine(2))
    rows = {(r.job.model.rpartition(":")[2], r.job.policy): r for r in result.rows}
    assert result.complete and result.failed == 4
    assert rows["seed-example1", "asap"].ok  # (it may have run twice: in flight when a worker died)
    broken = rows["broken", "asap"]
    assert "this model is broken" in broken.error and broken.attempts == 1
    died = rows["dies", "sequential"]
    assert "died while loading" in died.error and "again when it was retried" in died.error
    assert died.attempts == 2 and died.makespan_ms is None
    assert len(read_rows(tmp_path / "r.jsonl")) == len(spec)


@pytest.mark.slow  # the retry captures a torch model in a fresh worker (imports torch there)
def test_a_worker_that_dies_once_is_retried(tmp_path):
    model_file(tmp_path)
    spec = SweepSpec.of(models=f"{tmp_path}/models.py:dies_once", policies="sequential,asap")
    result = run_sweep(spec, engine=LocalEngine(1))
    assert (tmp_path / "died-once").exists()  # its first try did die
    assert all(r.ok for r in result.rows) and result.rows[1].speedup is not None
