"""``run_sweep``: every job of a sweep on an engine, each row kept as it finishes."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamplan.progress import ProgressFn, no_progress
from streamplan.sweep.engine import Engine, group_jobs
from streamplan.sweep.journal import Journal
from streamplan.sweep.rows import SweepRow
from streamplan.sweep.spec import Job, SweepSettings, SweepSpec


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a sweep; ``result`` holds the rows finished before it (all in the output)."""

    def __init__(self, result: SweepResult):
        super().__init__("sweep interrupted")
        self.result = result


@dataclass(frozen=True)
class SweepResult:
    """A sweep's rows in job order (those finished, when it was interrupted) and its counts.

    ``skipped`` rows were already in the output (a resumed sweep); ``ran`` ran now;
    ``failed`` counts the rows with an error, old and new.
    """

    rows: tuple[SweepRow, ...]
    total: int
    ran: int
    skipped: int
    elapsed_s: float
    engine: str
    output: str | None = None

    @property
    def failed(self) -> int:
        return sum(1 for r in self.rows if not r.ok)

    @property
    def complete(self) -> bool:
        return len(self.rows) == self.total

    def to_dicts(self) -> list[dict[str, Any]]:
        """The rows as written to the output, in job order."""
        return [r.to_dict() for r in self.rows]

    def to_dataframe(self) -> Any:
        """The rows as a pandas DataFrame, nested figures as dotted columns
        (``memory.worst_case_peak_bytes.upper``); needs pandas."""
        from streamplan.sweep.export import to_dataframe

        return to_dataframe(self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "output": self.output,
            "engine": self.engine,
            "total": self.total,
            "ran": self.ran,
            "skipped": self.skipped,
            "failed": self.failed,
            "elapsed_s": self.elapsed_s,
            "rows": self.to_dicts(),
        }


def run_sweep(
    spec: SweepSpec,
    *,
    settings: SweepSettings = SweepSettings(),
    output: str | Path | None = None,
    engine: Engine | None = None,
    progress: ProgressFn = no_progress,
    restart: bool = False,
    retry_failed: bool = False,
    share_captures: bool = True,
) -> SweepResult:
    """Run every job of ``spec`` on ``engine`` (default: a local pool over this machine's cores).

    With ``output`` (a JSON Lines file) each row is appended as it finishes; rows already
    there are not run again (``restart`` discards them, ``retry_failed`` reruns the failed
    ones). ``share_captures=False`` makes every job load its own model (slower: for
    measuring what sharing saves). On ``KeyboardInterrupt`` the workers are stopped and
    the interrupt is re-raised; every finished row is in ``output``.
    """
    from streamplan.sweep.local import LocalEngine

    t0 = time.perf_counter()
    engine = engine or LocalEngine()
    jobs = spec.jobs()
    journal = Journal.open(output, settings, restart=restart, retry_failed=retry_failed) if output else None
    try:
        have: dict[tuple[Any, ...], SweepRow] = dict(journal.rows) if journal else {}
        todo = [j for j in jobs if j.key() not in have]
        skipped = len(jobs) - len(todo)
        counts = {"done": 0, "failed": 0}

        def report() -> None:
            failed = f", {counts['failed']} failed" if counts["failed"] else ""
            resumed = f" ({skipped} already done)" if skipped else ""
            progress(f"sweep on {engine.name}{resumed}{failed}", counts["done"], len(todo))

        def emit(row: SweepRow) -> None:
            if journal is not None:
                journal.append(row)
            have[row.key] = row
            counts["done"] += 1
            counts["failed"] += not row.ok
            report()

        report()
        if todo:
            try:
                engine.run(group_jobs(todo), settings, emit, share_captures=share_captures)
            except KeyboardInterrupt:
                raise SweepInterrupted(
                    _result(jobs, have, counts["done"], skipped, t0, engine, output)
                ) from None
    finally:
        if journal is not None:
            journal.close()
    return _result(jobs, have, counts["done"], skipped, t0, engine, output)


def _result(
    jobs: Sequence[Job],
    have: dict[tuple[Any, ...], SweepRow],
    ran: int,
    skipped: int,
    t0: float,
    engine: Engine,
    output: str | Path | None,
) -> SweepResult:
    return SweepResult(
        rows=tuple(have[j.key()] for j in jobs if j.key() in have),
        total=len(jobs),
        ran=ran,
        skipped=skipped,
        elapsed_s=time.perf_counter() - t0,
        engine=engine.name,
        output=None if output is None else str(output),
    )
