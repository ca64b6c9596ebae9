"""Generated modules: readable and stable text, ruff-clean, eager's outputs, and (under the fake
CUDA backend) stream, event and record_stream calls that the independent launch-log checker accepts."""

from __future__ import annotations

import functools
import sys

import pytest
import torch

from helpers.codegen import assert_ruff_clean, generated_class, graph_leaves, import_source, stream_calls
from helpers.launch_log import check_launch_log
from helpers.matrix import pairs
from helpers.models import RUNNABLE_MODELS, small_model
from helpers.shared import stored_schedule
from streamplan.codegen import generate_module, launch_plan
from streamplan.ir.schedule import StreamSchedule
from streamplan.models import load_model
from streamplan.runtime import compare_outputs
from streamplan.runtime.compare import _flat_tensors, _graph_order_reference
from streamplan.schedule import make_schedule
from streamplan.schedule.context import ScheduleContext
from streamplan.schedule.events import with_derived_waits
from streamplan.schedule.registry import POLICIES

CTX = ScheduleContext(max_streams=4, time_limit_s=2.0)
MULTI_STREAM = ("asap", "nimble", "ios")
# Generated code differs by the graph's structure and by the schedule's shape, not by which model
# meets which policy: each zoo model is generated under two policies and each policy on two zoo
# models (and every policy on the two graph-only models), each model's stream calls are checked
# under one multi-stream policy and each of those policies on several models
# (helpers.matrix; STREAMPLAN_FULL_MATRIX=1 runs every pair).
EAGER_PAIRS = pairs(RUNNABLE_MODELS, POLICIES, per_model=2)
STREAM_PAIRS = pairs(RUNNABLE_MODELS, MULTI_STREAM, per_model=1)
GRAPH_ONLY = ("seed-example2", "random:40")


@functools.cache
def _schedule(name: str, policy: str) -> StreamSchedule:
    graph = small_model(name)[2] if name in RUNNABLE_MODELS else load_model(name)
    return stored_schedule(graph, policy, CTX)  # the runtime's zoo tests run the same schedules


def _example2_two_streams():
    graph = load_model("seed-example2")
    streams = {"a": 0, "b": 0, "d": 0, "c": 1, "e": 1, "f": 0}
    return graph, with_derived_waits(graph, ("a", "b", "c", "d", "e", "f"), streams, "two")


def test_seed_example_reads_as_the_schedule_says(tmp_path) -> None:
    graph, schedule = _example2_two_streams()
    source = generate_module(graph, schedule, model="seed-example2")
    body = source[source.index("def forward") :].splitlines()
    expected = [
        "a = aten.atan.default(x)",
        "event_a = _event(s0)",
        "b = aten.atan.default(a)",
        "_wait(s1, event_a)",  # c waits for a's event, and a is handed to s1's allocator queue
        "_hand_over(a, s1)",
        "c = aten.atan.default(a)",
        "del a",  # a's last reader was launched: the host-order free
        "d = aten.atan.default(b)",
        "del b",
        "e = aten.atan.default(c)",
        "event_e = _event(s1)",
        "del c",
        "_wait(s0, event_e)",
        "_hand_over(e, s0)",
        "f = aten.add.Tensor(d, e)",
        "del d, e",
        "_join(caller, (s0, s1))",
        "_hand_over(f, caller)",  # the output, made on s0, is read on the caller's stream
        "return f",
    ]
    code = [ln.strip() for ln in body if ln.strip() and not ln.strip().startswith(("#", "with"))]
    assert code[-len(expected) :] == expected
    withs = [ln.strip() for ln in body if ln.strip().startswith("with")]
    assert withs == ["with _on(s0):", "with _on(s1):", "with _on(s0):", "with _on(s1):", "with _on(s0):"]
    cls = generated_class(import_source(source, tmp_path))
    inputs, _ = graph_leaves(graph)
    ok, _, _ = compare_outputs((cls()(*inputs),), _graph_order_reference(graph, 0))
    assert ok


def test_plan_mirrors_the_cuda_executor() -> None:
    graph, schedule = _example2_two_streams()
    plan = launch_plan(graph, schedule)
    assert [s.record_on_stream for s in plan.steps] == [(), (), ("a",), (), (), ("e",)]
    assert [s.frees for s in plan.steps] == [(), (), ("a",), ("b",), ("c",), ("d", "e")]
    assert plan.outputs_to_caller == ("f",)


def test_same_input_gives_the_same_bytes(tmp_path) -> None:
    from streamplan.app.codegen import codegen_policy

    graph = load_model("squeezenet")
    schedule = make_schedule(graph, "nimble", CTX)
    first = codegen_policy(graph, schedule, CTX, model="squeezenet").source
    second = codegen_policy(load_model("squeezenet"), schedule, CTX, model="squeezenet").source
    assert first == second
    assert "predicted torch.cuda.max_memory_allocated" in first
    module = import_source(first, tmp_path)
    assert module.PREDICTIONS["makespan_ms"] > 0
    assert module.PREDICTIONS["max_memory_allocated_bytes"] > graph.param_bytes()


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """The zoo model x policy pairs the tests below run, and every policy on two graph-only
    models, generated into one folder."""
    folder = tmp_path_factory.mktemp("generated")
    sources = {}
    wanted = dict.fromkeys([*EAGER_PAIRS, *STREAM_PAIRS, *((n, p) for n in GRAPH_ONLY for p in POLICIES)])
    for name, policy in wanted:
        graph = small_model(name)[2] if name in RUNNABLE_MODELS else load_model(name)
        sources[name, policy] = generate_module(graph, _schedule(name, policy), model=name)
    for (name, policy), text in sources.items():
        (folder / f"{name.replace(':', '_')}_{policy}.py").write_text(text)
    return folder, sources


