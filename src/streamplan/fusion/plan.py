"""Scheduling with fusion: the one place that decides what ``ctx.fusion`` means.

- ``none``: the policy schedules the ops as captured (``make_schedule``);
- ``first``: the graph is fused, then the policy schedules the kernels. Fusion sees
  every op, so it may merge parallel branches into one kernel (horizontal fusion of
  pointwise ops reading one tensor, a pointwise op joining two branches): the scheduler
  then has fewer, bigger nodes and less to run in parallel;
- ``stream-aware``: the policy schedules the ops, then only ops that one stream runs
  in order are fused; the schedule is carried over to the kernels, so everything the
  schedule ran in parallel still runs in parallel.

The schedule records how it was fused (``meta["fusion"]``), so a saved schedule
rebuilds its kernels from the model alone (``graph_for_schedule``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from streamplan.fusion.rules import INDUCTOR_RULES, FusionRules
from streamplan.fusion.transform import FusionResult, fuse, refuse, schedule_onto
from streamplan.ir.fingerprint import META_KEY as FINGERPRINT_KEY
from streamplan.ir.fingerprint import graph_fingerprint
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.schedule.context import DEFAULT_CONTEXT, ScheduleContext
from streamplan.schedule.registry import make_schedule


@dataclass(frozen=True)
class FusedSchedule:
    """A verified schedule and the graph it runs: the kernels (``fusion`` says how they were
    made) or, without fusion, the graph as captured (``fusion`` None)."""

    graph: Graph
    schedule: StreamSchedule
    fusion: FusionResult | None = None


def schedule_with_fusion(
    graph: Graph, policy: str, ctx: ScheduleContext | None = None, *, rules: FusionRules = INDUCTOR_RULES
) -> FusedSchedule:
    """Schedule ``graph`` with ``policy``, fused as ``ctx.fusion`` says (``none`` by default)."""
    ctx = ctx or DEFAULT_CONTEXT
    return _MODES[ctx.fusion](graph, policy, ctx, rules)


def _none(graph: Graph, policy: str, ctx: ScheduleContext, rules: FusionRules) -> FusedSchedule:
    return FusedSchedule(graph, make_schedule(graph, policy, ctx))


def _first(graph: Graph, policy: str, ctx: ScheduleContext, rules: FusionRules) -> FusedSchedule:
    ctx.progress("fusing", None, None)
    t0 = time.perf_counter()
    result = fuse(graph, rules)
    fuse_s = time.perf_counter() - t0
    schedule = make_schedule(result.graph, policy, ctx)
    return FusedSchedule(result.graph, _recorded(schedule, result, "first", fuse_s, graph), result)


def _stream_aware(graph: Graph, policy: str, ctx: ScheduleContext, rules: FusionRules) -> FusedSchedule:
    schedule = make_schedule(graph, policy, ctx)
    ctx.progress("fusing along each stream", None, None)
    t0 = time.perf_counter()
    result = fuse(graph, rules, schedule=schedule)
    mapped = schedule_onto(result, schedule)
    fuse_s = time.perf_counter() - t0
    return FusedSchedule(result.graph, _recorded(mapped, result, "stream-aware", fuse_s, graph), result)


_MODES: dict[str, Callable[[Graph, str, ScheduleContext, FusionRules], FusedSchedule]] = {
    "none": _none,
    "first": _first,
    "stream-aware": _stream_aware,
}


def _recorded(
    schedule: StreamSchedule, result: FusionResult, mode: str, fuse_s: float, source: Graph
) -> StreamSchedule:
    """The schedule with its fusion record, and the fingerprint of the model's graph (the
    kernels are rebuilt from it, so a saved schedule belongs to the model, not the kernels)."""
    return schedule.with_meta(
        fusion={"mode": mode, **result.to_dict()},
        fusion_time_s=fuse_s,
        **{FINGERPRINT_KEY: graph_fingerprint(source)},
    )


def schedule_same_kernels(
    source: Graph, planned: FusedSchedule, policy: str, ctx: ScheduleContext | None = None
) -> StreamSchedule:
    """``policy``'s schedule of the graph ``planned`` runs (to compare two schedules of one graph).

    Fused first, ``policy`` schedules the same kernels; stream-aware, it schedules the
    ops and its schedule is carried onto ``planned``'s kernels (its own barriers dropped:
    they were not made for these kernels).
    """
    ctx = ctx or DEFAULT_CONTEXT
    return _SAME_KERNELS[fusion_mode(planned.schedule)](source, planned, policy, ctx.replace(fusion="none"))


_SAME_KERNELS: dict[str, Callable[[Graph, FusedSchedule, str, ScheduleContext], StreamSchedule]] = {
    "none": lambda source, planned, policy, ctx: make_schedule(source, policy, ctx),
    "first": lambda source, planned, policy, ctx: make_schedule(planned.graph, policy, ctx),
    "stream-aware": lambda source, planned, policy, ctx: schedule_onto(
        planned.fusion, make_schedule(source, policy, ctx), keep_barriers=False
    ),
}


_FUSES_BEFORE_SCHEDULING = {"none": False, "first": True, "stream-aware": False}


def fuses(mode: str) -> bool:
    """Whether the fusion mode ``mode`` runs fused kernels (every mode but ``none``)."""
    return mode != "none"


def fuses_after_scheduling(mode: str) -> bool:
    """Whether the fusion mode ``mode`` fuses the ops after the policy scheduled them (so the
    kernels that run are not the ones the policy saw)."""
    return mode in _MODES and not _FUSES_BEFORE_SCHEDULING[mode] and fuses(mode)


def is_fused(schedule: StreamSchedule) -> bool:
    """Whether ``schedule`` runs fused kernels (it carries a fusion record)."""
    return isinstance(schedule.meta.get("fusion"), dict)


def fuses_before_scheduling(schedule: StreamSchedule) -> bool:
    """Whether ``schedule`` was made for kernels fused before scheduling (so fusion could merge
    branches the policy would have run in parallel)."""
    return _FUSES_BEFORE_SCHEDULING[fusion_mode(schedule)]


def fusion_mode(schedule: StreamSchedule) -> str:
    """How ``schedule`` was fused (``none`` when it runs the ops as captured)."""
    record = schedule.meta.get("fusion")
    return str(record.get("mode", "none")) if isinstance(record, dict) else "none"


def graph_for_schedule(graph: Graph, schedule: StreamSchedule) -> FusedSchedule:
    """The graph a (saved) schedule runs: ``graph`` itself, or its kernels rebuilt from the
    schedule's fusion record. The schedule is not verified here."""
    record = schedule.meta.get("fusion")
    if not isinstance(record, dict):
        return FusedSchedule(graph, schedule)
    result = refuse(graph, record, source=f"schedule {schedule.policy} of {graph.name}")
    return FusedSchedule(result.graph, schedule, result)
