"""What every command shares: the consoles, JSON output, notes, and output files (the shared options
are in ``cli/options.py``)."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from rich.console import Console

from streamplan.errors import StreamplanError


class SafeConsole(Console):
    """A console that prints user strings as they are: no markup or emoji codes read from what it
    prints (a line that styles itself passes ``markup=True`` and quotes its user strings with
    ``report.safe_text.quoted``), and control characters shown as escapes (``printable``)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("markup", False)
        kwargs.setdefault("emoji", False)
        kwargs.setdefault("highlight", False)
        super().__init__(**kwargs)

    def on_broken_pipe(self) -> None:
        """The reader went away (``| head -1``): exit 0 quietly (rich's own choice is status 1)."""
        from streamplan.cli.errors import closed_stdout

        self.quiet = True
        closed_stdout(self.file)

    def render_str(self, text: str, **kwargs: Any) -> Any:
        from streamplan.report.safe_text import printable

        return super().render_str(printable(text), **kwargs)


out = SafeConsole(width=None if sys.stdout.isatty() else 110)
err = SafeConsole(stderr=True, soft_wrap=True)


def emit_json(obj: Any) -> None:
    """Print ``obj`` as strict JSON (NaN and infinities become null) on stdout."""
    sys.stdout.write(json.dumps(_strict(obj), indent=1, default=_json_default, allow_nan=False) + "\n")


def _strict(o: Any) -> Any:
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {str(k): _strict(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_strict(v) for v in o]
    if hasattr(o, "to_dict"):
        return _strict(o.to_dict())
    return o


def _json_default(o: Any) -> Any:
    return str(o)


def print_notes(notes) -> None:
    """What the library noted (a saved schedule made for another batch, say), on stderr."""
    for note in notes:
        err.print(f"note: {note}", markup=False)


def saved_or_policy(session, given):
    """The run of ``--schedule FILE`` (checked against the session's graph; its notes printed),
    or of ``--policy`` when no file is given."""
    if given.schedule_file:
        loaded = session.load_schedule(given.schedule_file)
        print_notes(loaded.notes)
        return loaded.run
    return session.schedule(given.policy)


def write_file(path: str, data: str | bytes, *, force: bool, protected: tuple[str | None, ...] = ()) -> None:
    """``files.write_output`` with the CLI's words for the way out (``--force``); ``protected``
    names the command's inputs (model specs and files), never overwritten (``models.input_files``)."""
    from streamplan.files import OutputFileError, write_output
    from streamplan.models import input_files

    try:
        write_output(path, data, force=force, protected=input_files(*protected))
    except OutputFileError as e:
        raise _with_force_hint(e) from None


def check_file(path: str, *, force: bool, protected: tuple[str | None, ...] = ()) -> None:
    """Refuse a bad output path before any long work starts (``protected``: as ``write_file``)."""
    from streamplan.files import OutputFileError, check_output
    from streamplan.models import input_files

    try:
        check_output(path, force=force, protected=input_files(*protected))
    except OutputFileError as e:
        raise _with_force_hint(e) from None


def check_files(
    paths: tuple[str | None, ...], *, force: bool, protected: tuple[str | None, ...] = ()
) -> None:
    """``check_file`` for each of a command's outputs (None: not asked for), no two the same."""
    from streamplan.files import OutputFileError, check_outputs
    from streamplan.models import input_files

    try:
        check_outputs(paths, force=force, protected=input_files(*protected))
    except OutputFileError as e:
        raise _with_force_hint(e) from None


def _with_force_hint(e: StreamplanError) -> StreamplanError:
    if e.hint and "(force)" in e.hint:
        e.hint = "choose another path, or pass --force to overwrite it"
    return e
