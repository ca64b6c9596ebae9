"""How the CLI ends: the exit statuses, and errors as one or two lines (or JSON under ``--json``).

===  ==========================================================================
0    success
1    an invalid schedule (``verify``), or an internal error (a bug: please report)
2    a user error: bad model, file, option or budget — what, where, what to do
3    ``memory``: the predicted run does not fit the device memory given
130  interrupted (Ctrl-C or SIGINT): worker threads are stopped, no output file is half-written
===  ==========================================================================
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import threading

import typer
from rich.console import Console

from streamplan.errors import StreamplanError, on_sigint

EXIT_USER_ERROR = 2
EXIT_OUT_OF_MEMORY = 3
EXIT_INTERRUPTED = 130


def _click_exceptions():
    """The usage-error, exit and abort classes of the click typer runs on: typer vendors its
    own copy in recent releases and used the ``click`` package before; catch whichever exist."""
    errors: list[type] = []
    exits: list[type] = [typer.Exit]
    aborts: list[type] = [typer.Abort]
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        errors.append(mod.ClickException)
        for attr, into in (("Exit", exits), ("Abort", aborts)):
            cls = getattr(mod, attr, None)
            if isinstance(cls, type):
                into.append(cls)
    return tuple(errors), tuple(exits), tuple(aborts)


def _interruptible() -> None:
    """Make SIGINT raise ``errors.Interrupted`` (a KeyboardInterrupt), also when it was inherited
    as ignored (a job started in the background by a script): ``kill -INT`` must stop a long
    ``run`` with status 130; and a KeyboardInterrupt a model's own code raises is then told
    apart from Ctrl-C (``frontends.user_code``)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, on_sigint)


def _wants_json(argv: list[str]) -> bool:
    return "--json" in argv


def _error_json(kind: str, message: str, where: str | None = None, hint: str | None = None) -> None:
    obj = {"error": {"kind": kind, "message": message, "where": where, "hint": hint}}
    sys.stdout.write(json.dumps(obj, indent=1) + "\n")


def closed_stdout(stream=None) -> None:  # noqa: ANN001
    """The reader of stdout (or ``stream``) went away (``streamplan memory M | head -1``): stop
    quietly with status 0, as other tools do; the stream is pointed at /dev/null first, or
    flushing it at exit fails again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, (stream or sys.stdout).fileno())
    except (OSError, ValueError):  # no file descriptor (stdout replaced in-process): nothing to flush
        pass
    sys.exit(0)


def exit_interrupted() -> None:
    """End the interrupted program now with status 130, past the interpreter's teardown.

    By the time this runs the interrupt has unwound every ``with`` and ``finally`` of the
    command: the runtime's workers are stopped, a solver's search is stopped, sweep workers
    are terminated, and no output file is half-written. What may still be winding down is a
    native library's own thread (torch's, a solver's), whose C++ destructors at teardown can
    abort the process ("terminate called without an active exception", status -6 instead of
    130); skipping the teardown leaves nothing of ours undone.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(EXIT_INTERRUPTED)


def run_app(app: typer.Typer, out: Console, err: Console, *, whole_process: bool = False) -> None:
    """Run the CLI; user errors -> one or two lines on stderr and exit status 2, never a traceback.

    With ``--json`` the error is also written to stdout as ``{"error": {kind, message,
    where, hint}}``, so scripts never have to parse text. ``whole_process``: this process is
    the command (not a caller running it in-process), so an interrupt ends it at once
    (``exit_interrupted``).
    """
    click_error, click_exit, click_abort = _click_exceptions()
    as_json = _wants_json(sys.argv[1:])
    _interruptible()

    def interrupted(word: str = "interrupted") -> None:
        if as_json:
            _error_json("Interrupted", word, None, None)
        err.print(word)
        if whole_process:
            exit_interrupted()
        sys.exit(EXIT_INTERRUPTED)

    try:
        rc = app(standalone_mode=False)
        if isinstance(rc, int) and rc:
            if rc == EXIT_INTERRUPTED:  # typer returns Ctrl-C as status 130
                interrupted()
            sys.exit(rc)
    except StreamplanError as e:
        if as_json:
            _error_json(type(e).__name__, e.message, e.where, e.hint)
        err.print(f"error: {e.short()}", markup=False)
        sys.exit(EXIT_USER_ERROR)
    except click_abort:
        interrupted("aborted")
    except click_error as e:  # bad usage: say what was wrong with the command line
        if type(e).__name__ == "NoArgsIsHelpError":
            out.print(e.format_message(), markup=False)
            sys.exit(0)
        if as_json:
            _error_json("UsageError", e.format_message(), None, "run with --help for the options")
        err.print(f"error: {e.format_message()}", markup=False)
        err.print("  hint: run with --help for the options", markup=False)
        sys.exit(EXIT_USER_ERROR)
    except click_exit as e:
        code = getattr(e, "exit_code", 0)
        if code == EXIT_INTERRUPTED:  # typer turns Ctrl-C into Exit(130)
            interrupted()
        sys.exit(code)
    except KeyboardInterrupt:
        interrupted()
    except BrokenPipeError:
        closed_stdout()
    except Exception as e:  # a bug in streamplan, not the user's fault
        if os.environ.get("STREAMPLAN_DEBUG"):
            raise
        if as_json:
            _error_json("InternalError", f"{type(e).__name__}: {e}", None, "please report it")
        err.print(
            f"internal error: {type(e).__name__}: {e}\n  (set STREAMPLAN_DEBUG=1 for the traceback; "
            "please report it)",
            markup=False,
        )
        sys.exit(1)
