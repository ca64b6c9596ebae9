"""torch.compile with the streamplan backend on every zoo model: eager's outputs, no fallback."""

from __future__ import annotations

import warnings

import pytest
import torch

import streamplan.runtime as rt
import streamplan.runtime.cpu as cpu
from helpers.models import RUNNABLE_MODELS, shrink
from streamplan.zoo.registry import ZOO


@pytest.mark.slow
@pytest.mark.parametrize("name", RUNNABLE_MODELS)
def test_compiled_zoo_model_matches_eager(name, monkeypatch):
    ran = []
    original = cpu.execute_cpu

    def spying(graph, schedule, env, **kw):
        ran.append(len(graph.nodes))
        return original(graph, schedule, env, **kw)

    monkeypatch.setattr(cpu, "execute_cpu", spying)
    torch._dynamo.reset()
    module, inputs = ZOO[name].load_factory()(1)
    module = module.eval()
    inputs = shrink(name, inputs if isinstance(inputs, tuple) else (inputs,))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("error", message="streamplan: falling back")  # the whole model runs
        ref = rt.compare._flat_tensors(module(*inputs))
        out = rt.compare._flat_tensors(torch.compile(module, backend=rt.backend(policy="asap"))(*inputs))
    torch._dynamo.reset()
    ok, max_abs, _ = rt.compare_outputs(out, ref)
    assert ok, f"{name}: max abs error {max_abs}"
    assert ran and max(ran) > 50  # the model's graph went through the stream executor
