"""What every command shares: the consoles, JSON output, notes, and output files (the shared options
are in ``cli/options.py``)."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from rich.console import Console

from streamplan.errors import StreamplanError

out = Console(highlight=False, width=None if sys.stdout.isatty() else 110)
err = Console(stderr=True, highlight=False, soft_wrap=True)


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


def write_file(path: str, data: str | bytes, *, force: bool, protected: tuple[str, ...] = ()) -> None:
    """``files.write_output`` with the CLI's words for the way out (``--force``)."""
    from streamplan.files import OutputFileError, write_output

    try:
        write_output(path, data, force=force, protected=protected)
    except OutputFileError as e:
        raise _with_force_hint(e) from None


def check_file(path: str, *, force: bool, protected: tuple[str, ...] = ()) -> None:
    """Refuse a bad output path before any long work starts."""
    from streamplan.files import OutputFileError, check_output

    try:
        check_output(path, force=force, protected=protected)
    except OutputFileError as e:
        raise _with_force_hint(e) from None


def _with_force_hint(e: StreamplanError) -> StreamplanError:
    if e.hint and "(force)" in e.hint:
        e.hint = "choose another path, or pass --force to overwrite it"
    return e
