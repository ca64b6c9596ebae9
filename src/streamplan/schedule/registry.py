"""The schedule policies by name, imported lazily: one entry here adds a policy.

Every policy is ``fn(graph, ctx) -> StreamSchedule`` and declares the options it takes
as a frozen dataclass in its own module, which its entry names
(``streamplan.schedule.options``); ``make_schedule`` is the single way in: it checks the
options, runs the policy, drops redundant waits, verifies the result and records the
search time. Nothing outside this module branches on a policy's name: what other code
needs to know about a policy is a field of its entry (``multi_stream``, ``budgeted``,
``searched``).
"""

from __future__ import annotations

import importlib
import importlib.util
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamplan.errors import ScheduleError
from streamplan.ir.fingerprint import META_KEY as FINGERPRINT_KEY
from streamplan.ir.fingerprint import graph_fingerprint
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.schedule.context import DEFAULT_CONTEXT, ScheduleContext
from streamplan.schedule.events import prune_waits
from streamplan.schedule.options import NoOptions, build_options, option_names

PolicyFn = Callable[[Graph, ScheduleContext], StreamSchedule]


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    """A policy: its name, where its function lives, one line on what it does, and where its
    options class lives (``"module:Class"``; None: it takes no options)."""

    name: str
    path: str  # "module:function"
    summary: str
    options: str | None = None
    multi_stream: bool = True
    budgeted: bool = False  # reads the context's memory budget (others ignore it)
    searched: bool = False  # its own search grows steeply with the graph (others are near linear)

    def options_type(self) -> type:
        """The policy's options dataclass (``NoOptions`` when it takes none)."""
        if self.options is None:
            return NoOptions
        module_name, _, class_name = self.options.partition(":")
        return getattr(importlib.import_module(module_name), class_name)

    def option_names(self) -> tuple[str, ...]:
        return option_names(self.options_type())


# Display order: baselines first, then the multi-stream policies from simple to searched.
_REGISTRY: tuple[PolicyInfo, ...] = (
    PolicyInfo(
        "sequential",
        "streamplan.schedule.sequential:schedule_sequential",
        "one stream in graph order (the baseline; what eager PyTorch does)",
        multi_stream=False,
    ),
    PolicyInfo(
        "memory",
        "streamplan.schedule.memory_order:schedule_memory",
        "one stream in a peak-minimising order",
        "streamplan.schedule.memory_order:MemoryOrderOptions",
        multi_stream=False,
    ),
    PolicyInfo(
        "wavefront",
        "streamplan.schedule.wavefront:schedule_wavefront",
        "RAF: waves of ready ops, one chain per stream, a barrier between waves",
    ),
    PolicyInfo("asap", "streamplan.schedule.asap:schedule_asap", "RAF: each op continues its input's chain"),
    PolicyInfo(
        "nimble",
        "streamplan.schedule.nimble:schedule_nimble",
        "Nimble: chains from a maximum matching, fewest syncs",
    ),
    PolicyInfo(
        "ios",
        "streamplan.schedule.ios:schedule_ios",
        "IOS: dynamic program over stages, costed by the simulator",
        "streamplan.schedule.ios:IosOptions",
        searched=True,
    ),
    PolicyInfo(
        "budget",
        "streamplan.budget.policy:schedule_budget",
        "the fastest schedule found whose worst-case peak fits the context's memory budget",
        "streamplan.budget.policy:BudgetOptions",
        budgeted=True,
    ),
    PolicyInfo(
        "overlap",
        "streamplan.schedule.overlap:schedule_overlap",
        "collectives on communication streams, prefetched, with the host's in-flight limit (FSDP, DDP)",
        "streamplan.schedule.overlap:OverlapOptions",
    ),
)
_BY_NAME: dict[str, PolicyInfo] = {p.name: p for p in _REGISTRY}

POLICIES: tuple[str, ...] = tuple(_BY_NAME)
BASELINE_POLICY = "sequential"  # what speedups are measured against


def policy_info(name: str) -> PolicyInfo:
    """The registry entry of ``name`` (``ScheduleError`` listing the policies when unknown)."""
    info = _BY_NAME.get(name)
    if info is None:
        raise ScheduleError(f"unknown policy {name!r}", hint=f"choose one of: {', '.join(POLICIES)}")
    return info


def get_policy(name: str) -> PolicyFn:
    """The policy function called ``name``."""
    info = policy_info(name)
    module_name, _, func_name = info.path.partition(":")
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
    return tuple(p.name for p in _REGISTRY if importlib.util.find_spec(p.path.partition(":")[0]) is not None)


def policy_options(name: str, given: Any = None) -> Any:
    """``given`` (a mapping of option names, an instance, or None) as policy ``name``'s options
    class; ``ScheduleError`` for an option it does not take or a bad value."""
    return build_options(name, policy_info(name).options_type(), given)


def unbudgeted_policies() -> tuple[str, ...]:
    """The policies that schedule without a budget (the starting points of a budget search)."""
    return tuple(p.name for p in _REGISTRY if not p.budgeted)


def make_schedule(graph: Graph, policy: str, ctx: ScheduleContext | None = None) -> StreamSchedule:
    """Schedule ``graph`` with ``policy`` under ``ctx``: verified, redundant waits removed.

    ``meta["search_time_s"]`` records how long the policy took (pruning included),
    ``meta["max_streams"]`` the cap it ran under and ``meta["graph"]`` the graph's
    fingerprint (``streamplan.ir.fingerprint``).
    """
    from streamplan.schedule.verify import verify_schedule

    ctx = DEFAULT_CONTEXT if ctx is None else ctx
    ctx = ctx.replace(options=policy_options(policy, ctx.options))  # checked and typed
    fn = get_policy(policy)
    t0 = time.perf_counter()
    schedule = fn(graph, ctx)
    if schedule.waits:
        schedule = prune_waits(graph, schedule)
    elapsed = time.perf_counter() - t0
    verify_schedule(graph, schedule)
    meta = dict(schedule.meta)
    meta["search_time_s"] = elapsed
    meta.setdefault("max_streams", ctx.max_streams)
    meta[FINGERPRINT_KEY] = graph_fingerprint(graph)  # which graph a saved schedule belongs to
    return schedule.replace(meta=meta)