@pytest.mark.slow
def test_generated_files_are_ruff_clean(generated) -> None:
    folder, _ = generated
    assert_ruff_clean(folder)


@pytest.mark.slow
@pytest.mark.parametrize("name,policy", EAGER_PAIRS)
def test_zoo_module_matches_eager(generated, tmp_path, name: str, policy: str) -> None:
    module, inputs, _ = small_model(name)
    model = generated_class(import_source(generated[1][name, policy], tmp_path))()
    model.load_weights(module)
    with torch.no_grad():
        ok, max_abs, _ = compare_outputs(_flat_tensors(model(*inputs)), _flat_tensors(module(*inputs)))
    assert ok, f"{name} {policy}: max abs error {max_abs}"


@pytest.mark.parametrize("name", GRAPH_ONLY)
@pytest.mark.parametrize("policy", ["sequential", "nimble", "ios"])
def test_graph_only_module_matches_graph_order(tmp_path, name: str, policy: str) -> None:
    graph = load_model(name)
    model = generated_class(import_source(generate_module(graph, _schedule(name, policy)), tmp_path))()
    inputs, weights = graph_leaves(graph)
    model.load_weights(weights)
    with torch.no_grad():
        ok, _, _ = compare_outputs(_flat_tensors(model(*inputs)), _graph_order_reference(graph, 0))
    assert ok


@pytest.mark.slow
@pytest.mark.parametrize("name,policy", STREAM_PAIRS)
def test_stream_calls_satisfy_the_schedule(generated, tmp_path, monkeypatch, name: str, policy: str) -> None:
    module, inputs, graph = small_model(name)
    schedule = _schedule(name, policy)
    model = generated_class(import_source(generated[1][name, policy], tmp_path))()
    model.load_weights(module)
    calls, outputs, launched = stream_calls(monkeypatch, graph, schedule, model, list(inputs))
    assert launched == len(schedule.launch_order)
    assert check_launch_log(graph, calls) == []
    # one fake stream per schedule stream, and every op on its own
    on = {c[2]: c[1] for c in calls if c[0] == "launch"}
    pairs = {(schedule.streams[op], stream) for op, stream in on.items()}
    assert len(pairs) == schedule.num_streams == len({s for _, s in pairs})
    assert sum(1 for c in calls if c[0] == "wait_event") >= len(schedule.waits)
    with torch.no_grad():
        ok, _, _ = compare_outputs(_flat_tensors(outputs), _flat_tensors(module(*inputs)))
    assert ok


def test_checker_catches_a_missing_wait_or_hand_over(tmp_path, monkeypatch) -> None:
    """The fake-CUDA check is not vacuous: drop a wait, or a record_stream, and it objects."""
    graph, schedule = _example2_two_streams()
    inputs, _ = graph_leaves(graph)
    unsafe = schedule.replace(waits=tuple(w for w in schedule.waits if w.after != "a"))
    model = generated_class(import_source(generate_module(graph, unsafe), tmp_path))()
    calls, _, _ = stream_calls(monkeypatch, graph, schedule, model, inputs)
    assert any(
        "c reads a but may start before its producer a ends" in p for p in check_launch_log(graph, calls)
    )
    source = generate_module(graph, schedule).replace("            _hand_over(a, s1)\n", "")
    model = generated_class(import_source(source, tmp_path))()
    calls, _, _ = stream_calls(monkeypatch, graph, schedule, model, inputs)
    assert any("no record_stream first" in p for p in check_launch_log(graph, calls))


def test_module_runs_under_torch_compile(tmp_path) -> None:
    """One graph, no fallback (fullgraph): the stream helpers trace on the CPU."""
    module, inputs, graph = small_model("squeezenet")
    model = generated_class(
        import_source(generate_module(graph, _schedule("squeezenet", "nimble")), tmp_path)
    )()
    model.load_weights(module)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    with torch.no_grad():
        ok, _, _ = compare_outputs(_flat_tensors(compiled(*inputs)), _flat_tensors(module(*inputs)))
    assert ok


def test_onnx_model_module_matches_onnxruntime(tmp_path) -> None:
    pytest.importorskip("onnxruntime")
    from helpers.onnx_models import exported
    from streamplan.runtime.onnx_reference import onnx_run_inputs

    graph = load_model(str(exported("nasnet_a", fold=True)[0]))  # pads, slices, folded constants
    model = generated_class(
        import_source(generate_module(graph, make_schedule(graph, "asap", CTX)), tmp_path)
    )()
    inputs, weights, reference = onnx_run_inputs(graph)
    embedded = graph.meta.get("constant_values", {})  # written into the module's CONSTANTS
    model.load_weights({graph.param_names[v]: t for v, t in weights.items() if v not in embedded})
    with torch.no_grad():
        ok, max_abs, _ = compare_outputs(_flat_tensors(model(*inputs)), reference)
    assert ok, max_abs


@pytest.mark.slow
def test_gpu_check_dry_run(tmp_path, capsys, monkeypatch) -> None:
    """bench/gpu_codegen.py must not first fail on a lent GPU: its CPU dry run goes end to end."""
    import importlib.util
    import json
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "bench" / "gpu_codegen.py"
    spec = importlib.util.spec_from_file_location("gpu_codegen", script)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gpu_codegen", module)
    spec.loader.exec_module(module)
    out = tmp_path / "gc.json"
    assert module.main(["--dry-run", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["policy"] for r in rows] == ["sequential", "nimble"] and all(r["matches_eager"] for r in rows)
    assert "generated modules (codegen) on cpu" in capsys.readouterr().out
