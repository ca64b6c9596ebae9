"""Running the command line in a subprocess, and the user-error contract."""

from __future__ import annotations

import subprocess
import sys


def sp(*args, cwd=None, env=None, timeout=300):
    """Run the CLI in a subprocess (so exit codes and stderr are real)."""
    return subprocess.run(
        [sys.executable, "-m", "streamplan.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )


def assert_user_error(r, *fragments):
    """Exit 2, one to three lines on stderr naming ``fragments``, never a traceback."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert 1 <= len(r.stderr.strip().splitlines()) <= 3, r.stderr
    for f in fragments:
        assert f in r.stderr, r.stderr


class CliResult:
    """What an in-process CLI run left: exit status, stdout and stderr (like ``CompletedProcess``)."""

    def __init__(self, returncode: int, stdout: str, stderr: str):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr

    def __repr__(self) -> str:
        return f"CliResult({self.returncode}, stdout={self.stdout[-500:]!r}, stderr={self.stderr[-500:]!r})"


def cli(*args, env: dict[str, str] | None = None) -> CliResult:
    """Run ``streamplan ARGS`` in this process (``streamplan.cli.main`` with patched argv):
    the same exit statuses and streams as a subprocess, without paying for a new interpreter
    and torch import on every call. ``env`` entries are set for the call only."""
    import contextlib
    import io
    import os

    from streamplan.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved_argv, saved_env = sys.argv, dict(os.environ)
    sys.argv = ["streamplan", *map(str, args)]
    os.environ.update(env or {})
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
    return CliResult(code, out.getvalue(), err.getvalue())
