"""The torch zoo: exact published parameter counts, eager forward shapes, capture + verify."""

from __future__ import annotations

import importlib
import importlib.util

import pytest

torch = pytest.importorskip("torch")

from streamplan.zoo import ZOO  # noqa: E402
from streamplan.zoo._layers import param_count  # noqa: E402
from streamplan.zoo.randwire import (  # noqa: E402
    PAPER_C109_PARAM_COUNT,
    PAPER_C109_PUBLISHED,
    build_paper_c109,
    watts_strogatz,
)

# name -> (published parameter count, output shape at batch 1)
EXPECTED = {
    "inception_v3": (23_834_568, (1, 1000)),  # without the aux classifier (27,161,264 with it)
    "squeezenet": (1_248_424, (1, 1000)),
    "googlenet": (6_624_904, (1, 1000)),  # torchvision's variant without the aux classifiers
    "resnet50": (25_557_032, (1, 1000)),
    "nasnet_a": (5_289_978, (1, 1000)),
    "randwire": (62_566_821, (1, 1000)),  # C=154, graph seeds 0-3: ours, no exact published figure
    "bert_base": (109_482_240, (1, 128, 768)),
    "gpt2": (124_439_808, (1, 128, 768)),
}
TORCH_MODELS = [m.name for m in ZOO.values() if m.kind == "torch"]


@pytest.fixture(scope="module", params=sorted(EXPECTED))
def zoo_model(request: pytest.FixtureRequest) -> tuple:
    """(name, module, example_inputs) at batch 1, built once per model; pytest runs every test
    of one model before building the next, so only one model's weights are held at a time."""
    name = request.param
    entry = ZOO[name]
    if entry.requires and importlib.util.find_spec(entry.requires) is None:
        pytest.skip(f"{name} needs {entry.requires}")
    module, inputs = entry.load_factory()(1)
    return name, module, inputs


# Too big to build, run and capture in every test run; its count is checked on its own below.
COUNT_ONLY = {"nasnet_a_large"}


def test_every_torch_model_has_an_expectation() -> None:
    assert sorted(TORCH_MODELS) == sorted([*EXPECTED, *COUNT_ONLY])


def test_parameter_count_is_the_published_one(zoo_model: tuple) -> None:
    name, module, _ = zoo_model
    assert param_count(module) == EXPECTED[name][0]
    assert not module.training


def test_eager_forward_shape(zoo_model: tuple) -> None:
    name, module, inputs = zoo_model
    with torch.no_grad():
        out = module(*inputs)
    if not isinstance(out, torch.Tensor):  # transformers: a ModelOutput
        out = out.last_hidden_state
    assert tuple(out.shape) == EXPECTED[name][1]
    assert torch.isfinite(out).all()


def test_factories_are_deterministic() -> None:
    a, xa = ZOO["squeezenet"].load_factory()(1)
    b, xb = ZOO["squeezenet"].load_factory()(1)
    assert torch.equal(xa[0], xb[0])
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)


def test_batch_reaches_the_example_inputs() -> None:
    _, inputs = ZOO["resnet50"].load_factory()(3)
    assert inputs[0].shape == (3, 3, 224, 224)


@pytest.mark.parametrize("n,seed", [(16, 0), (32, 1), (32, 7), (10, 3)])
def test_watts_strogatz_shape_and_determinism(n: int, seed: int) -> None:
    edges = watts_strogatz(n, 4, 0.75, seed)
    assert edges == watts_strogatz(n, 4, 0.75, seed)
    assert len(edges) == n * 4 // 2  # rewiring keeps the edge count
    assert len(set(edges)) == len(edges)
    assert all(0 <= u < v < n for u, v in edges)
    degree = [0] * n
    for u, v in edges:
        degree[u] += 1
        degree[v] += 1
    assert min(degree) >= 2  # every node keeps the edges it rewires from its own end


def test_watts_strogatz_p0_is_the_ring_lattice() -> None:
    edges = watts_strogatz(8, 4, 0.0, 0)
    ring = sorted({tuple(sorted((u, (u + d) % 8))) for u in range(8) for d in (1, 2)})
    assert edges == ring


def test_randwire_c109_is_close_to_the_paper() -> None:
    module, _ = build_paper_c109(1)
    count = param_count(module)
    assert count == PAPER_C109_PARAM_COUNT
    # Exact agreement is impossible: the count depends on the paper's own random graphs.
    assert abs(count - PAPER_C109_PUBLISHED) / PAPER_C109_PUBLISHED < 0.02


def test_capture_and_verify(zoo_model: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamplan.ir.verify import verify
    from streamplan.models import load_model

    name, module, inputs = zoo_model
    # Reuse the module built above (the factory itself is tested there): load_model still
    # resolves the name, checks requirements and captures, without a second weight init.
    mod_name, fn_name = ZOO[name].factory.split(":")
    monkeypatch.setattr(importlib.import_module(mod_name), fn_name, lambda batch: (module, inputs))
    graph = load_model(name)
    verify(graph)
    assert len(graph.nodes) > 0
    param_numel = sum(_numel(graph.values[p].shape) for p in graph.params if graph.values[p].kind == "param")
    assert param_numel == EXPECTED[name][0]


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def test_nasnet_a_large_parameter_count():
    """NASNet-A large (the IOS benchmark's size) has the widely used implementation's count."""
    from streamplan.zoo import nasnet
    from streamplan.zoo._layers import param_count

    model, (x,) = nasnet.build_large(1)
    assert param_count(model) == nasnet.LARGE_PARAM_COUNT == 88_753_150
    assert tuple(x.shape) == (1, 3, 331, 331)
