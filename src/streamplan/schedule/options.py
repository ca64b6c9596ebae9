"""Per-policy options: each policy module declares a frozen dataclass of its tunables.

A policy's registry entry names its options class (``"module:Class"``), so what a policy
takes is declared once, typed, and checked: ``build_options`` turns what a user gives
(``{"r": 2}``) into that class, refusing names the policy does not take, and a policy reads
its own with ``ctx.options_as(IosOptions)``. Options are values (frozen, hashable), so they
can sit in a ``Settings`` and a ``ScheduleContext``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from streamplan.errors import ScheduleError, StreamplanError

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class NoOptions:
    """The options of a policy that takes none."""


def option_names(cls: type) -> tuple[str, ...]:
    """The names an options class takes, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls))


def build_options(policy: str, cls: type[T], given: Any) -> T:
    """``given`` (an instance of ``cls``, a mapping of option names, or None) as ``cls``;
    ``ScheduleError`` naming ``policy`` for an option it does not take or a bad value."""
    if isinstance(given, cls):
        return given
    if given is None:
        given = {}
    if dataclasses.is_dataclass(given) and not isinstance(given, type):
        raise ScheduleError(
            f"policy {policy!r} takes {cls.__name__}, not {type(given).__name__}",
            hint=f"pass {cls.__name__}(...) or a mapping of its options",
        )
    if not isinstance(given, Mapping):
        raise ScheduleError(f"the options of policy {policy!r} must be a mapping, got {given!r}")
    names = option_names(cls)
    unknown = sorted(set(given) - set(names))
    if unknown:
        takes = f"it takes {', '.join(sorted(names))}" if names else "it takes no options"
        raise ScheduleError(
            f"policy {policy!r} has no option {', '.join(map(repr, unknown))}",
            hint=f"{takes} (besides the context's max_streams, cost, budget, time limit and seed)",
        )
    try:
        return cls(**given)
    except StreamplanError:
        raise
    except (TypeError, ValueError) as e:
        raise ScheduleError(f"bad option for policy {policy!r}: {e}") from None


def whole(name: str, value: Any, *, least: int = 1) -> int:
    """``value`` as an int >= ``least`` (``ValueError`` naming the option otherwise); what an
    options class's ``__post_init__`` checks its counts with."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an integer >= {least}, got {value!r}") from None
    if n != value and not isinstance(value, str) or n < least:
        raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    return n
