"""Human-readable units. Bytes are shown in binary units, always labelled (MiB = 2^20 B)."""

from __future__ import annotations

MiB = 1 << 20
GiB = 1 << 30


def fmt_bytes(n: int | float | None) -> str:
    """``3145728`` -> ``"3.00 MiB"``; small values in KiB or B; None -> ``"-"``."""
    if n is None:
        return "-"
    n = float(n)
    if abs(n) >= GiB:
        return f"{n / GiB:.2f} GiB"
    if abs(n) >= MiB:
        return f"{n / MiB:.2f} MiB"
    if abs(n) >= 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{int(n)} B"


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "-"
    if ms >= 100:
        return f"{ms:.1f} ms"
    if ms >= 1:
        return f"{ms:.3f} ms"
    return f"{ms * 1000:.1f} us"


def fmt_count(n: int) -> str:
    return f"{n:,}"
