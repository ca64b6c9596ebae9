"""``calibrate`` for real on the CPU runtime (quick mode), on CUDA behind the fake backend, and its CLI."""

from __future__ import annotations

import json
import types

import pytest

from helpers import fake_cuda
from helpers.cli import assert_user_error, cli
from streamplan.cost import AnalyticCostModel, get_device, simulate
from streamplan.cost.fit import fit_profile
from streamplan.runtime.backend_api import TorchCudaBackend
from streamplan.runtime.calibrate import measure_device
from streamplan.runtime.calibrate_graphs import is_prep


@pytest.fixture(scope="module")
def cpu_measurements():
    return measure_device("cpu", quick=True, repeat=2)


def test_cpu_calibration_times_every_benchmark_op_through_the_runtime(cpu_measurements):
    m = cpu_measurements
    kernels = [n for n in m.op_graph.nodes if not is_prep(n)]
    assert set(m.op_ms) == {n.id for n in kernels}
    assert all(ms > 0 for ms in m.op_ms.values())
    assert m.target == "cpu" and m.cores >= 1 and 0 < m.tiny_op_ms and 0 < m.per_op_ms < 5.0
    assert m.view_ms is not None and 0 < m.view_ms < 5.0  # a view costs the runtime host work too
    # the steadiness probe, once at the start and after each of the three phases
    assert len(m.probe_ms) == 4 and all(t > 0 for t in m.probe_ms) and m.drift >= 0
    purposes = {r.purpose for r in m.runs}
    assert purposes == {"overhead", "events", "contention"}
    assert all(r.measured_ms > 0 and r.times_ms for r in m.runs)
    # every co-run on several streams is paired with the same graph on one stream
    for r in m.runs:
        if r.purpose == "contention" and r.pair:
            base = m.run(r.pair)
            assert base.graph is r.graph and base.schedule.num_streams == 1 < r.schedule.num_streams


def test_the_fitted_cpu_profile_predicts_the_calibration_runs(cpu_measurements):
    fit = fit_profile(cpu_measurements)
    p = fit.profile
    assert p.calibration.is_measured and p.calibration.fixed_holds_lock and p.launch_overhead_ms == 0
    assert p.calibration.latency_error is not None and p.calibration.speedup_error is not None
    assert dict(p.calibration.sources)["kernel_fixed_ms"].startswith("a chain")
    assert p.calibration.view_ms == cpu_measurements.view_ms and "transposes" in p.calibration.source(
        "view_ms"
    )
    chain = cpu_measurements.run("chain")
    simulated = simulate(chain.graph, chain.schedule, AnalyticCostModel(p)).makespan_ms
    # a chain of one-element ops costs what every op pays, once per op (no timing assertion: the
    # shared test machine's load makes measured times vary several-fold)
    assert simulated == pytest.approx(len(chain.graph.nodes) * p.kernel_fixed_ms, rel=0.2)
    assert {f.name for f in fit.runs} == {r.name for r in cpu_measurements.runs}
    assert p.calibration.drift == pytest.approx(cpu_measurements.drift)


@pytest.fixture
def fake_gpu(monkeypatch):
    import torch

    fake_cuda.install(monkeypatch)
    monkeypatch.setattr(TorchCudaBackend, "device", "cpu")  # the tensors stay on the CPU
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda *a: types.SimpleNamespace(multi_processor_count=132)
    )


def test_cuda_calibration_runs_end_to_end_behind_the_fake_backend(fake_gpu):
    m = measure_device("cuda", quick=True, repeat=2, sizes="cpu")  # the fake computes on the CPU
    assert m.target == "cuda" and m.cores == 132 and "H100" in m.device_name
    assert m.launch_ms > 0 and m.kernel_ms > 0 and m.graph_node_ms > 0 and m.graph_launch_ms >= 0
    assert {r.cuda_graphs for r in m.runs} == {False, True}  # every run with and without CUDA graphs
    assert len(m.probe_ms) == 4 and all(t > 0 for t in m.probe_ms)  # the probe at every phase there too
    p = fit_profile(m).profile
    assert p.name == "h100-calibrated" and p.has_cuda_graphs and p.sms == 132
    assert p.calibration.contention.sm == 1.0  # a GPU op's own time already uses the whole device
    assert p.launch_overhead_ms == pytest.approx(m.launch_ms)


def test_calibrate_cli_writes_a_profile_every_command_accepts(tmp_path):
    out = tmp_path / "mine.json"
    r = cli("calibrate", "--on", "cpu", "--quick", "--repeat", "2", "-o", out, "--json")
    assert r.returncode == 0, r
    summary = json.loads(r.stdout)
    assert summary["output"] == str(out) and summary["target"] == "cpu"
    profile = get_device(str(out))
    assert profile.name == "cpu-calibrated" and profile.calibration.measured
    r = cli("simulate", "random:40", "--device", out, "--policy", "asap", "--json")
    assert r.returncode == 0, r
    builtin = cli("simulate", "random:40", "--device", "cpu", "--policy", "asap", "--json")
    assert json.loads(r.stdout)["makespan_ms"] != json.loads(builtin.stdout)["makespan_ms"]
    r = cli("explain", "random:40", "--device", out)
    assert r.returncode == 0 and " ± " in r.stdout, r
    # an existing output is kept unless --force, before anything is measured
    assert_user_error(cli("calibrate", "--on", "cpu", "--quick", "-o", out), "already exists", "--force")
    assert get_device(str(out)) == profile


def test_calibrate_cli_refuses_unknown_targets_and_missing_gpus(tmp_path):
    assert_user_error(cli("calibrate", "--on", "tpu", "-o", tmp_path / "p.json"), "tpu")
    import torch

    if not torch.cuda.is_available():
        assert_user_error(cli("calibrate", "--on", "cuda", "-o", tmp_path / "p.json"), "CUDA")
    assert not (tmp_path / "p.json").exists()


def test_calibrate_warns_when_the_machine_drifted_and_keeps_json_clean(
    tmp_path, monkeypatch, cpu_measurements
):
    """A machine whose speed moved while it was measured: the profile is still written, the
    terminal says how much it moved and what to do, on stderr (``--json`` stays parseable)."""
    from dataclasses import replace

    import streamplan.runtime.calibrate as calibrate_module

    drifting = replace(cpu_measurements, probe_ms=(10.0, 10.5, 16.0, 10.2))  # measured once, for the module
    monkeypatch.setattr(calibrate_module, "measure_device", lambda *a, **k: drifting)
    out = tmp_path / "busy.json"
    r = cli("calibrate", "--on", "cpu", "--quick", "--repeat", "1", "-o", out, "--json")
    assert r.returncode == 0, r
    summary = json.loads(r.stdout)
    assert summary["measured"]["drift"] == pytest.approx(6.0 / 10.35)
    assert "varied by 58%" in r.stderr and "calibrate again when the machine is quiet" in r.stderr
    assert get_device(str(out)).calibration.drift == pytest.approx(6.0 / 10.35)
    r = cli("calibrate", "--on", "cpu", "--quick", "--repeat", "1", "-o", out, "--force")
    assert (
        r.returncode == 0 and "steadiness: a small fixed model took" in r.stdout and "drift 58%" in r.stdout
    ), r
