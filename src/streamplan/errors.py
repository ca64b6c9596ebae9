"""Errors a user can cause, each saying what was wrong, where, and what to do.

Every class subclasses the matching builtin so that callers can catch, say, a
``ValueError`` without knowing streamplan. The CLI prints ``str(error)`` (one or
two lines) and exits with status 2.
"""

from __future__ import annotations


class StreamplanError(Exception):
    """Base class. ``where`` names the node, file or model; ``hint`` says what to do."""

    def __init__(
        self, message: str, *, where: str | None = None, hint: str | None = None, details: str | None = None
    ):
        self.message = message
        self.where = where
        self.hint = hint
        self.details = details  # e.g. the printed lines around a bad node
        super().__init__(self._render(with_details=True))

    def _render(self, *, with_details: bool) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        if with_details and self.details:
            text += "\n" + self.details
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text

    def short(self) -> str:
        """What, where and what to do, in one or two lines (what the CLI prints)."""
        return self._render(with_details=False)


class GraphError(StreamplanError, ValueError):
    """The graph breaks an IR invariant (cycle, dangling value, bad alias...)."""


class ModelSpecError(StreamplanError, ValueError):
    """A model name, path or ``file.py:function`` spec that cannot be loaded."""


class FileFormatError(StreamplanError, ValueError):
    """A file that is unreadable, not JSON, or not the expected schema."""


class UnsupportedError(StreamplanError, NotImplementedError):
    """Something in the model that streamplan cannot capture or run (lists all of them)."""


class CaptureError(StreamplanError, RuntimeError):
    """torch.export (or the model code it runs) failed."""


class ScheduleError(StreamplanError, ValueError):
    """A schedule that is malformed or invalid for its graph."""


class BudgetError(StreamplanError, ValueError):
    """A memory budget that no schedule or plan can meet."""


class ExecutionError(StreamplanError, RuntimeError):
    """An op failed while a schedule was being executed ("while executing %node")."""


class MissingDependencyError(StreamplanError, ImportError):
    """An optional package a feature needs is not installed (the hint says how to install it)."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) as the command line raises it (``on_sigint``): a plain
    ``KeyboardInterrupt`` met while a model's own code runs under that handler was raised
    by the code itself, and is reported as the model's error, not as an interruption."""


def on_sigint(signum: int, frame: object) -> None:
    """A SIGINT handler raising ``Interrupted`` (the command line installs it)."""
    raise Interrupted()
