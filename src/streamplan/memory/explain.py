"""Explain memory peaks: which storages set them, and which concurrency raised them.

``explain_peak`` names the storages live at the host-order peak, at the worst-case
witness instant and in the arena's lower-bound set, with producers, sizes and
streams, and says in words when a fixed placement must exceed the worst case.
``compare_peaks`` names the op pairs ordered in one schedule but overlapping in
another that let more storages coexist. Both warn when a policy cannot change
anything (a single op, or no two independent ops).
"""

from __future__ import annotations

from dataclasses import dataclass

from streamplan.ir.analysis import max_parallelism
from streamplan.ir.graph import Graph
from streamplan.ir.includes import ACTIVATIONS, Includes
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.liveness import Liveness, liveness
from streamplan.memory.report import MemoryReport, analyze_memory

MIB = 1 << 20
_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def _count(k: int) -> str:
    return _WORDS[k] if k < len(_WORDS) else str(k)


def _mib(b: int) -> str:
    return f"{b / MIB:.3f} MiB"


@dataclass(frozen=True, slots=True)
class LiveStorage:
    """A storage live at a peak: size, kind, the op that made it and that op's stream, and
    (training steps) its role: saved activation, gradient, temporary..."""

    storage: str
    nbytes: int
    kind: str
    producer: str | None
    stream: int | None
    role: str | None = None

    def to_dict(self) -> dict:
        d = {
            "storage": self.storage,
            "nbytes": self.nbytes,
            "kind": self.kind,
            "producer": self.producer,
            "stream": self.stream,
        }
        if self.role is not None:
            d["role"] = self.role
        return d

    def __str__(self) -> str:
        where = f"made by {self.producer} @s{self.stream}" if self.producer else f"{self.kind}, resident"
        role = f"{self.role.replace('_', ' ')}, " if self.role else ""
        return f"{self.storage} ({_mib(self.nbytes)}, {role}{where})"


@dataclass(frozen=True)
class PeakExplanation:
    """The storages behind each peak of one schedule, plus notes and warnings in words."""

    graph: str
    policy: str
    report: MemoryReport
    host_order_live: tuple[LiveStorage, ...]
    host_order_op: str
    worst_case_live: tuple[LiveStorage, ...]
    worst_case_running: tuple[str, ...]
    arena_bound_live: tuple[LiveStorage, ...]
    notes: tuple[str, ...]
    warnings: tuple[str, ...]

    def to_dict(self) -> dict:
        return {
            "graph": self.graph,
            "policy": self.policy,
            "memory": self.report.to_dict(),
            "host_order_peak": {
                "op": self.host_order_op,
                "live": [s.to_dict() for s in self.host_order_live],
            },
            "worst_case_peak": {
                "running": list(self.worst_case_running),
                "live": [s.to_dict() for s in self.worst_case_live],
            },
            "arena_lower_bound": {"live": [s.to_dict() for s in self.arena_bound_live]},
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }

    def lines(self) -> list[str]:
        out = list(self.report.lines())
        out.append(
            f"host-order peak at launch of {self.host_order_op or '-'}: " + _listing(self.host_order_live)
        )
        out.append(
            f"worst-case instant (running {', '.join(self.worst_case_running) or '-'}): "
            + _listing(self.worst_case_live)
        )
        out.append("arena bound set (pairwise may coexist): " + _listing(self.arena_bound_live))
        out += [f"note: {n}" for n in self.notes]
        out += [f"warning: {w}" for w in self.warnings]
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


SHOWN_STORAGES = 12  # the text lists the largest ones; JSON keeps them all
SHOWN_OVERLAPS = 10


def _listing(storages: tuple[LiveStorage, ...]) -> str:
    """The largest storages (they come sorted by size), then how many more and their bytes."""
    text = ", ".join(map(str, storages[:SHOWN_STORAGES]))
    rest = storages[SHOWN_STORAGES:]
    if rest:
        text += f" and {len(rest)} more ({_mib(sum(s.nbytes for s in rest))})"
    return text


def _describe(graph: Graph, schedule: StreamSchedule, live: Liveness, names) -> tuple[LiveStorage, ...]:
    by = live.by_storage()
    out = []
    for sid in names:
        life = by[sid]
        stream = schedule.streams.get(life.creator) if life.creator else None
        out.append(LiveStorage(sid, life.nbytes, life.kind, life.creator, stream, graph.roles.get(sid)))
    return tuple(sorted(out, key=lambda s: (-s.nbytes, s.storage)))


