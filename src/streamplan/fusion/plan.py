"""Scheduling with fusion: the one place that decides what ``ctx.fusion`` means.

- ``none``: the policy schedules the ops as captured (``make_schedule``);
- ``first``: the graph is fused, then the policy schedules the kernels. Fusion sees
  every op, so it may merge parallel branches into one kernel (horizontal fusion of
  pointwise ops reading one tensor, a pointwise op joining two branches): the scheduler
  then has fewer, bigger nodes and less to run in parallel;
- ``stream-aware``: the policy schedules the ops, then only ops that one stream runs
  in order are fused; the schedule is carried over to the kernels, so everything the
  schedule ran in parallel still runs in parallel.

The schedule records how it was fused (``StreamSchedule.fusion``, a ``FusionRecord``), so a
saved schedule rebuilds its kernels from the model alone (``graph_for_schedule``).
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
from streamplan.ir.schedule import Fusion, StreamSchedule
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
    return FusedSchedule(result.graph, _recorded(schedule, result, Fusion.FIRST, fuse_s, graph), result)


def _stream_aware(graph: Graph, policy: str, ctx: ScheduleContext, rules: FusionRules) -> FusedSchedule:
    schedule = make_schedule(graph, policy, ctx)
    ctx.progress("fusing along each stream", None, None)
    t0 = time.perf_counter()
    result = fuse(graph, rules, schedule=schedule)
    mapped = schedule_onto(result, schedule)
    fuse_s = time.perf_counter() - t0
    return FusedSchedule(result.graph, _recorded(mapped, result, Fusion.STREAM_AWARE, fuse_s, graph), result)


_MODES: dict[Fusion, Callable[[Graph, str, ScheduleContext, FusionRules], FusedSchedule]] = {
    Fusion.NONE: _none,
    Fusion.FIRST: _first,
    Fusion.STREAM_AWARE: _stream_aware,
}


def _recorded(
    schedule: StreamSchedule, result: FusionResult, mode: Fusion, fuse_s: float, source: Graph
) -> StreamSchedule:
    """The schedule with its fusion record, and the fingerprint of the model's graph (the
    kernels are rebuilt from it, so a saved schedule belongs to the model, not the kernels)."""
    meta = {**schedule.meta, "fusion_time_s": fuse_s, FINGERPRINT_KEY: graph_fingerprint(source)}
    return schedule.replace(fusion=result.record(mode), meta=meta)


def schedule_same_kernels(
    source: Graph, planned: FusedSchedule, policy: str, ctx: ScheduleContext | None = None
) -> StreamSchedule:
    """``policy``'s schedule of the graph ``planned`` runs (to compare two schedules of one graph).

    Fused first, ``policy`` schedules the same kernels; stream-aware, it schedules the
    ops and its schedule is carried onto ``planned``'s kernels (its own barriers dropped:
    they were not made for these kernels).
    """
    ctx = ctx or DEFAULT_CONTEXT
    mode = planned.schedule.fusion_mode
    return _SAME_KERNELS[mode](source, planned, policy, ctx.replace(fusion=Fusion.NONE))


_SAME_KERNELS: dict[Fusion, Callable[[Graph, FusedSchedule, str, ScheduleContext], StreamSchedule]] = {
    Fusion.NONE: lambda source, planned, policy, ctx: make_schedule(source, policy, ctx),
    Fusion.FIRST: lambda source, planned, policy, ctx: make_schedule(planned.graph, policy, ctx),
    Fusion.STREAM_AWARE: lambda source, planned, policy, ctx: schedule_onto(
        planned.fusion, make_schedule(source, policy, ctx), keep_barriers=False
    ),
}


_FUSES_BEFORE_SCHEDULING = {Fusion.NONE: False, Fusion.FIRST: True, Fusion.STREAM_AWARE: False}


def fuses(mode: str) -> bool:
    """Whether the fusion mode ``mode`` runs fused kernels (every mode but ``none``)."""
    return mode != Fusion.NONE


def fuses_after_scheduling(mode: str) -> bool:
    """Whether the fusion mode ``mode`` fuses the ops after the policy scheduled them (so the
    kernels that run are not the ones the policy saw)."""
    return mode in _MODES and not _FUSES_BEFORE_SCHEDULING[mode] and fuses(mode)


def fuses_before_scheduling(schedule: StreamSchedule) -> bool:
    """Whether ``schedule`` was made for kernels fused before scheduling (so fusion could merge
    branches the policy would have run in parallel)."""
    return _FUSES_BEFORE_SCHEDULING[schedule.fusion_mode]


def graph_for_schedule(graph: Graph, schedule: StreamSchedule) -> FusedSchedule:
    """The graph a (saved) schedule runs: ``graph`` itself, or its kernels rebuilt from the
    schedule's fusion record. The schedule is not verified here."""
    if schedule.fusion is None:
        return FusedSchedule(graph, schedule)
    result = refuse(graph, schedule.fusion, source=f"schedule {schedule.policy} of {graph.name}")
    return FusedSchedule(result.graph, schedule, result)
