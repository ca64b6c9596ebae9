"""The sweep's output as it grows: JSON Lines, one row appended (and synced) per finished job.

A row is written with a single ``write`` of the whole line and its newline, then
``fsync``: after a crash the file holds every row finished before it, and at most a
torn last line without its newline, which opening the journal again detects and cuts
off. Opening an existing journal reads its rows, so a rerun of the same sweep skips
them (a row is known by its job's axes). The journal is locked while a sweep writes it,
so two sweeps cannot interleave their rows in one file.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from streamplan.errors import FileFormatError, StreamplanError
from streamplan.files import OutputFileError
from streamplan.sweep.rows import SweepRow, strict
from streamplan.sweep.spec import SweepSettings


class SweepMismatchError(StreamplanError, ValueError):
    """An output file whose rows were written by a sweep with other settings."""


class Journal:
    """An open sweep output: the rows already in it (``rows``, by key) and ``append``."""

    def __init__(self, path: Path, fd: int, rows: dict[tuple[Any, ...], SweepRow], dropped_torn_line: bool):
        self.path = path
        self.rows = rows
        self.dropped_torn_line = dropped_torn_line
        self._fd: int | None = fd

    @staticmethod
    def open(
        path: str | Path, settings: SweepSettings, *, restart: bool = False, retry_failed: bool = False
    ) -> Journal:
        """Open (or create) ``path`` for appending rows of a sweep with ``settings``.

        ``restart`` discards the rows already there; ``retry_failed`` drops the failed ones
        (so their jobs run again). Rows written under other settings raise
        ``SweepMismatchError``; a file that is not a sweep's output, ``FileFormatError``.
        """
        p = Path(path)
        if p.is_dir():
            raise OutputFileError("is a directory", where=str(p), hint="give a file name inside it")
        parent = p.parent if str(p.parent) else Path(".")
        if not parent.is_dir():
            raise OutputFileError(f"directory {parent} does not exist", where=str(p), hint="create it first")
        try:
            fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o666)
        except OSError as e:
            raise OutputFileError(f"cannot open: {e.strerror or e}", where=str(p)) from None
        try:
            _lock(fd, p)
            data = _read_all(fd)
            rows, good_len = _parse(data, p)  # even to restart: a file that is not a sweep's is refused
            torn = good_len < len(data)
            if restart:
                rows, good_len = {}, 0
            _check_settings(rows, settings, p)
            if restart or torn:
                os.ftruncate(fd, good_len)
            if retry_failed and any(not r.ok for r in rows.values()):
                rows = {k: r for k, r in rows.items() if r.ok}
                fd = _rewrite(fd, p, rows)
            if data == b"":
                _sync_dir(parent)
        except BaseException:
            os.close(fd)
            raise
        return Journal(p, fd, rows, torn)

    def append(self, row: SweepRow) -> None:
        """Write ``row`` as one line and sync it to disk before returning."""
        assert self._fd is not None, "the journal is closed"
        line = json.dumps(strict(row.to_dict()), separators=(",", ":"), allow_nan=False) + "\n"
        data = line.encode()
        try:
            while data:  # one write in practice; a short write (a full disk) is finished or fails
                n = os.write(self._fd, data)
                data = data[n:]
            os.fsync(self._fd)
        except OSError as e:
            raise OutputFileError(f"cannot append a row: {e.strerror or e}", where=str(self.path)) from None
        self.rows[row.key] = row

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing also releases the lock
            self._fd = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_rows(path: str | Path) -> list[SweepRow]:
    """The complete rows of a sweep output, in the order they were written."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise FileFormatError(f"cannot read: {e.strerror or e}", where=str(p)) from None
    return list(_parse(data, p)[0].values())


def _parse(data: bytes, p: Path) -> tuple[dict[tuple[Any, ...], SweepRow], int]:
    """The rows of ``data`` by key (the first of duplicates wins) and the length of its complete lines."""
    rows: dict[tuple[Any, ...], SweepRow] = {}
    end = data.rfind(b"\n") + 1  # what follows the last newline is a torn row
    for i, line in enumerate(data[:end].split(b"\n")[:-1], 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            raise FileFormatError(
                f"line {i} is not JSON: not a sweep's output",
                where=str(p),
                hint="choose another output file (a sweep writes JSON Lines)",
            ) from None
        row = SweepRow.from_dict(obj, where=f"{p}:{i}")
        rows.setdefault(row.key, row)
    return rows, end


def _check_settings(rows: dict[tuple[Any, ...], SweepRow], settings: SweepSettings, p: Path) -> None:
    for row in rows.values():
        if row.settings != settings:
            mine, theirs = settings.to_dict(), row.settings.to_dict()
            diff = ", ".join(
                f"{k} {theirs[k]!r} there, {mine[k]!r} now" for k in mine if mine[k] != theirs[k]
            )
            raise SweepMismatchError(
                f"holds rows of a sweep with other settings ({diff})",
                where=str(p),
                hint="choose another output file, or discard its rows and start again (restart)",
            )


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _rewrite(fd: int, p: Path, rows: dict[tuple[Any, ...], SweepRow]) -> int:
    """Replace the journal by one holding only ``rows`` (atomically: a temporary file renamed
    over it) and return a locked descriptor of the new file in place of ``fd``."""
    import tempfile

    payload = "".join(
        json.dumps(strict(r.to_dict()), separators=(",", ":"), allow_nan=False) + "\n" for r in rows.values()
    ).encode()
    tfd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent if str(p.parent) else ".")
    try:
        try:
            os.write(tfd, payload)
            os.fsync(tfd)
            os.fchmod(tfd, os.fstat(fd).st_mode & 0o777)
        finally:
            os.close(tfd)
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    new = os.open(p, os.O_RDWR | os.O_APPEND)
    os.close(fd)
    _lock(new, p)
    return new


def _lock(fd: int, p: Path) -> None:
    try:
        import fcntl
    except ImportError:  # no advisory locks on this platform: nothing to guard with
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise OutputFileError(
            "another sweep is writing this file",
            where=str(p),
            hint="wait for it, or choose another output file",
        ) from None


def _sync_dir(folder: Path) -> None:
    """Make a new journal's directory entry durable too (best effort)."""
    with contextlib.suppress(OSError):
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
