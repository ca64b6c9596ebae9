"""Memory sizes as people type them: the one grammar for bytes and memory budgets.

A size is a number with an optional unit, case-insensitive, spaces allowed:

- no unit: bytes, a whole number (``4096``; ``0.7`` is refused: bytes are whole, and a factor
  is written ``0.7x``);
- binary units ``KiB MiB GiB TiB`` (2^10 ...) and decimal units ``KB MB GB TB`` (10^3 ...):
  ``12MiB``, ``1.5 GiB``, ``800MB`` (800,000,000 bytes), rounded down to whole bytes;
- a budget may instead be a factor of a baseline peak: ``1.2x``.

Nothing above ``MAX_BYTES`` (1 EiB) is a memory size, and no factor above ``MAX_FACTOR``:
such numbers are typing slips, refused with a message rather than carried into a solver.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from streamplan.errors import BudgetError

UNITS: dict[str, int] = {
    "": 1,
    "b": 1,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
}
MAX_BYTES = 1 << 60  # 1 EiB: no device holds more; anything larger is a slip of the keyboard
MAX_FACTOR = 1e6
GRAMMAR = "bytes (4096), a size with a unit (12MiB, 1.5GiB, 800MB = 800*10^6 B) or a factor (1.2x)"

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class SizeText:
    """What a size text says: a number of bytes, or a factor of a baseline (exactly one is set)."""

    limit_bytes: int | None = None
    factor: float | None = None


def parse_size_text(
    text: str | int | float, *, what: str = "memory budget", factors: bool = True
) -> SizeText:
    """Read ``text`` (or a number of bytes) in the grammar above; ``BudgetError`` naming ``what``
    when it is not a size, or is out of range. ``factors=False`` refuses ``1.2x``."""
    if isinstance(text, bool):
        raise _unreadable(text, what, factors)
    if isinstance(text, int):
        number, unit, shown = text, "", text
    elif isinstance(text, float):
        number, unit, shown = text, "", text
    else:
        m = _SIZE.match(str(text))
        if m is None:
            raise _unreadable(text, what, factors)
        digits = m.group(1)
        number = int(digits) if digits.isdigit() else float(digits)
        unit, shown = m.group(2).lower(), text
    if not math.isfinite(number) or number < 0:
        raise _unreadable(shown, what, factors)
    if unit == "x":
        if not factors:
            raise BudgetError(f"the {what} {shown!r} is a factor; here it must be a size", hint=_hint(False))
        if not 0 < number <= MAX_FACTOR:
            raise BudgetError(
                f"the {what} {shown!r} is not a usable factor",
                hint=f"a factor is > 0 and at most {MAX_FACTOR:g}x (1.0x is the baseline peak)",
            )
        return SizeText(factor=number)
    if unit not in UNITS:
        raise _unreadable(shown, what, factors)
    if unit in ("", "b") and isinstance(number, float) and number != int(number):
        raise BudgetError(
            f"the {what} {shown!r} is a fraction of a byte",
            hint=f"bytes are whole numbers; for a factor of the baseline write {number:g}x",
        )
    value = number * UNITS[unit] if isinstance(number, int) else math.floor(number * UNITS[unit])
    if value > MAX_BYTES:
        raise BudgetError(
            f"the {what} {shown!r} is larger than any device's memory (over 1 EiB)",
            hint="check the number and its unit (12MiB, 80GB), or leave the budget out for none",
        )
    return SizeText(limit_bytes=int(value))


def parse_bytes(text: str | int | float, *, what: str = "memory size") -> int:
    """A size in bytes (no factor), in the grammar above."""
    return parse_size_text(text, what=what, factors=False).limit_bytes  # type: ignore[return-value]


def _hint(factors: bool) -> str:
    return (
        "write " + GRAMMAR if factors else "write bytes (4096) or a size with a unit (12MiB, 1.5GiB, 800MB)"
    )


def _unreadable(text: object, what: str, factors: bool) -> BudgetError:
    return BudgetError(f"cannot read the {what} {text!r}", hint=_hint(factors))
