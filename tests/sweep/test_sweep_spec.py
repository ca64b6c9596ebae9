"""Axes, jobs, sweep files and rows: what a sweep asks and how its rows are written (no workers)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from streamplan.app.analysis import compare_policies
from streamplan.app.context import make_context
from streamplan.errors import FileFormatError, ModelSpecError, StreamplanError
from streamplan.ir.includes import Includes
from streamplan.sweep import AXES, Job, SweepRow, SweepSettings, SweepSpec, load_sweep_file
from streamplan.sweep.export import to_csv, to_dataframe, to_parquet
from streamplan.sweep.worker import capture, run_job


def test_jobs_are_the_product_of_the_axes_models_outermost():
    spec = SweepSpec.of(
        models="seed-example1,random:10", batches=[1, 8], policies="sequential, asap", devices=["h100"]
    )
    jobs = spec.jobs()
    assert len(jobs) == len(spec) == 2 * 2 * 2
    assert [j.model for j in jobs[:4]] == ["seed-example1"] * 4
    assert {j.device for j in jobs} == {"h100"} and {j.max_streams for j in jobs} == {8}
    assert len({j.key() for j in jobs}) == len(jobs)
    # jobs that share a graph share a request (one capture), whatever their policy or device
    assert len({j.request() for j in jobs}) == 4


def test_a_job_is_a_frozen_value_of_its_axes():
    job = Job("random:10", batch=2, policy="ios")
    assert [f.name for f in dataclasses.fields(Job)] == [a.name for a in AXES]
    assert Job.from_dict(job.to_dict()) == job and hash(job) == hash(Job.from_dict(job.to_dict()))
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.policy = "asap"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("axes", "fragment"),
    [
        ({"models": "nope"}, "unknown model 'nope'"),
        ({"models": "random:0"}, "bad random model spec"),
        ({"models": "missing.py:f"}, "does not exist"),
        ({"models": "seed-example1", "batches": "0"}, "batch size must be an integer >= 1"),
        ({"models": "seed-example1", "policies": "fastest"}, "unknown policy"),
        ({"models": "seed-example1", "devices": "tpu"}, "unknown device 'tpu'"),
        ({"models": "seed-example1", "dtypes": "int3"}, "unsupported dtype"),
        ({"models": "seed-example1", "max_streams": "x"}, "max_streams must be an integer"),
        ({"models": "seed-example1", "speed": "1"}, "unknown sweep axis 'speed'"),
        ({"models": ""}, "no models given"),
        ({}, "a sweep needs models"),
    ],
)
def test_bad_axis_values_are_user_errors(axes, fragment):
    with pytest.raises(StreamplanError, match=fragment):
        SweepSpec.of(**axes)


def test_a_sweep_file_gives_axes_and_settings(tmp_path):
    (tmp_path / "m.py").write_text("def f(): pass\n")
    path = tmp_path / "sweep.toml"
    path.write_text(
        'models = ["seed-example1", "m.py:f"]\nbatches = [1, 8]\npolicy = "asap"\n'
        "[settings]\nmemory = false\ntime_limit_s = 2\n"
    )
    axes, settings = load_sweep_file(path)
    assert axes == {"model": ["seed-example1", f"{tmp_path}/m.py:f"], "batch": [1, 8], "policy": ["asap"]}
    assert settings == SweepSettings(memory=False, time_limit_s=2)
    assert len(SweepSpec.of(**axes)) == 4


def test_a_yaml_sweep_file_reads_like_toml(tmp_path):
    pytest.importorskip("yaml")
    path = tmp_path / "sweep.yaml"
    path.write_text("models: [seed-example1, random:10]\ndevices: h100\nsettings: {include_params: true}\n")
    axes, settings = load_sweep_file(path)
    assert axes == {"model": ["seed-example1", "random:10"], "device": ["h100"]}
    assert settings == SweepSettings(includes=Includes(params=True))


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("models = [", "not valid TOML"),
        ('speeds = ["x"]', "unknown sweep axis"),
        ('models = ["a"]\n[settings]\nfast = true', "unknown sweep setting 'fast'"),
        ('models = ["a"]\n[settings]\nmemory = "yes"', "must be true or false"),
        ('models = ["a"]\n[settings]\ntime_limit_s = nan', "'time_limit_s' must be a number > 0"),
        ('models = ["a"]\n[settings]\ntime_limit_s = inf', "'time_limit_s' must be a number > 0"),
        ('models = ["a"]\n"../../x" = [1]', "unknown sweep axis '../../x'"),
        ('models = "a"\n[settings]\nseed = "__import__(\'os\')"', "'seed' must be an integer"),
    ],
)
def test_bad_sweep_files_are_user_errors(tmp_path, text, fragment):
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises((FileFormatError, ModelSpecError), match=fragment):
        load_sweep_file(path)


def test_a_row_holds_the_compare_row_of_its_job():
    """The row's figures are those ``compare`` gives for the same graph, policy and device."""
    job = Job("random:30:1", device="h100", policy="asap")
    row = run_job(job, SweepSettings(), capture(job.request()))
    graph = job.request().load()
    seq, asap = compare_policies(graph, ["sequential", "asap"], make_context(device="h100"))
    expected = asap.to_dict()
    for timing in ("search_time_s",):
        expected.pop(timing)
    got = {k: v for k, v in row.to_dict().items() if k in expected}
    assert got == json.loads(json.dumps(expected))
    assert row.speedup == pytest.approx(seq.makespan_ms / asap.makespan_ms)
    assert row.graph == graph.name and row.ok and row.attempts == 1
    assert row.worst_case_peak_bytes == asap.memory.worst_case.upper_bytes


def test_rows_round_trip_through_json_and_tables():
    job = Job("seed-example2", policy="wavefront")
    ok = run_job(job, SweepSettings(), None)  # no shared capture: the job loads its model itself
    bad = SweepRow.failed(Job("seed-example2", policy="ios"), SweepSettings(), "it broke", attempts=2)
    for row in (ok, bad):
        again = SweepRow.from_dict(json.loads(json.dumps(row.to_dict())))
        assert again == row and again.comparable() == row.comparable()
    assert bad.error == "it broke" and bad.makespan_ms is None and bad.attempts == 2
    lines = to_csv([ok, bad]).splitlines()
    header = lines[0].split(",")
    assert len(lines) == 3 and "memory.worst_case_peak_bytes.upper" in header and "settings.memory" in header
    df = to_dataframe([ok, bad])
    assert list(df["policy"]) == ["wavefront", "ios"] and df["error"].iloc[1] == "it broke"
    pq = pytest.importorskip("pyarrow.parquet")
    import io

    table = pq.read_table(io.BytesIO(to_parquet([ok, bad])))
    assert table.num_rows == 2 and table.column("makespan_ms")[0].as_py() == ok.makespan_ms


def test_a_model_that_fails_to_load_is_its_rows_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    job = Job(str(bad), policy="asap")
    shared = capture(job.request())
    assert shared.graph_json is None and "not valid JSON" in shared.error
    row = run_job(job, SweepSettings(), shared)
    assert not row.ok and row.error.startswith("loading the model failed:") and row.makespan_ms is None
    assert run_job(job, SweepSettings(), None).error is not None  # loading it in the job fails alike
