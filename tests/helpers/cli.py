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
