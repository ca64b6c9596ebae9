"""What an engine is given and must do, whichever processes or machines it runs jobs on.

An engine receives the jobs to run grouped by model request (``CaptureGroup``: the
jobs of one group share one capture) and calls ``emit(row)`` in the calling thread
for each job as it finishes, in any order, exactly once per job:

- with ``share_captures`` it loads each group's graph once (``worker.capture``) and
  hands the graph JSON to the group's jobs; without, every job loads its own;
- a job that fails gives a row with its error (the workers never raise for it);
- a worker process that dies runs its job (or capture) once more; if it dies again,
  the job's row (every row of the group, for a capture) records that it failed;
- on ``KeyboardInterrupt`` it stops its workers and re-raises: the rows emitted so far
  are all there is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from streamplan.models import ModelRequest
from streamplan.sweep.rows import SweepRow
from streamplan.sweep.spec import Job, SweepSettings

EmitFn = Callable[[SweepRow], None]


@dataclass(frozen=True)
class CaptureGroup:
    """The jobs that analyse the graph of one model request."""

    request: ModelRequest
    jobs: tuple[Job, ...]


def group_jobs(jobs: Iterable[Job]) -> list[CaptureGroup]:
    """``jobs`` grouped by request, groups and jobs in their first-seen order."""
    groups: dict[ModelRequest, list[Job]] = {}
    for job in jobs:
        groups.setdefault(job.request(), []).append(job)
    return [CaptureGroup(r, tuple(js)) for r, js in groups.items()]


class Engine(Protocol):
    """Runs a sweep's jobs somewhere (see the module doc for the contract)."""

    name: str

    def run(
        self,
        groups: Sequence[CaptureGroup],
        settings: SweepSettings,
        emit: EmitFn,
        *,
        share_captures: bool = True,
    ) -> None: ...


def died_twice(what: str) -> str:
    """The error of a job whose worker died on both tries."""
    return f"the worker process died while {what}, and again when it was retried (killed, or out of memory?)"
