"""Reading the user's files and writing ours, with errors that name the file.

Writes are atomic (a temporary file beside the target, then a rename) and never
destroy something the user gave us: an existing file is replaced only when asked
(``force``), an input file never, and a failed write leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from streamplan.errors import FileFormatError, StreamplanError


class OutputFileError(StreamplanError, OSError):
    """An output path that cannot or may not be written (exists, is an input, a directory...)."""


def read_json(path: str | Path) -> Any:
    """Parse ``path`` as strict JSON; an unreadable or malformed file raises ``FileFormatError``."""
    p = Path(path)
    try:
        text = p.read_text()
    except IsADirectoryError:
        raise FileFormatError("is a directory, not a file", where=str(p)) from None
    except OSError as e:
        raise FileFormatError(f"cannot read file: {e.strerror or e}", where=str(p)) from None
    except UnicodeDecodeError:
        raise FileFormatError("file is not UTF-8 text", where=str(p)) from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except (json.JSONDecodeError, ValueError) as e:
        raise FileFormatError(f"not valid JSON: {e}", where=str(p)) from None
    except RecursionError:
        raise FileFormatError("not valid JSON: nested too deeply", where=str(p)) from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def check_output(path: str | Path, *, force: bool = False, protected: tuple[str | Path, ...] = ()) -> Path:
    """Raise ``OutputFileError`` now if ``write_output`` would refuse ``path`` (call it before long work)."""
    p = Path(path)
    for q in protected:
        if _same_file(p, Path(q)):
            raise OutputFileError(
                f"refusing to overwrite the input file {q}", where=str(p), hint="choose another output path"
            )
    if p.is_dir():
        raise OutputFileError("is a directory", where=str(p), hint="give a file name inside it")
    if p.exists() or p.is_symlink():
        if not force:
            raise OutputFileError(
                "output file already exists",
                where=str(p),
                hint="choose another path, or ask to overwrite it (force)",
            )
        if not p.is_file():
            raise OutputFileError(
                "exists and is not a regular file", where=str(p), hint="choose another path"
            )
        if not os.access(p, os.W_OK):
            raise OutputFileError("exists and is not writable", where=str(p), hint="choose another path")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise OutputFileError(f"directory {parent} does not exist", where=str(p), hint="create it first")
    if not os.access(parent, os.W_OK):
        raise OutputFileError(f"directory {parent} is not writable", where=str(p), hint="choose another path")
    return p


def check_outputs(
    paths: tuple[str | Path | None, ...], *, force: bool = False, protected: tuple[str | Path, ...] = ()
) -> tuple[Path, ...]:
    """``check_output`` for each of a command's outputs (None: not asked for), and no two of them
    the same file: one would overwrite the other once all the work is done."""
    given = [Path(p) for p in paths if p is not None and str(p) != ""]
    for i, p in enumerate(given):
        for q in given[:i]:
            if _same_path(p, q):
                raise OutputFileError(
                    f"given as two outputs ({q} and {p})", where=str(p), hint="give each output its own path"
                )
    return tuple(check_output(p, force=force, protected=protected) for p in given)


def write_output(
    path: str | Path, data: str | bytes, *, force: bool = False, protected: tuple[str | Path, ...] = ()
) -> Path:
    """Write ``data`` to ``path`` atomically (see the module doc); ``OutputFileError`` when refused."""
    p = check_output(path, force=force, protected=protected)
    parent = p.parent if str(p.parent) else Path(".")
    payload = data.encode() if isinstance(data, str) else data
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=parent)
    except OSError as e:
        raise OutputFileError(
            f"cannot create a file in {parent}: {e.strerror or e}", where=str(p), hint="choose another path"
        ) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.chmod(tmp, _mode_for(p))
        os.replace(tmp, p)
        tmp = None
    except OSError as e:
        raise OutputFileError(f"cannot write: {e.strerror or e}", where=str(p)) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return p


def _mode_for(p: Path) -> int:
    """The replaced file's permissions, or what a new file gets under the umask."""
    if p.is_file():
        return p.stat().st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and a.resolve() == b.resolve()
    except OSError:
        return False


def _same_path(a: Path, b: Path) -> bool:
    """The same file, or the same path for files not written yet."""
    try:
        return _same_file(a, b) or os.path.realpath(a) == os.path.realpath(b)
    except OSError:
        return False
