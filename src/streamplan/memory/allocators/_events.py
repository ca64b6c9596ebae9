"""Host-order allocation events for the allocator replay (a private, minimal generator).

Per storage (aliases share their base's storage): allocated when the host launches
the producer of its base value, freed once the host has launched its last user
(reader or writer); graph outputs are never freed. Included inputs/params are
resident: allocated before the first launch, never freed. Also records which
streams used each storage (what ``record_stream`` would have marked).
"""

from __future__ import annotations

from dataclasses import dataclass

from streamplan.errors import ScheduleError
from streamplan.ir.graph import Graph
from streamplan.schedule.schedule import StreamSchedule

PARAM_KINDS = ("param", "buffer", "constant")


@dataclass(frozen=True, slots=True)
class HostEvents:
    """``allocs[i]``/``frees[i]``: storages allocated / freed at launch index i."""

    residents: tuple[tuple[str, int], ...]  # (storage, bytes), allocated before the first launch
    allocs: tuple[tuple[tuple[str, int], ...], ...]  # per launch: (storage, bytes)
    frees: tuple[tuple[str, ...], ...]  # per launch: storages freed after that launch
    stream_uses: dict[str, frozenset[int]]  # storage -> streams of the ops that read or wrote it


def host_events(
    graph: Graph, schedule: StreamSchedule, *, include_inputs: bool = False, include_params: bool = False
) -> HostEvents:
    """The allocation and free events of ``schedule``'s host launch order."""
    order = schedule.launch_order
    _check_covers(graph, schedule)
    values = graph.values
    storages = graph.storages()
    out_storages = {values[v].storage for v in graph.outputs if v in values}
    alloc_at: dict[str, int] = {}
    last_use: dict[str, int] = {}
    uses: dict[str, set[int]] = {}
    allocs: list[list[tuple[str, int]]] = [[] for _ in order]
    for i, op in enumerate(order):
        node = graph.node(op)
        stream = schedule.streams[op]
        for vid in node.inputs + node.outputs:
            sid = values[vid].storage
            last_use[sid] = i
            uses.setdefault(sid, set()).add(stream)
        for vid in node.outputs:
            v = values[vid]
            st = storages.get(v.storage)
            if v.is_alias or st is None or st.kind != "activation" or v.storage in alloc_at:
                continue
            alloc_at[v.storage] = i
            allocs[i].append((v.storage, st.nbytes))
    frees: list[list[str]] = [[] for _ in order]
    for sid in alloc_at:
        if sid not in out_storages:
            frees[last_use[sid]].append(sid)
    return HostEvents(
        _residents(graph, include_inputs, include_params),
        tuple(tuple(a) for a in allocs),
        tuple(tuple(f) for f in frees),
        {k: frozenset(s) for k, s in uses.items()},
    )


def _residents(graph: Graph, include_inputs: bool, include_params: bool) -> tuple[tuple[str, int], ...]:
    """Included leaf storages in allocation order: params, then inputs, then unlisted leaves."""
    kinds = (("input",) if include_inputs else ()) + (PARAM_KINDS if include_params else ())
    storages = graph.storages()
    ordered = [graph.values[v].storage for v in graph.params + graph.inputs if v in graph.values]
    ordered += list(storages)  # leaves not listed in graph.inputs/params (e.g. constants)
    seen: set[str] = set()
    out = []
    for sid in ordered:
        st = storages.get(sid)
        if st is not None and st.kind in kinds and sid not in seen:
            seen.add(sid)
            out.append((sid, st.nbytes))
    return tuple(out)


def _check_covers(graph: Graph, schedule: StreamSchedule) -> None:
    launched = set(schedule.launch_order)
    missing = [n for n in graph.node_ids if n not in launched]
    extra = [op for op in schedule.launch_order if not graph.has_node(op)]
    if missing or extra or len(launched) != len(schedule.launch_order):
        parts = []
        if missing:
            parts.append(f"never launches {', '.join(missing[:5])}")
        if extra:
            parts.append(f"launches unknown ops {', '.join(extra[:5])}")
        if len(launched) != len(schedule.launch_order):
            parts.append("launches some op twice")
        raise ScheduleError(
            f"schedule does not match graph {graph.name!r}: {'; '.join(parts)}",
            where=f"schedule {schedule.policy}",
            hint="schedule this graph again (each op exactly once)",
        )
    unassigned = [op for op in schedule.launch_order if op not in schedule.streams]
    if unassigned:
        raise ScheduleError(
            f"ops without a stream: {', '.join(unassigned[:5])}", where=f"schedule {schedule.policy}"
        )
