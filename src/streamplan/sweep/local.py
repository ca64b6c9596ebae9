"""The local engine: a pool of worker processes on this machine (one job at a time each).

Workers are forked by a ``forkserver`` (which imports streamplan once, so that a new
worker starts in milliseconds) or started with ``spawn``; never forked from the parent,
which may hold torch's threads (a forked child would inherit them locked). At most one task per
worker is in flight, so when a worker dies (``BrokenProcessPool`` fails every task
in flight) the culprit is one of those few. They all run again, one at a time on a
fresh pool, and then a death can only be the task's own: it is recorded as failed
(it died on both tries) and the sweep goes on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.machinery
import multiprocessing
import os
import sys
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from streamplan.errors import ModelSpecError
from streamplan.sweep.engine import CaptureGroup, EmitFn, died_twice
from streamplan.sweep.rows import SweepRow
from streamplan.sweep.spec import Job, SweepSettings
from streamplan.sweep.worker import Capture, capture, init_worker, run_job

START_METHODS = ("forkserver", "spawn")
# What a forkserver imports once, so that each worker it forks starts with them loaded:
# the job's code and the solvers it imports lazily (seconds per process otherwise). torch
# is left out: a process that imported it is not safe to fork.
PRELOAD = (
    "streamplan.sweep.worker",
    "streamplan.app.analysis",
    "streamplan.zoo.random_dag",
    "streamplan.zoo.seed",
    "ortools.sat.python.cp_model",
    "scipy.sparse.csgraph",
)


def preload_modules() -> list[str]:
    """``PRELOAD`` and the module of every registered policy."""
    from streamplan.schedule.registry import POLICIES, policy_info

    return [*PRELOAD, *dict.fromkeys(policy_info(p).path.partition(":")[0] for p in POLICIES)]


def default_start_method() -> str:
    """``forkserver`` where the platform has it (workers fork from a preloaded server), else ``spawn``."""
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


@dataclass(frozen=True)
class _Task:
    """A capture (``job`` None) or a job (``shared``: the capture it uses, if shared)."""

    group: CaptureGroup
    job: Job | None = None
    shared: Capture | None = None
    attempt: int = 1  # 2: running again after its worker died


class LocalEngine:
    """Jobs in a pool of ``workers`` processes (default: one per core)."""

    name = "local"

    def __init__(self, workers: int | None = None, *, start_method: str | None = None):
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise ModelSpecError(f"workers must be an integer >= 1, got {workers!r}")
        if start_method is not None and start_method not in START_METHODS:
            raise ModelSpecError(
                f"unknown start method {start_method!r}", hint=f"use one of {', '.join(START_METHODS)}"
            )
        self.workers = workers or os.cpu_count() or 1
        self.start_method = start_method or default_start_method()

    def run(
        self,
        groups: Sequence[CaptureGroup],
        settings: SweepSettings,
        emit: EmitFn,
        *,
        share_captures: bool = True,
    ) -> None:
        """Run every job of ``groups``, calling ``emit`` with each row as it finishes."""
        with _workers_skip_the_main_script():
            _Run(self, settings, emit).run(groups, share_captures)


@contextlib.contextmanager
def _workers_skip_the_main_script() -> Iterator[None]:
    """Start workers that do not run the calling script again. A ``spawn`` or ``forkserver``
    worker re-imports the script (or ``-m`` module) that is ``__main__`` (to find what it
    defines), and a script that calls ``run_sweep`` without an ``if __name__ == "__main__":``
    guard then starts a sweep inside every worker, each of which dies. The workers run
    streamplan's own functions on plain data, nothing the script defines, so they need not
    import it: a main module whose spec names it ``__main__`` is one multiprocessing does not
    import again."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    spec = getattr(main, "__spec__", None)  # None for a script; a module run with -m has its own
    main.__spec__ = importlib.machinery.ModuleSpec("__main__", None)
    try:
        yield
    finally:
        main.__spec__ = spec


class _Run:
    def __init__(self, engine: LocalEngine, settings: SweepSettings, emit: EmitFn):
        self.workers = engine.workers
        self.context = multiprocessing.get_context(engine.start_method)
        if engine.start_method == "forkserver":
            self.context.set_forkserver_preload(preload_modules())
        self.settings = settings
        self.emit = emit
        self.queue: deque[_Task] = deque()
        self.suspects: deque[_Task] = deque()  # in flight when a worker died: rerun one at a time
        self.in_flight: dict[Future, _Task] = {}

    def run(self, groups: Sequence[CaptureGroup], share_captures: bool) -> None:
        if share_captures:
            self.queue.extend(_Task(g) for g in groups)
        else:
            self.queue.extend(_Task(g, job) for g in groups for job in g.jobs)
        pool = self._pool()
        try:
            while self.queue or self.suspects or self.in_flight:
                self._submit(pool)
                done, _ = wait(self.in_flight, return_when=FIRST_COMPLETED)
                died = []
                for fut in done:
                    task = self.in_flight.pop(fut)
                    try:
                        result = fut.result()
                    except BrokenProcessPool:
                        died.append(task)
                    else:
                        self._finished(task, result)
                if died:  # the pool is broken: every task still in flight fails with it
                    wait(self.in_flight)
                    died.extend(self.in_flight.values())
                    self.in_flight.clear()
                    pool.shutdown(wait=True)
                    pool = self._pool()
                    for task in died:
                        self._died(task)
            pool.shutdown(wait=True)
        except BaseException:
            _stop(pool)
            raise

    def _pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=self.workers, mp_context=self.context, initializer=init_worker)

    def _submit(self, pool: ProcessPoolExecutor) -> None:
        if self.suspects:  # alone, so that a death can only be the suspect's own
            if not self.in_flight:
                self._start(pool, self.suspects.popleft())
            return
        while self.queue and len(self.in_flight) < self.workers:
            self._start(pool, self.queue.popleft())

    def _start(self, pool: ProcessPoolExecutor, task: _Task) -> None:
        if task.job is None:
            fut = pool.submit(capture, task.group.request)
        else:
            fut = pool.submit(run_job, task.job, self.settings, task.shared)
        self.in_flight[fut] = task

    def _finished(self, task: _Task, result: Capture | SweepRow) -> None:
        if isinstance(result, SweepRow):
            self.emit(dataclasses.replace(result, attempts=task.attempt))
        elif result.error is not None:  # every job of a model that failed to load fails with it
            for job in task.group.jobs:
                self.emit(SweepRow.failed(job, self.settings, f"loading the model failed: {result.error}"))
        else:  # its jobs next, before other captures: rows appear early and the graph JSON is freed
            self.queue.extendleft(_Task(task.group, job, result) for job in reversed(task.group.jobs))

    def _died(self, task: _Task) -> None:
        if task.attempt == 1:
            self.suspects.append(dataclasses.replace(task, attempt=2))
            return
        if task.job is None:
            error = died_twice(f"loading {task.group.request.spec}")
            for job in task.group.jobs:
                self.emit(SweepRow.failed(job, self.settings, error, attempts=2))
        else:
            self.emit(SweepRow.failed(task.job, self.settings, died_twice("running this job"), attempts=2))


def _stop(pool: ProcessPoolExecutor) -> None:
    """Stop ``pool`` now: queued tasks cancelled, running workers terminated (an interrupted
    sweep must not wait for a long search to finish)."""
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14+
    if terminate is not None:
        terminate()
        return
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=5)
