"""Which outputs of an ATen op alias which inputs, and which inputs it writes: from the schema.

An ATen schema annotates aliasing: ``Tensor(a) self -> Tensor(a)`` is a view,
``Tensor(a!) self -> Tensor(a!)`` an in-place write that returns the written
tensor (``out=`` variants look the same with the written argument keyword-only),
``Tensor(a -> *) self -> Tensor(a)[]`` a multi-output view (split, unbind, chunk),
and ``Tensor(a!) running_mean`` an argument written in place but not returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class OpAliasing:
    """Alias facts of one op schema.

    ``returns[i]`` is the name of the argument that return ``i`` aliases (None: a
    fresh tensor); ``writes`` names the arguments the op writes in place.
    ``may_copy`` is True for views that may instead return a copy (``reshape``,
    ``contiguous``, ``to``...): the caller checks the traced tensors to decide.
    """

    returns: tuple[str | None, ...]
    writes: tuple[str, ...]
    may_copy: bool = False


# Schema-annotated as views, but they return a fresh tensor when a view is impossible.
_MAY_COPY = {
    "reshape",
    "reshape_as",
    "contiguous",
    "to",
    "type_as",
    "flatten",
    "unflatten",
    "resolve_conj",
    "resolve_neg",
}

_CACHE: dict[Any, OpAliasing] = {}


def op_aliasing(schema: Any) -> OpAliasing:
    """Alias facts from a ``torch._C.FunctionSchema`` (cached per schema)."""
    key = str(schema)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    annotated = [a for a in schema.arguments if a.alias_info is not None]
    writes = tuple(a.name for a in annotated if a.alias_info.is_write)
    returns: list[str | None] = []
    for r in schema.returns:
        info = r.alias_info
        if info is None:
            returns.append(None)
            continue
        target = None
        if info.before_set:
            target = next((a.name for a in annotated if a.alias_info.before_set & info.before_set), None)
        if target is None:  # list returns carry the set on their element type: Tensor(a)[]
            wildcard = [a.name for a in annotated if "*" in a.alias_info.after_set]
            if wildcard:
                target = wildcard[0]
            elif len(annotated) == 1:
                target = annotated[0].name
        returns.append(target)
    base = schema.name.split("::")[-1]
    result = OpAliasing(tuple(returns), writes, may_copy=base in _MAY_COPY)
    _CACHE[key] = result
    return result


def bind_arguments(schema: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    """Map the call's positional and keyword arguments to the schema's argument names."""
    bound: dict[str, Any] = {}
    positional = [a for a in schema.arguments if not a.kwarg_only]
    for a, value in zip(positional, args, strict=False):
        bound[a.name] = value
    for name, value in kwargs.items():
        bound[name] = value
    return bound


def base_name(schema: Any) -> str:
    """The op's name without namespace, overload, or in-place underscore: ``relu_`` -> ``relu``."""
    name = schema.name.split("::")[-1]
    if name.endswith("_") and not name.endswith("__"):
        name = name[:-1]
    return name
