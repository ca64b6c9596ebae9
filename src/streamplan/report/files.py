"""Writing output files without ever destroying something the user gave us."""

from __future__ import annotations

from pathlib import Path

from streamplan.errors import StreamplanError


class OutputFileError(StreamplanError, FileExistsError):
    """The output path exists (or is an input) and overwriting was not asked for."""


def write_output(
    path: str | Path, data: str | bytes, *, force: bool = False, protected: tuple[str | Path, ...] = ()
) -> Path:
    """Write ``data`` to ``path``; refuse to overwrite an existing file unless ``force``,
    and never overwrite one of the ``protected`` inputs. Writes via a temporary file so
    that a failure leaves nothing half-written."""
    p = check_output(path, force=force, protected=protected)
    tmp = p.with_name(f".{p.name}.tmp")
    if isinstance(data, bytes):
        tmp.write_bytes(data)
    else:
        tmp.write_text(data)
    tmp.replace(p)
    return p


def check_output(path: str | Path, *, force: bool = False, protected: tuple[str | Path, ...] = ()) -> Path:
    """Raise ``OutputFileError`` now if ``write_output`` would refuse ``path`` (before long work)."""
    p = Path(path)
    for q in protected:
        if _same_file(p, Path(q)):
            raise OutputFileError(
                f"refusing to overwrite the input file {q}", where=str(p), hint="choose another output path"
            )
    if p.exists() and not force:
        raise OutputFileError(
            "output file already exists",
            where=str(p),
            hint="choose another path or pass --force to overwrite it",
        )
    if p.parent and not p.parent.exists():
        raise OutputFileError(f"directory {p.parent} does not exist", where=str(p))
    return p


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and a.resolve() == b.resolve()
    except OSError:
        return False
