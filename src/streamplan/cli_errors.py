"""How the CLI ends: exit status 0 on success, 1 for an invalid schedule or an internal error,
2 for a user error (bad model, file or option) printed in one or two lines, 130 on Ctrl-C."""

from __future__ import annotations

import os
import sys

import typer
from rich.console import Console

from streamplan.errors import StreamplanError


def _click_exceptions():
    """Typer may vendor its own click; catch both flavours."""
    import click

    errors = [click.exceptions.ClickException]
    exits = [click.exceptions.Exit, typer.Exit]
    aborts = [click.exceptions.Abort, getattr(typer, "Abort", click.exceptions.Abort)]
    try:
        from typer._click import exceptions as vendored

        errors.append(vendored.ClickException)
    except ImportError:
        pass
    return tuple(errors), tuple(exits), tuple(aborts)


def run_app(app: typer.Typer, out: Console, err: Console) -> None:
    """Run the CLI; user errors -> one or two lines on stderr and exit status 2, never a traceback."""
    click_error, click_exit, click_abort = _click_exceptions()
    try:
        rc = app(standalone_mode=False)
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except StreamplanError as e:
        err.print(f"error: {e.short()}", markup=False)
        sys.exit(2)
    except click_abort:
        err.print("aborted")
        sys.exit(130)
    except click_error as e:  # bad usage: say what was wrong with the command line
        if type(e).__name__ == "NoArgsIsHelpError":
            out.print(e.format_message(), markup=False)
            sys.exit(0)
        err.print(f"error: {e.format_message()}", markup=False)
        err.print("  hint: run with --help for the options", markup=False)
        sys.exit(2)
    except click_exit as e:
        sys.exit(getattr(e, "exit_code", 0))
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as e:  # a bug in streamplan, not the user's fault
        if os.environ.get("STREAMPLAN_DEBUG"):
            raise
        err.print(
            f"internal error: {type(e).__name__}: {e}\n  (set STREAMPLAN_DEBUG=1 for the traceback; "
            "please report it)",
            markup=False,
        )
        sys.exit(1)
