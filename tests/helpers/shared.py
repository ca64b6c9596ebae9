"""Work shared by every process of one test run: captured graphs and schedules, on disk.

``conftest.py`` makes one temporary folder per run (``STREAMPLAN_TEST_SHARED_DIR``): the
first process to import it (pytest-xdist's controller, or a plain run) makes the folder and
removes it at exit, and the xdist workers inherit it. A capture of a zoo model, or an IOS or
budget search on a large graph, takes seconds; the same one was made by several test files,
once per worker. Here it is made once per run and read back (graph and schedule JSON are
exact round trips). Entries are written atomically; a process asking for an entry another
one is making waits for it (a lock file per entry) rather than making it too: the two
xdist workers often reach the same zoo capture at once, and on two cores making it twice
costs both of them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
ENV = "STREAMPLAN_TEST_SHARED_DIR"


def shared_dir() -> Path | None:
    """The run's shared folder (None outside the test suite's conftest)."""
    d = os.environ.get(ENV)
    return Path(d) / "shared" if d else None


def _stored(
    kind: str, key: Any, make: Callable[[], T], dump: Callable[[T], str], load: Callable[[str], T]
) -> T:
    root = shared_dir()
    if root is None:
        return make()
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:32]
    path = root / kind / f"{digest}.json"
    value = _read(path, load)
    if value is not None:
        return value
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path.with_name(f"{path.name}.lock")):
        value = _read(path, load)  # made by another process while this one waited
        if value is not None:
            return value
        value = make()
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(dump(value))
        os.replace(tmp, path)
    return value


def _read(path: Path, load: Callable[[str], T]) -> T | None:
    if not path.exists():
        return None
    try:
        return load(path.read_text())
    except (OSError, ValueError):
        return None  # half-read or stale: make it again


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` across processes (released when the holder exits, too)."""
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def stored_graph(key: Any, make: Callable[[], Any]):
    """The graph ``make()`` captures, made once per run for ``key``."""
    from streamplan.ir.serialize import dumps, loads

    return _stored("graphs", key, make, dumps, lambda text: loads(text))


def stored_schedule(graph, policy: str, ctx=None):
    """``make_schedule(graph, policy, ctx)``, made once per run for an equal graph and context
    (a context whose cost model is not a device profile's is not shared)."""
    from streamplan.cost.opcost import AnalyticCostModel
    from streamplan.ir.fingerprint import graph_fingerprint
    from streamplan.ir.schedule import StreamSchedule
    from streamplan.schedule import make_schedule
    from streamplan.schedule.context import DEFAULT_CONTEXT

    ctx = ctx or DEFAULT_CONTEXT
    if type(ctx.cost) is not AnalyticCostModel:
        return make_schedule(graph, policy, ctx)
    key = {
        "graph": graph_fingerprint(graph),
        "policy": policy,
        "context": repr(ctx.replace(progress=None)),  # every field but the progress callback
    }
    return _stored(
        "schedules",
        key,
        lambda: make_schedule(graph, policy, ctx),
        lambda s: s.dumps(),
        lambda text: StreamSchedule.from_dict(json.loads(text)),
    )
