"""Run a fused kernel's parts one after another, as one call.

The parts run in order in a scratch environment over the caller's: values passed
between parts are dropped as soon as the last part that reads them is done, and only
the kernel's outputs are returned. A folded batch-norm is not run: the convolution is
called with the folded weight ``w * g / sqrt(v + eps)`` and bias
``(b - m) * g / sqrt(v + eps) + beta``, which gives eager's result up to rounding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from streamplan.errors import ExecutionError
from streamplan.frontends.argcodec import decode
from streamplan.ir.fused import folded_pair, fused_parts
from streamplan.ir.graph import Node

CallPart = Callable[[Node, Mapping[str, Any], Any], tuple[Any, ...]]


def call_fused(node: Node, env: Mapping[str, Any], device: Any, call_part: CallPart) -> tuple[Any, ...]:
    """Outputs of the fused ``node`` in ``node.outputs`` order; ``call_part`` runs one part."""
    try:
        return _run_parts(node, env, device, call_part)
    except ExecutionError as e:
        raise ExecutionError(f"in fused kernel %{node.id}, {e.message}", hint=e.hint) from e


def _run_parts(node: Node, env: Mapping[str, Any], device: Any, call_part: CallPart) -> tuple[Any, ...]:
    parts = fused_parts(node)
    fold = folded_pair(node)
    last_use: dict[str, int] = {}
    for i, p in enumerate(parts):
        for v in p.inputs:
            last_use[v] = i
    keep = set(node.outputs)
    local: dict[str, Any] = {}
    scope = _Overlay(local, env)
    by_id = {p.id: p for p in parts}
    for i, p in enumerate(parts):
        if fold is not None and p.id == fold[1]:
            continue  # the convolution already produced the normalised result
        if fold is not None and p.id == fold[0]:
            out = _folded_conv(p, by_id[fold[1]], scope, device, call_part)
            local[by_id[fold[1]].outputs[0]] = out
        else:
            local.update(zip(p.outputs, call_part(p, scope, device), strict=True))
        for v in p.inputs:
            if last_use.get(v) == i and v in local and v not in keep:
                del local[v]  # an intermediate the kernel no longer needs
    return tuple(local[v] for v in node.outputs)


def _folded_conv(conv: Node, bn: Node, env: Mapping[str, Any], device: Any, call_part: CallPart) -> Any:
    """The convolution with the batch-norm folded into its weight and bias."""
    bn_args = decode([None, *list(bn.attrs.get("args", []))[1:]], env, device=device)  # input: unused
    bn_kwargs = decode(dict(bn.attrs.get("kwargs", {})), env, device=device)
    names = ("input", "weight", "bias", "running_mean", "running_var", "training", "momentum", "eps")
    bound = dict(zip(names, bn_args, strict=False))
    bound.update(bn_kwargs)
    mean, var = bound["running_mean"], bound["running_var"]
    scale = torch.rsqrt(var + float(bound.get("eps", 1e-5)))
    if bound.get("weight") is not None:
        scale = scale * bound["weight"]
    shift = -mean * scale
    if bound.get("bias") is not None:
        shift = shift + bound["bias"]

    args = list(conv.attrs.get("args", []))
    weight = env[args[1]["$v"]]
    bias_ref = conv.attrs.get("kwargs", {}).get("bias", args[2] if len(args) > 2 else None)
    bias = env[bias_ref["$v"]] if isinstance(bias_ref, Mapping) and "$v" in bias_ref else None
    folded_w = weight * scale.reshape(-1, *([1] * (weight.dim() - 1)))
    folded_b = shift if bias is None else bias * scale + shift
    patched = _Overlay({"$folded_weight": folded_w, "$folded_bias": folded_b}, env)
    kwargs = dict(conv.attrs.get("kwargs", {}))
    new_args = [args[0], {"$v": "$folded_weight"}, *args[2:]]
    if "bias" in kwargs:
        kwargs["bias"] = {"$v": "$folded_bias"}
    elif len(new_args) > 2:
        new_args[2] = {"$v": "$folded_bias"}
    else:  # conv2d(input, weight) with the defaults after it
        new_args.append({"$v": "$folded_bias"})
    call = Node(
        conv.id, conv.op, conv.inputs, conv.outputs, {**conv.attrs, "args": new_args, "kwargs": kwargs}
    )
    (out,) = call_part(call, patched, device)
    return out


class _Overlay(Mapping[str, Any]):
    """``local`` values first, then the caller's environment (which is never written)."""

    def __init__(self, local: dict[str, Any], base: Mapping[str, Any]):
        self.local = local
        self.base = base

    def __getitem__(self, key: str) -> Any:
        if key in self.local:
            return self.local[key]
        return self.base[key]

    def __contains__(self, key: object) -> bool:
        return key in self.local or key in self.base

    def __iter__(self):
        yield from self.local
        yield from (k for k in self.base if k not in self.local)

    def __len__(self) -> int:
        return len(set(self.local) | set(self.base))
