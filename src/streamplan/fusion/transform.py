"""The fusion transform: a graph of ATen ops in, a graph of kernels out, and schedules carried across.

``fuse(graph)`` groups ops into kernels under the rules (``fusion.groups``) and builds
the fused graph (``fusion.build``). Given a schedule's streams it fuses only ops that
share a stream (``fuse(graph, schedule=s)``), and ``schedule_onto`` then carries that
schedule over to the kernels: each kernel on its ops' stream, launched where its first
op was as far as dependencies allow, with the cross-stream waits derived again (and
the schedule's non-data waits, such as IOS's stage barriers, kept between kernels).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamplan.errors import ScheduleError, StreamplanError
from streamplan.fusion.build import build_fused_graph
from streamplan.fusion.cse import deduplicate, find_duplicates
from streamplan.fusion.groups import Grouping, find_groups
from streamplan.fusion.kinds import op_class
from streamplan.fusion.rules import INDUCTOR_RULES, FusionRules
from streamplan.ir.frozen import freeze
from streamplan.ir.fused import is_concat_in_place
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import Fusion, FusionRecord, StreamSchedule
from streamplan.schedule.events import derive_waits
from streamplan.schedule.verify import verify_schedule


@dataclass(frozen=True, eq=False)
class FusionResult:
    """A graph of kernels made from ``source``.

    ``duplicates`` maps each op computed again by an earlier identical op to that op
    (``fusion.cse``); ``base`` is ``source`` without them, the graph the kernels partition.
    ``groups`` maps each fused node's id to the ids of the ops it runs (single ops keep
    their id and are not listed); ``concats_in_place`` lists the concatenations written in
    place by their producers; ``folds`` the (convolution, batch-norm) pair a kernel folds.
    """

    source: Graph
    graph: Graph
    rules: FusionRules
    groups: Mapping[str, tuple[str, ...]]
    concats_in_place: tuple[str, ...] = ()
    folds: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    duplicates: Mapping[str, str] = field(default_factory=dict)
    base: Graph | None = None
    _kernel_of: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", freeze(self.groups))
        object.__setattr__(self, "folds", freeze(self.folds))
        object.__setattr__(self, "duplicates", freeze(self.duplicates))
        if self.base is None:
            object.__setattr__(self, "base", self.source)
        for k, parts in self.groups.items():
            for p in parts:
                self._kernel_of[p] = k

    def kernel_of(self, op: str) -> str:
        """The id of the node of ``graph`` that runs (or, for a duplicate, already ran) ``op``."""
        op = self.duplicates.get(op, op)
        return self._kernel_of.get(op, op)

    @property
    def kernels_before(self) -> int:
        return kernel_count(self.source)

    @property
    def kernels_after(self) -> int:
        return kernel_count(self.graph)

    def record(self, mode: Fusion) -> FusionRecord:
        """What a schedule of these kernels keeps to rebuild them from the model (``refuse``)."""
        return FusionRecord(
            mode=mode,
            groups=self.groups,
            rules=self.rules.to_dict(),
            folds=self.folds,
            duplicates=self.duplicates,
            concats_in_place=self.concats_in_place,
        )

    def summary(self) -> dict[str, Any]:
        """Counts for reports: ops and kernels before and after."""
        return {
            "ops": len(self.source.nodes),
            "kernels_unfused": self.kernels_before,
            "kernels": self.kernels_after,
            "fused_kernels": len(self.groups),
            "duplicates_removed": len(self.duplicates),
            "concats_in_place": len(self.concats_in_place),
        }


def kernel_count(graph: Graph) -> int:
    """How many kernels one run of ``graph`` launches (views and in-place concatenations launch none)."""
    return sum(1 for n in graph.nodes if op_class(graph, n) != "view" and not is_concat_in_place(n))


def fuse(
    graph: Graph, rules: FusionRules = INDUCTOR_RULES, *, schedule: StreamSchedule | None = None
) -> FusionResult:
    """Fuse ``graph`` under ``rules``; with ``schedule``, only ops on one stream share a kernel
    (or are found to repeat one another)."""
    key = None if schedule is None else schedule.streams.__getitem__
    duplicates = find_duplicates(graph, key) if rules.cse else {}
    base = deduplicate(graph, duplicates)
    extra = {} if schedule is None else _barriers(graph, schedule, duplicates)
    grouping = find_groups(base, rules, key=key, extra_deps=extra)
    fused, parts = build_fused_graph(base, grouping, extra_deps=extra)
    return _result(graph, base, fused, rules, parts, grouping, duplicates)


def _barriers(graph: Graph, schedule: StreamSchedule, duplicates: Mapping[str, str]) -> dict[str, list[str]]:
    """The schedule's non-data waits between ops that are still run."""
    extra = non_data_waits(graph, schedule)
    return {v: [u for u in us if u not in duplicates] for v, us in extra.items() if v not in duplicates}


def _result(
    source: Graph,
    base: Graph,
    fused: Graph,
    rules: FusionRules,
    parts,
    grouping: Grouping,
    duplicates: Mapping[str, str],
) -> FusionResult:
    folds = {k: grouping.folds[ms] for k, ms in parts.items() if ms in grouping.folds}
    concats = tuple(sorted(grouping.concats_in_place))
    return FusionResult(source, fused, rules, parts, concats, folds, duplicates, base)


