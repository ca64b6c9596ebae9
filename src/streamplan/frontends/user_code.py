"""Running a model's own Python code (a ``file.py:function`` spec: its import, the function,
the module's forward while it is traced or run for reference) on streamplan's terms.

- What it prints goes to stderr: stdout belongs to the command (``--json`` prints exactly one
  JSON document there, whether or not the model had to be captured again).
- ``sys.exit(N)`` in it is its error, not streamplan's exit status N (3 means "out of memory");
  so is a ``KeyboardInterrupt`` it raises itself, as opposed to Ctrl-C (``errors.Interrupted``).
- Its directory is first on ``sys.path`` while it is imported and its function runs, as when
  Python runs a script, so that it can import the modules beside it; ``local_imports`` names
  those modules (read, not run) for the capture cache's key and the files never overwritten.
"""

from __future__ import annotations

import ast
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from streamplan.errors import Interrupted, ModelSpecError, on_sigint

USER_MODULE_PREFIX = "_streamplan_user_"  # the name a model file is imported under
MAX_LOCAL_MODULES = 200  # local modules followed from one model file (a guard, not a limit met)


@contextlib.contextmanager
def running_user_code(what: str, where: str) -> Iterator[None]:
    """Run a model's code: prints to stderr; ``sys.exit`` and a ``KeyboardInterrupt`` it raises
    become a ``ModelSpecError`` saying ``what`` (e.g. "importing m.py") did so, at ``where``."""
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    except SystemExit as e:
        code = "" if e.code is None else repr(e.code)
        raise ModelSpecError(
            f"{what} called sys.exit({code})",
            where=where,
            hint="a model file must not end the process; raise an exception instead",
        ) from None
    except KeyboardInterrupt as e:
        if isinstance(e, Interrupted) or not _raised_by_the_code():
            raise
        raise ModelSpecError(
            f"{what} raised KeyboardInterrupt (the code itself: nobody pressed Ctrl-C)",
            where=where,
            hint="raise an ordinary exception to report a problem",
        ) from None


def _raised_by_the_code() -> bool:
    """Whether a plain ``KeyboardInterrupt`` cannot be Ctrl-C: SIGINT raises ``Interrupted`` under
    the command line's handler and nothing where it is ignored (sweep workers). Under Python's
    own handler (the library used from a program) the two cannot be told apart: an interrupt."""
    if threading.current_thread() is not threading.main_thread():
        return True
    return signal.getsignal(signal.SIGINT) in (on_sigint, signal.SIG_IGN)


@contextlib.contextmanager
def directory_on_path(directory: Path) -> Iterator[None]:
    """``directory`` first on ``sys.path`` for the duration. The modules imported from it
    meanwhile are forgotten after (``sys.modules``), so another model's ``helper.py`` is not
    mistaken for this one's; the objects already made from them keep working."""
    directory = directory.resolve()
    entry = str(directory)
    before = set(sys.modules)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)
        for name in set(sys.modules) - before:
            found = getattr(sys.modules.get(name), "__file__", None)
            if found and not name.startswith(USER_MODULE_PREFIX) and _inside(Path(found), directory):
                del sys.modules[name]


def _inside(path: Path, directory: Path) -> bool:
    try:
        return path.resolve().is_relative_to(directory)
    except OSError:
        return False


def local_imports(path: str | Path) -> tuple[Path, ...]:
    """The modules in ``path``'s directory tree that the file imports, directly or through one
    another, found by reading them (an import by computed name is not seen)."""
    return tuple(p for _, p in _follow(Path(path).resolve()))


def _follow(start: Path) -> list[tuple[str, Path]]:
    root = start.parent
    seen: dict[Path, str] = {}
    todo = [start]
    while todo and len(seen) < MAX_LOCAL_MODULES:
        current = todo.pop()
        for name, found in _imported_files(current, root):
            if found != start and found not in seen:
                seen[found] = name
                todo.append(found)
    return sorted(((n, p) for p, n in seen.items()), key=lambda item: str(item[1]))


def _imported_files(path: Path, root: Path) -> list[tuple[str, Path]]:
    """(module name, file) of each import in ``path`` that resolves to a file under ``root``."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the file's own package
                base = path.parent
                for _ in range(node.level - 1):
                    base = base.parent
                prefix = ".".join(base.relative_to(root).parts) if base.is_relative_to(root) else None
                if prefix is None:
                    continue
                module = ".".join(p for p in (prefix, node.module or "") if p)
            else:
                module = node.module or ""
            names.append(module)
            names.extend(f"{module}.{a.name}" if module else a.name for a in node.names)
    out = []
    for name in dict.fromkeys(n for n in names if n):
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # a.b.c imports a, a.b and a.b.c
            found = _module_file(root, parts[:i])
            if found is not None:
                out.append((".".join(parts[:i]), found))
    return out


def _module_file(root: Path, parts: list[str]) -> Path | None:
    base = root.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate.resolve()
    return None
