"""Per-storage liveness under a ``StreamSchedule`` (``docs/memory.md``).

A storage is born at the start of the op that creates it (the producer of its root
value) and dies at the end of the last op that creates, reads or writes any of its
values: views extend their base, in-place writes too. Graph outputs live to the end.
Inputs, parameters, buffers and constants belong to the caller: when included they
are *resident* (live before the first op and after the last).

Happens-before (HB) comes from stream order and waits only and is tracked with
vector clocks: ``before[v][t]`` is how many ops of stream slot t are known to have
finished when v starts, so ``u HB v`` iff ``before[v][slot(u)] >= index(u)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from streamplan.errors import ScheduleError
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule, check_structure

PARAM_KINDS = ("param", "buffer", "constant")


@dataclass(frozen=True, slots=True)
class Includes:
    """Which storages a memory figure counts (activations always)."""

    inputs: bool = False
    params: bool = False

    def describe(self) -> str:
        parts = ["activations"]
        if self.inputs:
            parts.append("inputs")
        if self.params:
            parts.append("params/buffers/constants")
        return " + ".join(parts)

    def to_dict(self) -> dict[str, bool]:
        return {"activations": True, "inputs": self.inputs, "params": self.params}


@dataclass(frozen=True, slots=True)
class StorageLife:
    """One storage's lifetime facts under a schedule.

    ``creator`` is None for resident storages (inputs/params). ``users`` are every op
    that creates, reads or writes the storage; ``last_users`` the HB-maximal ones (the
    storage dies when all of them have finished). ``persistent`` storages never die
    (graph outputs and resident storages).
    """

    storage: str
    nbytes: int
    kind: str
    creator: str | None
    users: tuple[str, ...]
    last_users: tuple[str, ...]
    persistent: bool


class HappensBefore:
    """Happens-before of a schedule's ops, from stream order and waits (vector clocks)."""

    def __init__(self, graph: Graph, schedule: StreamSchedule):
        check_structure(graph, schedule)
        stream_ids = sorted(set(schedule.streams[op] for op in schedule.launch_order))
        slot_of = {s: i for i, s in enumerate(stream_ids)}
        k = len(stream_ids)
        self.launch_index: dict[str, int] = {op: i for i, op in enumerate(schedule.launch_order)}
        self.slot: dict[str, int] = {}
        self.index: dict[str, int] = {}  # 1-based position of an op on its stream
        self.before: dict[str, tuple[int, ...]] = {}
        self.after: dict[str, tuple[int, ...]] = {}
        self.direct_preds: dict[str, tuple[str, ...]] = {}
        self.num_slots = k
        waits = schedule.waits_before()
        last_on: list[str | None] = [None] * k
        count = [0] * k
        zero = (0,) * k
        for op in schedule.launch_order:
            s = slot_of[schedule.streams[op]]
            prev = last_on[s]
            cur = list(self.after[prev]) if prev is not None else list(zero)
            preds = [prev] if prev is not None else []
            for u in waits.get(op, ()):
                if u not in self.after:
                    raise ScheduleError(
                        f"op waits for {u!r}, which is launched later (deadlock)",
                        where=op,
                        hint="launch the op a wait refers to first",
                    )
                cur = [max(a, b) for a, b in zip(cur, self.after[u], strict=False)]
                preds.append(u)
            self.before[op] = tuple(cur)
            count[s] += 1
            cur[s] = count[s]
            self.after[op] = tuple(cur)
            self.slot[op] = s
            self.index[op] = count[s]
            self.direct_preds[op] = tuple(dict.fromkeys(preds))
            last_on[s] = op
        for v in graph.node_ids:
            for u in graph.predecessors(v):
                if not self.hb(u, v):
                    raise ScheduleError(
                        f"dependency {u} -> {v} is not ordered by streams or waits",
                        where=v,
                        hint="derive waits with streamplan.schedule.events.with_derived_waits",
                    )

    def hb(self, u: str, v: str) -> bool:
        """True when u must finish before v starts in every timing."""
        return u != v and self.before[v][self.slot[u]] >= self.index[u]

    def concurrent(self, u: str, v: str) -> bool:
        """True when some timing runs u and v at the same time."""
        return u != v and not self.hb(u, v) and not self.hb(v, u)


