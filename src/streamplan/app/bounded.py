"""Run one piece of work with a hard time limit: in a forked child that is killed when it overruns.

``fit`` suggests changes whose searches (rematerialization, the budget policy) can take
minutes on a 10k-op training step. Their own time limits bound each solve, not the whole
search, so the answer would wait for the slowest. ``run_bounded`` runs the work in a
child process forked from this one (the graph is shared copy-on-write, nothing is
pickled on the way in), returns its result through a pipe, and kills the child when the
limit passes: the caller gets ``cut_short=True`` and goes on. Where ``fork`` does not
exist (Windows, macOS's default), the work runs in this process and is only reported as
cut short when it overran. The work must return something picklable and small, and must
not print (the child shares the parent's terminal).
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from streamplan.errors import StreamplanError

T = TypeVar("T")


@dataclass(frozen=True)
class Bounded(Generic[T]):
    """What bounded work gave: its ``result`` (None when cut short or failed), the seconds it
    took, whether the limit cut it short, and the user error it raised (``error``: one line)."""

    result: T | None
    elapsed_s: float
    cut_short: bool = False
    error: str | None = None


def run_bounded(work: Callable[[], T], time_limit_s: float) -> Bounded[T]:
    """``work()`` with at most ``time_limit_s`` seconds (see the module docstring). A
    ``StreamplanError`` it raises comes back as ``error``; any other exception is raised here."""
    try:
        ctx = multiprocessing.get_context("fork")
    except ValueError:
        ctx = None
    start = time.perf_counter()
    if ctx is None:
        return _inline(work, time_limit_s, start)
    receiver, sender = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(work, sender), daemon=True)
    child.start()
    sender.close()
    try:
        if not receiver.poll(time_limit_s):
            return Bounded(None, time.perf_counter() - start, cut_short=True)
        try:
            status, payload = receiver.recv()
        except EOFError:  # the child died without answering (killed by the system, say)
            return Bounded(
                None, time.perf_counter() - start, error="the search process ended without an answer"
            )
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receiver.close()
    elapsed = time.perf_counter() - start
    if status == "ok":
        return Bounded(payload, elapsed)
    if status == "user-error":
        return Bounded(None, elapsed, error=payload)
    raise RuntimeError(f"bounded work failed: {payload}")


def _child(work: Callable[[], Any], sender: Any) -> None:
    try:
        result = ("ok", work())
    except StreamplanError as e:
        result = ("user-error", _one_line(e))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises it
        result = ("error", f"{type(e).__name__}: {e}")
    try:
        sender.send(result)
    finally:
        sender.close()


def _inline(work: Callable[[], T], time_limit_s: float, start: float) -> Bounded[T]:
    try:
        result = work()
    except StreamplanError as e:
        return Bounded(None, time.perf_counter() - start, error=_one_line(e))
    elapsed = time.perf_counter() - start
    return Bounded(result, elapsed, cut_short=elapsed > time_limit_s)


def _one_line(e: StreamplanError) -> str:
    """The error's message and hint on one line (it becomes one field of a result)."""
    return e.message + (f" ({e.hint})" if e.hint else "")
