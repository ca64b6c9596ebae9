"""Progress reporting for long steps, as a plain callback (no terminal code here).

Library code calls ``progress(step, done, total)``; the command line turns the calls
into a rich progress display on stderr, Python users pass their own function or
nothing (``no_progress``). ``done``/``total`` are counts when known, else None (a
spinner).
"""

from __future__ import annotations

from collections.abc import Callable

ProgressFn = Callable[[str, "int | None", "int | None"], None]


def no_progress(step: str, done: int | None = None, total: int | None = None) -> None:
    """The default: report nothing."""
