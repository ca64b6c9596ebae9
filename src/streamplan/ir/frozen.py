"""``FrozenDict``: a ``dict`` that cannot change after it is made.

The IR's frozen dataclasses hold mappings (a graph's values, a schedule's streams,
``meta``). A plain dict there would let ``graph.values["z"] = ...`` leave the
graph's index stale. A subclass of ``dict`` (rather than ``MappingProxyType``)
keeps ``json.dumps``, ``isinstance(x, dict)``, pickling and ``copy`` working.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class FrozenDict(dict[K, V]):
    """A read-only dict: every mutating method raises ``TypeError``."""

    __slots__ = ()

    def _readonly(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(f"{type(self).__name__} is read-only; build a new one instead")

    __setitem__ = _readonly
    __delitem__ = _readonly
    __ior__ = _readonly  # type: ignore[assignment]
    clear = _readonly
    pop = _readonly
    popitem = _readonly
    setdefault = _readonly
    update = _readonly

    def __hash__(self) -> int:  # type: ignore[override]
        # read-only, so it can be a value: hashable when its values are
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (dict(self),))

    def __copy__(self) -> FrozenDict[K, V]:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict[K, V]:
        import copy

        return type(self)({k: copy.deepcopy(v, memo) for k, v in self.items()})

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


def deep_freeze(x: Any) -> Any:
    """``x`` with every dict inside it a ``FrozenDict`` and every list a tuple (a value that
    can be hashed, as results are; JSON writes it as before)."""
    if isinstance(x, Mapping):
        return FrozenDict({k: deep_freeze(v) for k, v in x.items()})
    if isinstance(x, (list, tuple)):
        return tuple(deep_freeze(v) for v in x)
    if isinstance(x, set):
        return frozenset(deep_freeze(v) for v in x)
    return x


def freeze(mapping: Mapping[K, V] | None) -> FrozenDict[K, V]:
    """``mapping`` as a ``FrozenDict`` (the same object when it already is one)."""
    if isinstance(mapping, FrozenDict):
        return mapping
    return FrozenDict(mapping or {})
