"""How a node's call arguments are stored in ``node.attrs`` as plain JSON.

A captured node keeps ``attrs["args"]`` (a list) and ``attrs["kwargs"]`` (a dict)
so that the runtime can call the ATen op again with real tensors. Inside them:

- a tensor is ``{"$v": value_id}``;
- a list or tuple is a JSON list;
- ``None``, bools, ints, finite floats and strings are themselves; an infinite or NaN float
  (an attention mask's ``-inf``) is ``{"$float": "-inf"}``, since strict JSON has no such number;
- a ``torch.dtype`` is ``{"$dtype": "float32"}``, a device ``{"$device": "cpu"}``,
  a layout ``{"$layout": "strided"}``, a memory format ``{"$memory_format": "contiguous_format"}``.

Only this module and the runtime know the tags; everything else sees JSON.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

TAGS = ("$v", "$dtype", "$device", "$layout", "$memory_format", "$float")


def tensor_ref(value_id: str) -> dict[str, str]:
    return {"$v": value_id}


def iter_tensor_refs(obj: Any) -> Iterator[str]:
    """Every value id referenced by an encoded argument structure, in order."""
    if isinstance(obj, dict):
        if "$v" in obj:
            yield obj["$v"]
        else:
            for v in obj.values():
                yield from iter_tensor_refs(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from iter_tensor_refs(v)


def encode(obj: Any, tensor_id: Callable[[Any], str | None]) -> Any:
    """Encode a python/torch argument; ``tensor_id(x)`` returns a value id for tensor-like x, else None."""
    vid = tensor_id(obj)
    if vid is not None:
        return {"$v": vid}
    if isinstance(obj, float) and not math.isfinite(obj):
        return {"$float": repr(obj)}  # "inf", "-inf" or "nan": float() reads each back
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, (list, tuple)):
        return [encode(x, tensor_id) for x in obj]
    if isinstance(obj, dict):
        return {str(k): encode(v, tensor_id) for k, v in obj.items()}
    import torch

    if isinstance(obj, torch.dtype):
        return {"$dtype": str(obj).removeprefix("torch.")}
    if isinstance(obj, torch.device):
        return {"$device": str(obj)}
    if isinstance(obj, torch.layout):
        return {"$layout": str(obj).removeprefix("torch.")}
    if isinstance(obj, torch.memory_format):
        return {"$memory_format": str(obj).removeprefix("torch.")}
    raise TypeError(f"cannot encode argument of type {type(obj).__name__}: {obj!r}")


def decode(obj: Any, env: dict[str, Any], *, device: Any = None) -> Any:
    """Decode with real tensors from ``env`` (value id -> tensor); devices map to ``device`` if given."""
    if isinstance(obj, list):
        return [decode(x, env, device=device) for x in obj]
    if isinstance(obj, dict):
        if "$v" in obj:
            return env[obj["$v"]]
        if "$float" in obj:
            return float(obj["$float"])
        import torch

        if "$dtype" in obj:
            return getattr(torch, obj["$dtype"])
        if "$device" in obj:
            return torch.device(device) if device is not None else torch.device(obj["$device"])
        if "$layout" in obj:
            return getattr(torch, obj["$layout"])
        if "$memory_format" in obj:
            return getattr(torch, obj["$memory_format"])
        return {k: decode(v, env, device=device) for k, v in obj.items()}
    return obj
