"""Captured zoo models shared across a test session (one capture per model, batch and size).

Captures take seconds each; tests ask for them here instead of capturing again. The
caches live for the whole process, which is the test session of one xdist worker, and the
captures themselves are shared by every process of the run (``helpers.shared``: the
capture cache for model specs, graph JSON for the shrunk runtime captures).
Runtime tests shrink the inputs (images to 64-96 px, sequences to 16 tokens) to stay
fast on two shared cores; the graphs keep all their ops and branches.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

from helpers.shared import shared_dir, stored_graph
from streamplan.ir.graph import Graph
from streamplan.zoo.registry import ZOO

IMAGE_SIZE = {"inception_v3": 80, "nasnet_a": 64}
SEQ_LEN = 16

# the torch zoo models whose packages are installed, but nasnet_a_large (the same cells as
# nasnet_a with 17x the weights: checked by parameter count only)
RUNNABLE_MODELS = [
    name
    for name, m in ZOO.items()
    if m.kind == "torch"
    and name != "nasnet_a_large"
    and (m.requires is None or importlib.util.find_spec(m.requires))
]


@functools.cache
def graph_of(spec: str, batch: int | None = None) -> Graph:
    """``load_model(spec, batch=batch)``, once per session (captured once per run, through the
    run's capture cache)."""
    from streamplan.cache import CaptureCache
    from streamplan.models import ModelRequest

    root = shared_dir()  # the command line's capture cache in the tests is the folder above it
    return ModelRequest(spec, batch=batch).load(cache=CaptureCache(root.parent) if root else None)


def shrink(name: str, inputs: tuple) -> tuple:
    """Smaller example inputs for running a model for real on the CPU."""
    import torch

    out = []
    for x in inputs:
        if x.dim() == 4:
            s = IMAGE_SIZE.get(name, 64)
            out.append(torch.randn(x.shape[0], x.shape[1], s, s, generator=torch.Generator().manual_seed(0)))
        elif x.dim() == 2:
            out.append(x[:, :SEQ_LEN].contiguous())
        else:
            out.append(x)
    return tuple(out)


@functools.cache
def small_model(name: str) -> tuple[Any, tuple, Graph]:
    """(module in eval mode, shrunk inputs, its captured graph), once per session."""
    from streamplan.frontends.torch_capture import capture

    module, inputs = ZOO[name].load_factory()(1)
    module = module.eval()
    inputs = shrink(name, inputs if isinstance(inputs, tuple) else (inputs,))
    key = {"small_model": name, "inputs": [(tuple(x.shape), str(x.dtype)) for x in inputs]}
    return module, inputs, stored_graph(key, lambda: capture(module, inputs, name=name))