def policy_warnings(graph: Graph, schedule: StreamSchedule) -> tuple[str, ...]:
    """Why a stream policy cannot change anything here, in words (empty when it can)."""
    if len(graph.nodes) <= 1:
        return (
            f"{graph.name} has a single op: there is nothing to order or overlap, so every "
            "policy gives the same memory and latency",
        )
    width = max_parallelism(graph)
    if width.exact and width.width <= 1:
        return (
            f"no two ops of {graph.name} are independent (each depends on the one before, as "
            "after fusion has merged parallel branches into single kernels): no stream policy "
            "can overlap anything, so every schedule has the sequential peaks",
        )
    if schedule.num_streams > 1:
        order = schedule.launch_order
        from streamplan.memory.liveness import HappensBefore

        hb = HappensBefore(graph, schedule)
        if all(hb.hb(u, v) for u, v in zip(order, order[1:], strict=False)):
            return (
                f"{schedule.policy} uses {schedule.num_streams} streams but its waits order every "
                "op after the previous one, so it runs sequentially",
            )
    return ()


def explain_peak(
    graph: Graph,
    schedule: StreamSchedule,
    *,
    includes: Includes = ACTIVATIONS,
    report: MemoryReport | None = None,
) -> PeakExplanation:
    """Name the storages live at each peak of ``schedule`` and explain the static arena."""
    if report is None:
        report = analyze_memory(graph, schedule, includes=includes)
    live = liveness(graph, schedule, includes=report.includes)
    host = report.host_order
    host_op = schedule.launch_order[host.peak_launch_index] if host.peak_launch_index >= 0 else ""
    finished = set(schedule.launch_order[: max(host.peak_launch_index, 0)])
    from streamplan.memory.worst_case import live_bytes_at

    _, host_names = live_bytes_at(live, finished, finished | ({host_op} if host_op else set()))
    wc, arena = report.worst_case, report.arena
    notes = []
    if arena.lower_bound_bytes > wc.upper_bytes:
        k = len(arena.bound_storages)
        names = ", ".join(arena.bound_storages[:SHOWN_STORAGES])
        if k > SHOWN_STORAGES:
            names += f" and {k - SHOWN_STORAGES} more"
        notes.append(
            f"{_count(k)} tensors ({names}) may pairwise be live together under varying timings, "
            f"although {_at_most_at_once(live, wc)}; so no fixed placement fits in "
            f"{_mib(wc.upper_bytes)}: the static arena needs at least {_mib(arena.lower_bound_bytes)}"
        )
    if wc.lower_bytes > host.peak_bytes:
        when = (
            f"while {wc.running[0]} runs"
            if len(wc.running) == 1
            else f"when {', '.join(wc.running)} run at once"
        )
        notes.append(
            f"the host-order estimate ({_mib(host.peak_bytes)}) misses concurrency: {when}, "
            f"{_mib(wc.lower_bytes)} is live"
        )
    if not wc.exact:
        notes.append(
            f"the worst case is a proven interval [{_mib(wc.lower_bytes)}, {_mib(wc.upper_bytes)}] "
            f"({wc.method}), not an exact figure: some timing reaches {_mib(wc.lower_bytes)} and none can "
            f"exceed {_mib(wc.upper_bytes)}, but the search stopped before closing the gap (a longer time "
            "limit can)"
        )
    return PeakExplanation(
        graph.name,
        schedule.policy,
        report,
        _describe(graph, schedule, live, host_names),
        host_op,
        _describe(graph, schedule, live, wc.live),
        wc.running,
        _describe(graph, schedule, live, arena.bound_storages),
        tuple(notes),
        policy_warnings(graph, schedule),
    )


def _at_most_at_once(live: Liveness, wc) -> str:
    """The worst case as a count of tensors when every counted tensor has one size (then the
    count is exact), else in bytes."""
    sizes = {s.nbytes for s in live.lives}
    if len(sizes) == 1 and wc.exact and (size := sizes.pop()) > 0:
        return f"at most {_count(wc.upper_bytes // size)} ever are at once"
    return f"at most {_mib(wc.upper_bytes)} is ever live at once"


@dataclass(frozen=True, slots=True)
class NewOverlap:
    """Storages ``first`` and ``second`` coexist in ``other`` because ops ``u`` and ``v`` overlap.

    In ``base``, ``u`` (a use of ``first``) finishes before ``v`` (which makes ``second``)
    starts; in ``other`` they may run at the same time (``reordered`` False) or ``v`` runs
    before ``u`` (``reordered`` True).
    """

    first: str
    second: str
    u: str
    v: str
    reordered: bool = False

    def __str__(self) -> str:
        here = f"but runs after {self.v} here" if self.reordered else "but may run alongside it here"
        return (
            f"{self.first} and {self.second}: {self.u} (a use of {self.first}) finishes before "
            f"{self.v} (makes {self.second}) starts in the base schedule, {here}"
        )


