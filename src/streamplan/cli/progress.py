"""A rich progress display on stderr for the library's ``progress(step, done, total)`` calls.

Shown only when stderr is a terminal, so pipes, logs and ``--json`` consumers see
nothing; it is transient (cleared when the command ends) and waits half a second
before appearing, so quick commands stay quiet.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from streamplan.progress import ProgressFn, no_progress
from streamplan.report.safe_text import quoted

SHOW_AFTER_S = 0.5


@contextlib.contextmanager
def progress_display(console: Console, *, enabled: bool = True, eta: bool = False) -> Iterator[ProgressFn]:
    """Yield a progress callback drawing on ``console`` (a no-op when not a terminal);
    ``eta`` adds an estimate of the time left (for long counted work, such as a sweep)."""
    if not enabled or not (console.is_terminal or _forced()):
        yield no_progress
        return
    if not console.is_terminal:  # forced (tests): draw as on a terminal, on the same stream
        console = Console(file=console.file, force_terminal=True, width=100)
    columns: list[ProgressColumn] = [
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[count]}"),
        TimeElapsedColumn(),
    ]
    if eta:
        columns.append(TimeRemainingColumn())
    bar = Progress(*columns, console=console, transient=True)
    task = bar.add_task("starting", total=None, count="")
    lock = threading.Lock()
    state = {"started": False, "closed": False}

    def show() -> None:
        with lock:
            if not state["closed"]:
                bar.start()
                state["started"] = True

    timer = threading.Timer(SHOW_AFTER_S, show)
    timer.daemon = True
    timer.start()

    def report(step: str, done: int | None = None, total: int | None = None) -> None:
        count = f"{done}/{total}" if done is not None and total else ""
        # the step names the model: shown as it is (the column reads markup)
        bar.update(task, description=quoted(step), total=total or None, completed=done or 0, count=count)

    try:
        yield report
    finally:
        timer.cancel()
        with lock:
            state["closed"] = True
            if state["started"]:
                bar.stop()


def _forced() -> bool:
    """STREAMPLAN_PROGRESS=1 shows progress on a non-terminal stderr (for tests)."""
    import os

    return os.environ.get("STREAMPLAN_PROGRESS") == "1" and not sys.stderr.isatty()
