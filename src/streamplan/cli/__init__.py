"""The ``streamplan`` command line. Every command takes a model spec (zoo name,
``random:N[:seed]``, graph ``.json`` or ``file.py:function``) and ``--json`` for
machine-readable output only. User errors print one or two lines and exit 2.

One module per group of commands; each registers its commands on ``app``.
"""

from __future__ import annotations

# importing the command modules registers their commands, in the order --help lists them
# isort: off
from streamplan.cli import graph_commands, interop_commands, memory_commands, run_commands, schedule_commands  # noqa: E402, F401, I001
from streamplan.cli import cache_commands  # noqa: E402, F401, I001
from streamplan.cli import budget_commands  # noqa: E402, F401
from streamplan.cli import remat_commands  # noqa: E402, F401
from streamplan.cli import fit_commands  # noqa: E402, F401
from streamplan.cli import calibrate_commands  # noqa: E402, F401

# isort: on
from streamplan.cli.app import app
from streamplan.cli.common import err, out


def main() -> None:
    """The command line in this process: user errors -> one or two lines on stderr and exit
    status 2 (``SystemExit``, so a caller in the same process gets the status)."""
    from streamplan.cli.errors import run_app

    run_app(app, out, err)


def program() -> None:
    """The ``streamplan`` program (its console script and ``python -m streamplan.cli``): as
    ``main``, but an interrupted command ends the process at once (``errors.run_app``)."""
    from streamplan.cli.errors import run_app

    run_app(app, out, err, whole_process=True)


__all__ = ["app", "main", "program"]

# registered after the others (it lists last in --help)
from streamplan.cli import sweep_commands  # noqa: E402, F401