@dataclass(frozen=True)
class PeakComparison:
    """How ``other`` changes the peaks of ``base`` and which new overlaps caused it."""

    base: PeakExplanation
    other: PeakExplanation
    newly_concurrent_op_pairs: int | None  # None when the graph is too large to count
    overlaps: tuple[NewOverlap, ...]
    warnings: tuple[str, ...]

    def to_dict(self) -> dict:
        return {
            "base": self.base.to_dict(),
            "other": self.other.to_dict(),
            "newly_concurrent_op_pairs": self.newly_concurrent_op_pairs,
            "overlaps": [
                {"first": o.first, "second": o.second, "u": o.u, "v": o.v, "reordered": o.reordered}
                for o in self.overlaps
            ],
            "warnings": list(self.warnings),
        }

    def lines(self) -> list[str]:
        b, o = self.base.report, self.other.report
        out = [f"{o.policy} vs {b.policy} on {o.graph} ({o.includes.describe()}):"]
        for name, x, y in (
            ("host-order", b.host_order_peak_bytes, o.host_order_peak_bytes),
            ("worst-case", b.worst_case.upper_bytes, o.worst_case.upper_bytes),
            *(
                [("simulated", b.simulated_peak_bytes, o.simulated_peak_bytes)]
                if b.simulated is not None and o.simulated is not None
                else []
            ),
            ("arena", b.arena.arena_bytes, o.arena.arena_bytes),
            ("arena bound", b.arena.lower_bound_bytes, o.arena.lower_bound_bytes),
        ):
            out.append(f"  {name:<12} {_mib(x):>14} -> {_mib(y):>14}  ({(y - x) / MIB:+.3f} MiB)")
        if self.newly_concurrent_op_pairs is not None:
            out.append(
                f"  {self.newly_concurrent_op_pairs} op pairs ordered in {b.policy} may overlap in {o.policy}"
            )
        if self.overlaps:
            out.append(
                f"  storages coexisting at the {o.policy} worst case only because of a new order or overlap:"
            )
            out += [f"    {x}" for x in self.overlaps[:SHOWN_OVERLAPS]]
            if len(self.overlaps) > SHOWN_OVERLAPS:
                out.append(
                    f"    and {len(self.overlaps) - SHOWN_OVERLAPS} more pairs (the JSON form lists them all)"
                )
        elif o.worst_case.upper_bytes <= b.worst_case.lower_bytes:
            out.append(f"  {o.policy} does not raise the worst-case peak")
        out += [f"  warning: {w}" for w in self.warnings]
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def compare_peaks(
    graph: Graph,
    base: StreamSchedule,
    other: StreamSchedule,
    *,
    includes: Includes = ACTIVATIONS,
    base_report: MemoryReport | None = None,
    other_report: MemoryReport | None = None,
) -> PeakComparison:
    """Explain both schedules and name the overlaps in ``other`` that raised its worst case.

    ``base_report``/``other_report`` are the schedules' memory reports when the caller has
    them (made with a timeline, they carry the simulated peaks); their includes win.
    """
    if other_report is not None:
        includes = other_report.includes
    eb = explain_peak(graph, base, includes=includes, report=base_report)
    eo = explain_peak(graph, other, includes=includes, report=other_report)
    lb = liveness(graph, base, includes=includes)
    lo = liveness(graph, other, includes=includes)
    by = lb.by_storage()
    overlaps = []
    names = [s for s in eo.report.worst_case.live if by[s].creator is not None]
    for i, s1 in enumerate(names):
        for s2 in names[i + 1 :]:
            for a, b in ((by[s1], by[s2]), (by[s2], by[s1])):
                if lb.dead_before(a, b.creator):
                    # both are live at once here, so some use of a does not finish before b is made
                    v = b.creator
                    u = next((u for u in a.users if lo.hb.concurrent(u, v)), None)
                    if u is not None:
                        overlaps.append(NewOverlap(a.storage, b.storage, u, v))
                    elif (u := next((u for u in a.users if lo.hb.hb(v, u)), None)) is not None:
                        overlaps.append(NewOverlap(a.storage, b.storage, u, v, reordered=True))
    overlaps.sort(key=lambda o: -(by[o.first].nbytes + by[o.second].nbytes))  # the largest first
    pairs = None
    order = graph.node_ids
    if len(order) <= 2000:
        pairs = sum(
            1
            for i, u in enumerate(order)
            for v in order[i + 1 :]
            if not lb.hb.concurrent(u, v) and lo.hb.concurrent(u, v)
        )
    warnings = tuple(dict.fromkeys(eb.warnings + eo.warnings))
    return PeakComparison(eb, eo, pairs, tuple(overlaps), warnings)