def refuse(graph: Graph, saved: FusionRecord, *, source: str = "schedule") -> FusionResult:
    """Rebuild a fused graph from a schedule's fusion record (``FusionResult.record``)."""
    rules = FusionRules.from_dict(dict(saved.rules), source=source)
    groups = dict(saved.groups)
    folds = dict(saved.folds)
    concats = frozenset(saved.concats_in_place)
    duplicates = dict(saved.duplicates)
    grouped = [p for ps in groups.values() for p in ps]
    named = set(grouped) | concats | set(duplicates) | set(duplicates.values())
    unknown = sorted(named - set(graph.node_ids))
    if unknown or len(grouped) != len(set(grouped)) or set(folds) - set(groups):
        what = f"ops {', '.join(unknown[:5])} that {graph.name} does not have" if unknown else "an op twice"
        raise ScheduleError(
            f"the schedule's fusion record names {what}",
            where=source,
            hint="was it made for another model, batch or dtype?",
        )
    if set(duplicates) & (set(grouped) | set(duplicates.values())):
        raise ScheduleError("the schedule's fusion record runs an op it drops as a duplicate", where=source)
    try:
        base = deduplicate(graph, duplicates)
        members = [tuple(sorted(ps, key=base.position)) for ps in groups.values()]
        members += [(op,) for op in base.node_ids if op not in set(grouped)]
        members.sort(key=lambda ms: base.position(ms[0]))
        fold_of = {tuple(sorted(groups[k], key=base.position)): f for k, f in folds.items()}
        grouping = Grouping(tuple(members), fold_of, concats)
        fused, parts = build_fused_graph(base, grouping)
    except (StreamplanError, AssertionError, KeyError, ValueError) as e:
        raise ScheduleError(
            f"the schedule's fusion record does not fit {graph.name}: {e}", where=source
        ) from None
    if set(parts) != set(groups):
        raise ScheduleError("the schedule's fusion record names its kernels differently", where=source)
    return _result(graph, base, fused, rules, parts, grouping, duplicates)


def schedule_onto(
    result: FusionResult, schedule: StreamSchedule, *, keep_barriers: bool = True
) -> StreamSchedule:
    """``schedule`` (of ``result.source``) carried over to the kernels of ``result.graph``.

    Each kernel runs on the stream of its first op, is launched as early as the source
    launch order of its first op allows, and waits are derived again from the kernels'
    dependencies plus (``keep_barriers``) the source schedule's non-data waits between
    different kernels. The result is verified. A schedule the kernels were not made for
    (another policy's) may need ``keep_barriers=False``: its barriers may cross a kernel.
    """
    src, fused = result.source, result.graph
    index = {op: i for i, op in enumerate(schedule.launch_order)}
    first: dict[str, int] = {}
    for op in src.node_ids:
        k = result.kernel_of(op)
        first[k] = min(first.get(k, len(index)), index[op])
    streams = {k: schedule.streams[_first_op(result, k, index)] for k in fused.node_ids}
    extra: dict[str, list[str]] = {}
    for v, us in (_barriers(src, schedule, result.duplicates) if keep_barriers else {}).items():
        kv = result.kernel_of(v)
        for u in us:
            ku = result.kernel_of(u)
            if ku != kv:
                extra.setdefault(kv, []).append(ku)
    order = _launch_order(fused, first, extra)
    waits = derive_waits(fused, order, streams, extra_deps=extra)
    meta = dict(schedule.meta)
    mapped = StreamSchedule(tuple(order), streams, waits, schedule.policy, meta)
    verify_schedule(fused, mapped)
    return mapped


def non_data_waits(graph: Graph, schedule: StreamSchedule) -> dict[str, list[str]]:
    """The waits of ``schedule`` that order no data dependency (e.g. stage barriers), by waiting op."""
    extra: dict[str, list[str]] = {}
    for w in schedule.waits:
        if w.after not in graph.predecessors(w.before):
            extra.setdefault(w.before, []).append(w.after)
    return extra


def _first_op(result: FusionResult, kernel: str, index: Mapping[str, int]) -> str:
    parts = result.groups.get(kernel)
    return min(parts, key=index.__getitem__) if parts else kernel


def _launch_order(graph: Graph, first: Mapping[str, int], extra: Mapping[str, Sequence[str]]) -> list[str]:
    """A topological order of ``graph`` (plus ``extra`` deps) preferring each kernel's ``first`` index."""
    import heapq

    preds = {n: set(graph.predecessors(n)) | set(extra.get(n, ())) for n in graph.node_ids}
    succs: dict[str, list[str]] = {n: [] for n in preds}
    for n, ps in preds.items():
        for p in ps:
            succs[p].append(n)
    missing = {n: len(ps) for n, ps in preds.items()}
    ready = [(first[n], n) for n, c in missing.items() if c == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, n = heapq.heappop(ready)
        order.append(n)
        for s in succs[n]:
            missing[s] -= 1
            if missing[s] == 0:
                heapq.heappush(ready, (first[s], s))
    if len(order) != len(preds):
        raise ScheduleError("the schedule's waits and the fused kernels form a cycle", where=graph.name)
    return order
