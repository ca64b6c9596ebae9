"""The schedule policies by name, imported lazily: one line here adds a policy.

``make_schedule`` runs a policy, drops redundant waits and records the search time.
"""

from __future__ import annotations

import importlib
import importlib.util
import time
from collections.abc import Callable
from typing import Any

from streamplan.errors import ScheduleError
from streamplan.ir.graph import Graph
from streamplan.schedule.events import prune_waits
from streamplan.schedule.schedule import StreamSchedule

# Display order: baselines first, then the multi-stream policies from simple to searched.
_POLICY_PATHS: dict[str, str] = {
    "sequential": "streamplan.schedule.sequential:schedule_sequential",
    "memory": "streamplan.schedule.memory_order:schedule_memory",
    "wavefront": "streamplan.schedule.wavefront:schedule_wavefront",
    "asap": "streamplan.schedule.asap:schedule_asap",
    "nimble": "streamplan.schedule.nimble:schedule_nimble",
    "ios": "streamplan.schedule.ios:schedule_ios",
}

POLICIES: tuple[str, ...] = tuple(_POLICY_PATHS)


def get_policy(name: str) -> Callable[..., StreamSchedule]:
    """The policy function called ``name`` (``ScheduleError`` listing the policies when unknown)."""
    path = _POLICY_PATHS.get(name)
    if path is None:
        raise ScheduleError(f"unknown policy {name!r}", hint=f"choose one of: {', '.join(POLICIES)}")
    module_name, _, func_name = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name != module_name:
            raise
        raise ScheduleError(
            f"policy {name!r} is not available in this build ({module_name} is missing)",
            hint=f"choose one of: {', '.join(available_policies())}",
        ) from None
    return getattr(module, func_name)


def available_policies() -> tuple[str, ...]:
    """The policies whose module can be imported here."""
    found = []
    for name, path in _POLICY_PATHS.items():
        if importlib.util.find_spec(path.partition(":")[0]) is not None:
            found.append(name)
    return tuple(found)


def make_schedule(graph: Graph, policy: str, *, max_streams: int = 8, **options: Any) -> StreamSchedule:
    """Schedule ``graph`` with ``policy`` on at most ``max_streams`` streams, redundant waits removed.

    ``meta["search_time_s"]`` records how long the policy took (pruning included).
    """
    if not isinstance(max_streams, int) or max_streams < 1:
        raise ScheduleError(f"max_streams must be an int >= 1, got {max_streams!r}")
    fn = get_policy(policy)
    t0 = time.perf_counter()
    schedule = fn(graph, max_streams=max_streams, **options)
    if schedule.waits:
        schedule = prune_waits(graph, schedule)
    elapsed = time.perf_counter() - t0
    meta = dict(schedule.meta)
    meta["search_time_s"] = elapsed
    meta.setdefault("max_streams", max_streams)
    return schedule.replace(meta=meta)