@dataclass(frozen=True, slots=True)
class Lifetimes:
    """Every counted storage's span on the launch line, in ``Liveness.lives`` order.

    ``birth[i]`` is the launch index of the creator (-1 for resident storages);
    ``death[i]`` that of the last user (``n``, the number of launches, for persistent
    storages). The last user in launch order is always one of the HB-maximal
    ``last_users`` (happens-before follows launch order), so ``death`` is also the
    latest launch among them.
    """

    n: int
    birth: tuple[int, ...]
    death: tuple[int, ...]

    @classmethod
    def of(cls, lives: tuple[StorageLife, ...], launch_index: dict[str, int]) -> Lifetimes:
        n = len(launch_index)
        birth = tuple(-1 if s.creator is None else launch_index[s.creator] for s in lives)
        death = tuple(n if s.persistent else max(launch_index[u] for u in s.users) for s in lives)
        return cls(n, birth, death)


@dataclass(frozen=True)
class Liveness:
    """Lifetimes of the counted storages under one schedule, plus its happens-before."""

    lives: tuple[StorageLife, ...]
    hb: HappensBefore
    includes: Includes

    @cached_property
    def lifetimes(self) -> Lifetimes:
        """Births and deaths on the launch line, computed once per ``Liveness``."""
        return Lifetimes.of(self.lives, self.hb.launch_index)

    def by_storage(self) -> dict[str, StorageLife]:
        return {s.storage: s for s in self.lives}

    def death_clock(self, life: StorageLife) -> tuple[int, ...] | None:
        """Vector clock after which the storage is dead (None: never dies)."""
        if life.persistent:
            return None
        after = self.hb.after
        clocks = [after[u] for u in life.last_users]
        return tuple(max(c) for c in zip(*clocks, strict=False))

    def dead_before(self, life: StorageLife, op: str) -> bool:
        """True when ``life`` is dead before ``op`` starts in every timing."""
        if life.persistent:
            return False
        return all(self.hb.hb(u, op) for u in life.last_users)


def liveness(
    graph: Graph, schedule: StreamSchedule, *, include_inputs: bool = False, include_params: bool = False
) -> Liveness:
    """Lifetimes of every counted storage (activations; inputs/params when asked)."""
    hb = HappensBefore(graph, schedule)
    includes = Includes(include_inputs, include_params)
    outputs = {graph.storage_of(v) for v in graph.outputs}
    users: dict[str, list[str]] = {}
    for n in graph.nodes:
        touched = [graph.storage_of(v) for v in (*n.outputs, *n.inputs, *n.mutates)]
        for sid in dict.fromkeys(touched):
            users.setdefault(sid, []).append(n.id)
    lives = []
    for sid, st in graph.storages().items():
        if st.kind == "activation":
            creator = graph.producer(sid)
            if creator is None:
                continue  # an activation nobody writes; verify() reports it
            us = tuple(users.get(sid, (creator,)))
            lives.append(StorageLife(sid, st.nbytes, st.kind, creator, us, _maximal(hb, us), sid in outputs))
        elif (st.kind == "input" and include_inputs) or (st.kind in PARAM_KINDS and include_params):
            lives.append(StorageLife(sid, st.nbytes, st.kind, None, tuple(users.get(sid, ())), (), True))
    return Liveness(tuple(lives), hb, includes)


def _maximal(hb: HappensBefore, ops: tuple[str, ...]) -> tuple[str, ...]:
    """The ops of ``ops`` that no other op of ``ops`` must follow."""
    if len(ops) == 1:
        return ops
    # HB respects launch order, so walking backwards only later (kept) ops can follow u;
    # comparing with the kept maximal ones suffices by transitivity.
    kept: list[str] = []
    for u in sorted(ops, key=hb.launch_index.__getitem__, reverse=True):
        if not any(hb.hb(u, w) for w in kept):
            kept.append(u)
    return tuple(sorted(kept, key=hb.launch_index.__getitem__))
