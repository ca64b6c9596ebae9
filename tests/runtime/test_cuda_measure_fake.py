"""``measure_cuda`` end to end on the CPU, against a fake ``torch.cuda`` that enforces capture rules."""

from __future__ import annotations

import pytest

from helpers import fake_cuda
from streamplan.models import load_model
from streamplan.runtime import compare_outputs
from streamplan.runtime.backend_api import TorchCudaBackend
from streamplan.runtime.compare import _graph_order_reference
from streamplan.runtime.cuda import StreamExecutor, measure_cuda
from streamplan.runtime.execute import _run_cuda
from streamplan.runtime.interpret import initial_env
from streamplan.schedule import make_schedule
from streamplan.schedule.context import ScheduleContext


@pytest.fixture
def fake(monkeypatch):
    state = fake_cuda.install(monkeypatch)
    monkeypatch.setattr(TorchCudaBackend, "device", "cpu")  # the tensors stay on the CPU
    return state


@pytest.mark.parametrize("cuda_graph", [False, True])
@pytest.mark.parametrize("policy", ["sequential", "asap"])
def test_measure_cuda_runs_warms_up_captures_and_times(fake, policy, cuda_graph):
    graph = load_model("random:40")
    schedule = make_schedule(graph, policy, ScheduleContext(max_streams=4))
    m = measure_cuda(
        graph, schedule, initial_env(graph, None, None), repeat=3, warmup=2, cuda_graph=cuda_graph
    )
    ok, _, _ = compare_outputs(m.outputs, _graph_order_reference(graph, 0))
    assert ok
    assert len(m.times_ms) == 3 and all(t >= 0 for t in m.times_ms)
    assert min(m.max_memory_allocated_bytes, m.max_memory_reserved_bytes, m.resident_bytes, m.peak_bytes) >= 0
    # the peak stats are reset once, after the warm-up, and (without graphs) the workspaces cleared first
    assert fake.calls.count("reset_peak_memory_stats") == 1
    assert ("clear_cublas" in fake.calls) is (not cuda_graph)


def test_chaos_delays_and_run_result(fake):
    graph = load_model("random:40")
    schedule = make_schedule(graph, "nimble", ScheduleContext(max_streams=4))
    result = _run_cuda(
        graph,
        schedule,
        initial_env(graph, None, None),
        device="cuda",
        repeat=2,
        warmup=1,
        cuda_graph=False,
        chaos_seed=0,
    )
    ok, _, _ = compare_outputs(result.outputs, _graph_order_reference(graph, 0))
    assert ok and result.device == "cuda" and result.chaos is True
    assert result.max_memory_allocated_bytes == 0  # what the fake reports


def test_the_fake_refuses_an_unjoined_capture(fake, monkeypatch):
    """A host loop that forgot to join a side stream fails at the end of capture, as on a GPU."""
    import torch

    graph = load_model("random:40")
    schedule = make_schedule(graph, "asap", ScheduleContext(max_streams=4))
    assert schedule.num_streams > 1
    executor = StreamExecutor(graph, schedule, TorchCudaBackend())
    backend = executor.backend
    real_wait = backend.wait_event

    def skip_joins(stream, event):
        if stream is torch.cuda.current_stream():
            return  # the caller's stream never waits: no joins
        real_wait(stream, event)

    monkeypatch.setattr(backend, "wait_event", skip_joins)
    with pytest.raises(RuntimeError, match="not joined back"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            executor.launch(initial_env(graph, None, None))


def test_the_fake_refuses_a_sync_during_capture(fake):
    import torch

    with pytest.raises(RuntimeError, match="synchronize is not allowed"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            torch.cuda.synchronize()


def test_compile_backend_drives_the_cuda_executor(fake, monkeypatch):
    """``streamplan.backend(device="cuda")`` launches through the stream executor (here the fake)."""
    import torch

    import streamplan

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # dynamo itself must stay on the CPU
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()
    x = torch.randn(4, 16)
    compiled = torch.compile(model, backend=streamplan.backend(policy="asap", device="cuda"))
    before = fake.default.work
    with torch.no_grad():
        out = compiled(x)
        ref = model(x)
    torch._dynamo.reset()
    assert torch.allclose(out, ref, atol=1e-5)
    assert fake.default.work > before  # the fork/join events went through torch.cuda (the fake)


def test_run_command_reports_cuda_measurements_beside_op_memory_predictions(monkeypatch, tmp_path):
    """The CUDA branch of ``streamplan run``'s report, fed a measured run (no GPU here)."""
    import io
    import json

    import torch
    from rich.console import Console

    import streamplan.runtime as runtime
    from streamplan.app.context import make_context
    from streamplan.app.run import profile_for, run_model
    from streamplan.frontends.builder import GraphBuilder
    from streamplan.ir.serialize import save
    from streamplan.report.views import run_lines
    from streamplan.runtime.compare import Comparison, MeasuredOpMemory
    from streamplan.runtime.measure import RunResult

    mib = 1 << 20
    b = GraphBuilder("two_matmuls")
    x = b.input("x", (512, 512))
    w = b.param("w", (512, 512))
    left, right = b.matmul(x, w, name="left"), b.matmul(b.relu(x, name="r"), w, name="right")
    graph = b.build([b.add(left, right, name="sum")])
    path = tmp_path / "g.json"
    save(graph, path)
    schedule = make_schedule(graph, "asap")
    assert schedule.num_streams == 2

    def fake_run_and_compare(target, policy, **kw):
        assert kw["device"] == "cuda" and kw["track_allocations"]
        result = RunResult(
            outputs=(),
            measured_ms=1.0,
            times_ms=(1.0,),
            measured_peak_bytes=3 * mib,
            device="cuda",
            policy=policy,
            num_streams=2,
            max_memory_allocated_bytes=70 * mib,
            max_memory_reserved_bytes=96 * mib,
        )
        return Comparison(
            graph=graph,
            model="two_matmuls",
            policy=policy,
            device="cuda",
            matches_eager=True,
            max_abs_error=0.0,
            max_rel_error=0.0,
            result=result,
            schedule=schedule,
            op_memory=MeasuredOpMemory(scratch_bytes={}, stream_workspace_bytes=32 * mib),
        )

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    monkeypatch.setattr(runtime, "run_and_compare", fake_run_and_compare)
    report = run_model(str(path), "asap", make_context(device=profile_for("cuda")), target="cuda", repeat=1)
    d = report.to_dict()
    json.dumps(d)
    assert d["profile"] == "h200" and d["prediction_includes_op_memory"] is True
    # both streams run a matmul: two 32 MiB workspaces beside the graph's few MiB
    assert 64 * mib <= d["predicted_max_memory_allocated_bytes"] < 72 * mib
    rel = d["predicted_max_memory_allocated_bytes"] / (70 * mib) - 1
    assert d["allocated_relative_error"] == pytest.approx(rel)
    text = io.StringIO()
    console = Console(file=text, width=250)
    for line in run_lines(report, target="cuda", repeat=1):
        console.print(line)
    assert "max_memory_allocated measured 70.00 MiB" in text.getvalue()
    assert "stream workspaces measured first" in text.getvalue()
