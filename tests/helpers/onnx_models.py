"""Zoo models exported to ONNX with ``torch.onnx.export`` (the TorchScript exporter, ``dynamo=False``:
offline, seconds per model), once per session and variant.

Before export, weights are made to differ as training would leave them: freshly initialised
layers hold equal values (batch-norm ones and zeros, RandWire's edge weights), and the
exporter stores equal initializers once, which no trained model has.
"""

from __future__ import annotations

import copy
import functools
import tempfile
import warnings
from pathlib import Path

CNNS = ["squeezenet", "resnet50", "inception_v3", "randwire", "nasnet_a"]
_DIR = Path(tempfile.mkdtemp(prefix="streamplan_onnx_"))


def trained_like(module):
    """``module`` with batch-norm statistics and affine weights randomised, and every other
    parameter nudged (seeded): no two weights are equal, as after training."""
    import torch

    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.01 * torch.randn(p.shape, generator=gen))
        for m in module.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                c = m.num_features
                m.running_mean.copy_(0.1 * torch.randn(c, generator=gen))
                m.running_var.copy_(0.5 + torch.rand(c, generator=gen))
                if m.weight is not None:
                    m.weight.copy_(1.0 + 0.1 * torch.randn(c, generator=gen))
                    m.bias.copy_(0.1 * torch.randn(c, generator=gen))
    return module


@functools.cache
def exported(name: str, *, fold: bool = True, dynamic_batch: bool = False) -> tuple[Path, object, tuple]:
    """(path of the .onnx file, the module in eval mode, its shrunk example inputs)."""
    import torch

    from helpers.models import small_model

    module, inputs, _ = small_model(name)
    module = trained_like(copy.deepcopy(module))
    path = _DIR / f"{name}{'' if fold else '_bn'}{'_dyn' if dynamic_batch else ''}.onnx"
    kwargs = {} if fold else {"training": torch.onnx.TrainingMode.PRESERVE, "do_constant_folding": False}
    if dynamic_batch:
        kwargs["dynamic_axes"] = {"x": {0: "batch"}, "y": {0: "batch"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module, inputs, str(path), dynamo=False, input_names=["x"], output_names=["y"], **kwargs
        )
    return path, module, inputs


def as_exported(graph, *, fold_bn: bool):
    """The torch capture rewritten as the TorchScript exporter rewrites the model (an independent
    model of what the ONNX file should hold): eval-mode dropout removed (the identity), with
    ``fold_bn`` each batch norm that follows a convolution folded into it, equal computations on
    equal inputs done once (common subexpression elimination), and dead ops dropped."""
    import json

    from streamplan.ir.graph import Graph

    rename: dict[str, str] = {}
    seen: dict[str, tuple[str, ...]] = {}
    cats: dict[str, tuple[list, int]] = {}
    kept = []
    added_bias = 0

    def sub(obj):
        if isinstance(obj, dict):
            return (
                {"$v": rename.get(obj["$v"], obj["$v"])}
                if "$v" in obj
                else {k: sub(v) for k, v in obj.items()}
            )
        if isinstance(obj, list):
            return [sub(x) for x in obj]
        return obj

    for node in graph.nodes:
        inputs = tuple(rename.get(v, v) for v in node.inputs)
        base = node.op.split(".")[1]
        if base == "dropout":
            rename[node.outputs[0]] = inputs[0]
            continue
        producer = graph.producer(node.inputs[0]) if node.inputs else None
        if (
            fold_bn
            and base == "batch_norm"
            and producer is not None
            and graph.node(producer).op.split(".")[1] in ("conv2d", "convolution")
            and len(graph.consumers(node.inputs[0])) == 1
        ):
            rename[node.outputs[0]] = inputs[0]
            conv_args = graph.node(producer).attrs["args"]
            if len(conv_args) < 3 or conv_args[2] is None:  # the folded shift becomes a new conv bias
                added_bias += graph.values[node.outputs[0]].shape[1]
            continue
        attrs = {
            **node.attrs,
            "args": sub(node.attrs.get("args", [])),
            "kwargs": sub(node.attrs.get("kwargs", {})),
        }
        if base == "cat":  # a concatenation of a concatenation along the same axis becomes one
            parts, dim = attrs["args"][0], attrs["args"][1] if len(attrs["args"]) > 1 else 0
            flat_parts = []
            for part in parts:
                inner = cats.get(part["$v"])
                if inner is not None and inner[1] == dim and len(graph.consumers(part["$v"])) == 1:
                    flat_parts.extend(inner[0])
                else:
                    flat_parts.append(part)
            attrs["args"] = [flat_parts, *attrs["args"][1:]]
            inputs = tuple(dict.fromkeys(p["$v"] for p in flat_parts))
            cats[node.outputs[0]] = (flat_parts, dim)
        key = json.dumps([node.op, attrs["args"], attrs["kwargs"]], sort_keys=True)
        if key in seen and not node.mutates:
            rename.update(zip(node.outputs, seen[key], strict=True))
            continue
        seen[key] = node.outputs
        kept.append(
            node.__class__(
                **{**{f: getattr(node, f) for f in node.__slots__}, "inputs": inputs, "attrs": attrs}
            )
        )
    outputs = tuple(rename.get(v, v) for v in graph.outputs)
    needed = set(outputs)
    live = []
    for node in reversed(kept):
        if any(o in needed for o in node.outputs) or node.mutates:
            live.append(node)
            needed.update(node.inputs)
    live.reverse()
    values = {k: v for k, v in graph.values.items() if k in needed or any(k in n.outputs for n in live)}
    params = tuple(p for p in graph.params if p in needed)
    exported = Graph(
        graph.name, tuple(live), values, graph.inputs, params, outputs, graph.meta, graph.param_names
    )
    return exported, added_bias
