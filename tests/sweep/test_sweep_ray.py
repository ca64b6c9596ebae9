"""The Ray engine: the local engine's rows, failures and dead workers, on a Ray started here.

One Ray session serves the whole module (starting Ray takes seconds).
"""

from __future__ import annotations

import sys

import pytest

from helpers.sweeps import SMALL_MODELS, SMALL_POLICIES, model_file, squeezenet_json
from streamplan.errors import MissingDependencyError
from streamplan.sweep import LocalEngine, RayEngine, SweepSettings, SweepSpec, read_rows, run_sweep

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def ray_session():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_ray_gives_the_rows_of_the_local_engine(ray_session, tmp_path):
    models = [*SMALL_MODELS, str(squeezenet_json(tmp_path))]
    spec = SweepSpec.of(models=models, policies=SMALL_POLICIES, devices="v100,h100")
    local = run_sweep(spec, engine=LocalEngine(2))
    on_ray = run_sweep(spec, output=tmp_path / "ray.jsonl", engine=RayEngine())
    assert on_ray.complete and on_ray.engine == "ray" and on_ray.failed == 0
    assert [r.comparable() for r in on_ray.rows] == [r.comparable() for r in local.rows]
    assert len(read_rows(tmp_path / "ray.jsonl")) == len(spec)
    assert ray.is_initialized()  # a session the engine did not start is left open


def test_ray_records_failures_and_workers_that_die_twice(ray_session, tmp_path):
    model_file(tmp_path)
    spec = SweepSpec.of(
        models=["seed-example1", f"{tmp_path}/models.py:broken", f"{tmp_path}/models.py:dies"],
        policies="asap",
    )
    rows = {r.job.model.rpartition(":")[2]: r for r in run_sweep(spec, engine=RayEngine()).rows}
    assert rows["seed-example1"].ok
    assert "this model is broken" in rows["broken"].error
    assert "died while loading" in rows["dies"].error and rows["dies"].attempts == 2


def test_without_ray_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if it were not installed
    with pytest.raises(MissingDependencyError) as e:
        RayEngine()
    assert "pip install 'streamplan[ray]'" in e.value.hint


@pytest.mark.slow  # a local and a Ray sweep with budget searches
def test_ray_runs_the_training_budget_and_cuda_graph_axes_like_the_local_engine(ray_session, tmp_path):
    spec = SweepSpec.of(
        models="random:12:1",
        policies="sequential,asap,budget",
        budgets="1.2x",
        train="false,true",
        optimizers="sgd",
        cuda_graphs="true",
    )
    settings = SweepSettings(time_limit_s=2)
    local = run_sweep(spec, settings=settings, engine=LocalEngine(2))
    on_ray = run_sweep(spec, settings=settings, output=tmp_path / "ray.jsonl", engine=RayEngine())
    assert on_ray.complete and on_ray.failed == 0 == local.failed and len(spec) == 6
    assert {(r.job.train, r.job.optimizer, r.job.budget) for r in on_ray.rows} == {
        (False, "none", None),
        (False, "none", "1.2x"),
        (True, "sgd", None),
        (True, "sgd", "1.2x"),
    }
    # the budget policy's searches are time-limited (their schedule may differ between two runs
    # on a loaded machine): its rows must fit their budget; every other row is a function of its job
    fixed = [i for i, r in enumerate(local.rows) if r.job.budget is None]
    assert [on_ray.rows[i].comparable() for i in fixed] == [local.rows[i].comparable() for i in fixed]
    sequential = {r.job.train: r.worst_case_peak_bytes for r in on_ray.rows if r.job.policy == "sequential"}
    for r in on_ray.rows:
        if r.job.budget:
            assert r.worst_case_peak_bytes <= 1.2 * sequential[r.job.train] and r.speedup >= 1.0
    assert {r.key for r in read_rows(tmp_path / "ray.jsonl")} == {j.key() for j in spec.jobs()}
