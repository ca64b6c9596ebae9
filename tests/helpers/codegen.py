"""Importing generated modules, and logging what one asks of CUDA (under the fake ``torch.cuda``).

``stream_calls`` runs a generated module with the fake CUDA backend of ``fake_cuda``
installed and records, in the launch-log format that ``launch_log.check_launch_log``
reads, every event record and wait (``wait_stream`` included), every
``record_stream``, and every ATen op the module calls, with the fake stream current
at the call. It knows nothing of how the module was generated: ops are identified
by matching the calls one by one against the schedule's launch order (the op names
must agree; a fused kernel is its parts' calls, a folded batch-norm not called, and the
kernel is launched at its first part's call, every other part on the same stream), and a
tensor handed to ``record_stream`` is named by the value whose
op last produced a tensor in its storage.
"""

from __future__ import annotations

import importlib.util
import itertools
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from helpers import fake_cuda
from streamplan.ir.fused import folded_pair, fused_parts, is_fused
from streamplan.ir.graph import Graph, Node
from streamplan.ir.schedule import StreamSchedule

_counter = itertools.count()


def import_source(source: str, directory: Path, stem: str = "generated") -> ModuleType:
    """Write ``source`` to ``directory/stem_<n>.py`` and import it."""
    path = directory / f"{stem}_{next(_counter)}.py"
    path.write_text(source)
    name = f"_sp_generated_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def generated_class(module: ModuleType) -> type[torch.nn.Module]:
    """The one ``nn.Module`` class a generated module defines."""
    found = [
        v
        for v in vars(module).values()
        if isinstance(v, type) and issubclass(v, torch.nn.Module) and v.__module__ == module.__name__
    ]
    assert len(found) == 1, found
    return found[0]


def graph_leaves(graph: Graph, seed: int = 0) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    """The seeded inputs and weights (by state_dict name) the graph-order reference runs on."""
    from streamplan.runtime.interpret import initial_env

    env = initial_env(graph, None, None, seed=seed)
    weights = {graph.param_names.get(v, v): env[v] for v in graph.params if v in env}
    return [env[v] for v in graph.inputs], weights


class _Launches(TorchFunctionMode):
    def __init__(self, graph: Graph, schedule: StreamSchedule, calls: list, owner: dict[int, str]):
        super().__init__()
        self.graph = graph
        self.order = [(op, part) for op in schedule.launch_order for part in _calls_of(graph.node(op))]
        self.calls = calls
        self.owner = owner
        self.k = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not isinstance(func, torch._ops.OpOverload):
            return func(*args, **kwargs)
        assert self.k < len(self.order), f"more op calls than launches ({func})"
        op, node = self.order[self.k]
        assert str(func) == node.op, f"call {self.k}: called {func}, the schedule launches {node.op}"
        stream = fake_cuda._STATE.current.name
        if self.k == 0 or self.order[self.k - 1][0] != op:
            self.calls.append(("launch", stream, op))
            self.stream = stream
        assert stream == self.stream, f"a part of {op} runs on {stream}, the kernel on {self.stream}"
        self.k += 1
        result = func(*args, **kwargs)
        produced = [result] if isinstance(result, torch.Tensor) else list(result)
        if "output_index" in node.attrs and not isinstance(result, torch.Tensor):
            produced = [result[i] for i in node.attrs["output_index"]]
        for vid, t in zip(node.outputs, produced, strict=False):
            if isinstance(t, torch.Tensor) and t.numel() and vid in self.graph.values:
                self.owner[t.untyped_storage().data_ptr()] = self.graph.storage_of(vid)
        return result


def _calls_of(node: Node) -> list[Node]:
    """The op calls a launch makes: the node itself, or a fused kernel's parts (a folded
    batch-norm's output comes from the convolution, which is called instead)."""
    if not is_fused(node):
        return [node]
    fold = folded_pair(node)
    parts = {p.id: p for p in fused_parts(node)}
    calls = []
    for p in parts.values():
        if fold is not None and p.id == fold[1]:
            continue
        if fold is not None and p.id == fold[0]:
            p = Node(p.id, p.op, p.inputs, parts[fold[1]].outputs[:1], {})
        calls.append(p)
    return calls


def stream_calls(
    monkeypatch, graph: Graph, schedule: StreamSchedule, model: torch.nn.Module, inputs: list[Any]
) -> tuple[list[tuple[Any, ...]], Any, int]:
    """Run ``model`` (a generated module) with streams on the fake CUDA backend.

    Returns the launch log, the outputs, and how many op calls matched launches.
    """
    fake_cuda.install(monkeypatch)
    calls: list[tuple[Any, ...]] = []
    owner: dict[int, str] = {}
    ids = itertools.count()
    record, wait = fake_cuda.FakeEvent.record, fake_cuda.FakeStream.wait_event

    def logged_record(event, stream=None):
        record(event, stream)
        event.log_id = next(ids)
        calls.append(("record_event", event.stream.name, event.log_id, ""))

    def logged_wait(stream, event):
        wait(stream, event)
        calls.append(("wait_event", stream.name, event.log_id, ""))

    def logged_record_stream(tensor, stream):
        assert isinstance(stream, fake_cuda.FakeStream)
        calls.append(("record_stream", stream.name, owner.get(tensor.untyped_storage().data_ptr(), "?")))

    monkeypatch.setattr(fake_cuda.FakeEvent, "record", logged_record)
    monkeypatch.setattr(fake_cuda.FakeStream, "wait_event", logged_wait)
    monkeypatch.setattr(torch.Tensor, "record_stream", logged_record_stream)
    model.use_streams = True
    mode = _Launches(graph, schedule, calls, owner)
    with torch.no_grad(), mode:
        outputs = model(*inputs)
    return calls, outputs, len({op for op, _ in mode.order[: mode.k]})


def assert_ruff_clean(path: Path) -> None:
    """Generated code (a file or a folder of them) passes ruff's checks and its formatter as
    they are, without the project's configuration."""
    ruff = [sys.executable, "-m", "ruff"]
    check = subprocess.run(
        [*ruff, "check", "--isolated", "--select", "E,F,W,I,B,UP", str(path)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout[-3000:]
    fmt = subprocess.run(
        [*ruff, "format", "--isolated", "--check", str(path)], capture_output=True, text=True
    )
    assert fmt.returncode == 0, fmt.stdout[-3000:] + fmt.stderr[-3000:]
