"""How a node's call arguments are stored in ``node.attrs`` as plain JSON.

A captured node keeps ``attrs["args"]`` (a list) and ``attrs["kwargs"]`` (a dict)
so that the runtime can call the ATen op again with real tensors. Inside them:

- a tensor is ``{"$v": value_id}``;
- a list or tuple is a JSON list;
- ``None``, bools, ints, finite floats and strings are themselves; an infinite or NaN float
  (an attention mask's ``-inf``) is ``{"$float": "-inf"}``, since strict JSON has no such number;
- a ``torch.dtype`` is ``{"$dtype": "float32"}``, a device ``{"$device": "cpu"}``,
  a layout ``{"$layout": "strided"}``, a memory format ``{"$memory_format": "contiguous_format"}``.

Only this module, the runtime and codegen know the tags; everything else sees JSON. A graph
file is data: decoding turns a tag into a torch object only when the name is one torch gives
such objects (``TORCH_CONSTANTS``), never by looking up an arbitrary attribute of ``torch``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

TAGS = ("$v", "$dtype", "$device", "$layout", "$memory_format", "$float")
NONFINITE = ("inf", "-inf", "nan")  # the floats strict JSON cannot hold, written {"$float": ...}

# The names of torch's dtypes, layouts and memory formats (``str(x)`` without "torch."): the
# only attributes of ``torch`` a tag may name. A test checks them against the installed torch.
DTYPE_NAMES = frozenset(
    """bfloat16 bits16 bits1x8 bits2x4 bits4x2 bits8 bool complex128 complex32 complex64 float16
    float32 float4_e2m1fn_x2 float64 float8_e4m3fn float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz
    float8_e8m0fnu int1 int2 int3 int4 int5 int6 int7 int8 int16 int32 int64 qint32 qint8 quint2x4
    quint4x2 quint8 uint1 uint2 uint3 uint4 uint5 uint6 uint7 uint8 uint16 uint32 uint64""".split()
)
LAYOUT_NAMES = frozenset(
    {"strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "jagged"}
)
MEMORY_FORMAT_NAMES = frozenset({"contiguous_format", "preserve_format", "channels_last", "channels_last_3d"})
TORCH_CONSTANTS = {"$dtype": DTYPE_NAMES, "$layout": LAYOUT_NAMES, "$memory_format": MEMORY_FORMAT_NAMES}


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
    """Decode with real tensors from ``env`` (value id -> tensor); devices map to ``device`` if given.

    A dtype, layout or memory format whose name torch does not give one raises ``ValueError``.
    """
    if isinstance(obj, list):
        return [decode(x, env, device=device) for x in obj]
    if isinstance(obj, dict):
        if "$v" in obj:
            return env[obj["$v"]]
        if "$float" in obj:
            if obj["$float"] not in NONFINITE:
                raise ValueError(f"{obj['$float']!r:.40} is not a non-finite float (inf, -inf, nan)")
            return float(obj["$float"])
        import torch

        for tag, names in TORCH_CONSTANTS.items():
            if tag in obj:
                if not isinstance(obj[tag], str) or obj[tag] not in names:
                    raise ValueError(f"{obj[tag]!r:.60} is not a torch {tag.lstrip('$').replace('_', ' ')}")
                return getattr(torch, obj[tag])
        if "$device" in obj:
            return torch.device(device) if device is not None else torch.device(obj["$device"])
        return {k: decode(v, env, device=device) for k, v in obj.items()}
    return obj
