"""Element sizes of the dtypes the IR knows, by their short names ("float32")."""

from __future__ import annotations

import math
from collections.abc import Sequence

ITEMSIZE_BYTES: dict[str, int] = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "complex64": 8,
    "complex128": 16,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}


def itemsize(dtype: str) -> int:
    """Bytes per element of ``dtype``; raises ``KeyError`` naming the dtype if unknown."""
    try:
        return ITEMSIZE_BYTES[dtype]
    except KeyError:
        raise KeyError(f"unknown dtype {dtype!r}; known: {', '.join(ITEMSIZE_BYTES)}") from None


def numel(shape: Sequence[int]) -> int:
    """Number of elements of a tensor of ``shape`` (1 for a scalar)."""
    return math.prod(shape)


def tensor_bytes(shape: tuple[int, ...], dtype: str) -> int:
    """Bytes of a dense tensor of ``shape`` and ``dtype``."""
    return numel(shape) * itemsize(dtype)
