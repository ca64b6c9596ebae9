"""The Ray engine: the same captures and jobs as Ray tasks, on a local or a remote Ray cluster.

Each model request is one capture task; its result (the graph JSON) lives in Ray's
object store, and every job of that request is a task that takes the capture's object
reference as its argument, so the graph goes from the capturing worker to the
analysing ones without passing through the driver. Results stream back as they
finish (``ray.wait``). A task whose worker dies is retried once by Ray itself
(``max_retries=1``); if it dies again, its row records the failure.

Ray is optional: ``pip install 'streamplan[ray]'``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from streamplan.errors import MissingDependencyError, StreamplanError
from streamplan.sweep.engine import CaptureGroup, EmitFn, died_twice
from streamplan.sweep.rows import SweepRow
from streamplan.sweep.spec import Job, SweepSettings
from streamplan.sweep.worker import capture, run_job

RETRIES = 1  # a task whose worker dies runs once more, then its row records the failure


class RayConnectError(StreamplanError, ConnectionError):
    """Ray could not start locally or reach the cluster at the address given."""


def import_ray() -> Any:
    """The ``ray`` module, or a ``MissingDependencyError`` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise MissingDependencyError(
            "running a sweep on Ray needs the optional package 'ray'",
            hint="pip install 'streamplan[ray]'  (or: pip install ray)",
        ) from None
    return ray


class RayEngine:
    """Jobs as Ray tasks: on the cluster at ``address`` (``"auto"``, ``"ray://head:10001"``...),
    or on a Ray started here with ``num_cpus`` (default: every core) when ``address`` is None.
    A Ray session already open in this process is used as it is, and left open."""

    name = "ray"

    def __init__(self, address: str | None = None, *, num_cpus: int | None = None):
        self.address = address
        self.num_cpus = num_cpus
        import_ray()  # fail now, not after the sweep was planned

    def run(
        self,
        groups: Sequence[CaptureGroup],
        settings: SweepSettings,
        emit: EmitFn,
        *,
        share_captures: bool = True,
    ) -> None:
        """Run every job of ``groups`` as Ray tasks, calling ``emit`` with each row as it finishes."""
        ray = import_ray()
        started = self._connect(ray)
        capture_task = ray.remote(num_cpus=1, max_retries=RETRIES)(capture)
        job_task = ray.remote(num_cpus=1, max_retries=RETRIES)(run_job)
        pending: dict[Any, tuple[Job, Any]] = {}  # job's ref -> (job, its capture's ref)
        try:
            for group in groups:
                captured = capture_task.remote(group.request) if share_captures else None
                for job in group.jobs:
                    pending[job_task.remote(job, settings, captured)] = (job, captured)
            while pending:
                ray.wait(list(pending), num_returns=1)  # block until one is done, then take all that are
                ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
                for ref in ready:
                    job, captured = pending.pop(ref)
                    emit(self._row(ray, ref, job, captured, settings))
        except BaseException:
            for ref in pending:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            raise
        finally:
            if started:
                ray.shutdown()

    def _connect(self, ray: Any) -> bool:
        """Start or join Ray unless this process already has; True when this call started it."""
        if ray.is_initialized():
            return False
        local = self.address is None
        if not local:
            _check_reachable(self.address)
        try:
            ray.init(
                address=self.address,
                num_cpus=self.num_cpus if local else None,
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
        except Exception as e:  # Ray's errors for an unreachable or misconfigured cluster vary
            where = "a local Ray" if local else f"the Ray cluster at {self.address}"
            raise RayConnectError(
                f"cannot start or reach {where}: {type(e).__name__}: {e}",
                hint="check the address (ray://HOST:10001, HOST:6379 or auto) and that the cluster is up",
            ) from None
        return True

    @staticmethod
    def _row(ray: Any, ref: Any, job: Job, captured: Any, settings: SweepSettings) -> SweepRow:
        try:
            return ray.get(ref)
        except ray.exceptions.RayError:
            pass
        # the job's task failed in Ray, not in streamplan (which puts errors in rows): its
        # worker died on both tries, or the capture it depends on did
        if captured is not None:
            try:
                ray.get(captured, timeout=0)
            except ray.exceptions.RayError:
                return SweepRow.failed(
                    job, settings, died_twice(f"loading {job.model}"), attempts=RETRIES + 1
                )
            except Exception:  # not ready (cannot happen once the job ran): blame the job
                pass
        return SweepRow.failed(job, settings, died_twice("running this job"), attempts=RETRIES + 1)


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast on a cluster address nothing answers at: Ray itself retries for minutes."""
    import socket

    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if address == "auto" or not sep or not port.isdigit():
        return  # "auto" and addresses Ray resolves itself
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise RayConnectError(
            f"nothing answers at {hostport}: {e.strerror or e}",
            where=address,
            hint="check the address (ray://HOST:10001 or HOST:6379) and that the cluster is up",
        ) from None
