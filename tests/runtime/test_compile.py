"""The torch.compile backend gives eager's outputs and really runs the streamplan executor."""

from __future__ import annotations

import warnings

import pytest
import torch

import streamplan.runtime as rt
import streamplan.runtime.cpu as cpu


class Branches(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.b = torch.nn.Conv2d(3, 8, 1)
        self.bn = torch.nn.BatchNorm2d(16)

    def forward(self, x):
        y = torch.cat([torch.relu(self.a(x)), torch.sigmoid(self.b(x))], dim=1)
        return self.bn(y).mean(dim=(2, 3))


class MultiOut(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        first, second = torch.split(h, 4, dim=1)
        return torch.tanh(first) * 2, second.reshape(-1), x.t()


@pytest.fixture
def spy(monkeypatch):
    calls = []
    original = cpu.execute_cpu

    def spying(graph, schedule, env, **kw):
        calls.append((len(graph.nodes), schedule.policy))
        return original(graph, schedule, env, **kw)

    monkeypatch.setattr(cpu, "execute_cpu", spying)
    torch._dynamo.reset()
    return calls


@pytest.mark.parametrize("module_cls,shape", [(Branches, (2, 3, 8, 8)), (MultiOut, (3, 8))])
def test_backend_matches_eager(spy, module_cls, shape) -> None:
    torch.manual_seed(0)
    module = module_cls().eval()
    x = torch.randn(shape)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no fallback
        ref = module(x)
        out = torch.compile(module, backend=rt.backend(policy="asap"))(x)
    ok, max_abs, _ = rt.compare_outputs(rt.compare._flat_tensors(out), rt.compare._flat_tensors(ref))
    assert ok, max_abs
    assert spy and spy[0][1] == "asap"


def test_registered_by_name_and_zoo_model(spy) -> None:
    from streamplan.zoo.squeezenet import build

    module, (x,) = build(1)
    x = x[:, :, :64, :64].contiguous()
    with torch.no_grad():
        ref = module.eval()(x)
        out = torch.compile(module, backend="streamplan")(x)
    ok, max_abs, _ = rt.compare_outputs((out,), (ref,))
    assert ok, max_abs
    assert spy and spy[0][1] == "nimble" and spy[0][0] > 40


def test_falls_back_with_one_warning(monkeypatch) -> None:
    import streamplan.runtime.compile_backend as cb
    from streamplan.schedule import registry

    def broken(graph, policy, ctx=None):
        from streamplan.errors import ScheduleError

        raise ScheduleError("no schedule today")

    monkeypatch.setattr(registry, "make_schedule", broken)
    monkeypatch.setattr(cb, "_WARNED", set())
    torch._dynamo.reset()
    module = MultiOut().eval()
    x = torch.randn(3, 8)
    with (
        torch.no_grad(),
        pytest.warns(RuntimeWarning, match="streamplan: falling back to eager for .*no schedule"),
    ):
        out = torch.compile(module, backend=rt.backend())(x)
    assert torch.equal(out[2], x.t())


def test_own_fx_converter_fallback(spy, monkeypatch) -> None:
    import streamplan.runtime.compile_backend as cb
    from streamplan.runtime.fx_convert import fx_to_graph

    monkeypatch.setattr(cb, "_to_graph", lambda gm: fx_to_graph(gm, name="fx"))
    torch.manual_seed(0)
    module = MultiOut().eval()
    x = torch.randn(3, 8)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        ref = module(x)
        out = torch.compile(module, backend=rt.backend(policy="wavefront"))(x)
    ok, max_abs, _ = rt.compare_outputs(tuple(out), tuple(ref))
    assert ok and spy, max_abs


def test_training_runs_forward_and_backward_graphs_and_matches_eager(spy) -> None:
    """A training loop (forward, loss, backward, SGD with momentum) under the backend: AOTAutograd
    hands over a forward and a backward graph, both run by the executor, and after three steps
    the parameters are eager's, bit for bit."""
    import copy

    torch.manual_seed(0)
    module = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(288, 4),
    )
    reference = copy.deepcopy(module)
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 4, (4,))
    compiled = torch.compile(module, backend=rt.backend(policy="asap"))
    pairs = [
        (compiled, torch.optim.SGD(module.parameters(), lr=0.1, momentum=0.9)),
        (reference, torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no fallback, forward or backward
        for _ in range(3):
            for model, optimizer in pairs:
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
    for (name, a), (_, b) in zip(module.named_parameters(), reference.named_parameters(), strict=True):
        assert torch.equal(a, b), name
    assert len(spy) >= 6 and {p for _, p in spy} == {"asap"}  # a forward and a backward per step
