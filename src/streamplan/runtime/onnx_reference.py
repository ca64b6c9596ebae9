"""What ``run`` needs for an ONNX model: its weights, seeded inputs, and onnxruntime's outputs.

onnxruntime is the reference for an ONNX model, as eager PyTorch is for a torch module:
the schedule's outputs must match what onnxruntime computes from the same file and inputs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from streamplan.errors import ModelSpecError
from streamplan.frontends.onnx_import import INSTALL_HINT, leaf_tensors
from streamplan.ir.graph import Graph
from streamplan.runtime.interpret import initial_env


def onnx_run_inputs(
    graph: Graph, seed: int = 0, *, path: str | Path | None = None
) -> tuple[list[Any], dict[str, Any], tuple[Any, ...]]:
    """(inputs in ``graph.inputs`` order, weights by value id, onnxruntime's outputs in
    ``graph.outputs`` order) for a graph loaded from the ONNX file ``path`` (default: the file
    it was loaded from, ``meta["onnx_path"]``); inputs are seeded random."""
    path = path or graph.meta["onnx_path"]
    try:
        import onnxruntime
    except ImportError:
        raise ModelSpecError(
            "checking an ONNX model's outputs needs the optional package 'onnxruntime'", hint=INSTALL_HINT
        ) from None
    params = leaf_tensors(graph, path)
    env = initial_env(graph, None, params, seed=seed)
    inputs = [env[v] for v in graph.inputs]
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feeds = {name: x.numpy() for name, x in zip(graph.meta["onnx_inputs"], inputs, strict=True)}
    results = session.run(list(graph.meta["onnx_outputs"]), feeds)
    by_value: dict[str, Any] = {}
    for leaf, result in zip(graph.meta["output_values"], results, strict=True):
        by_value.setdefault(leaf["$v"], torch.from_numpy(result))
    return inputs, params, tuple(by_value[v] for v in graph.outputs)
