"""Per-storage liveness under a ``StreamSchedule`` (``docs/memory.md``).

A storage is born at the start of the op that creates it (the producer of its root
value) and dies at the end of the last op that creates, reads or writes any of its
values: views extend their base, in-place writes too. Graph outputs live to the end.
Inputs, parameters, buffers and constants belong to the caller: when included they
are *resident* (live before the first op and after the last).

Happens-before (HB) comes from stream order, waits and host waits only (a host wait for
u before launching v orders u before every op launched from v on) and is tracked with
vector clocks: ``before[v][t]`` is how many ops of stream slot t are known to have
finished when v starts, so ``u HB v`` iff ``before[v][slot(u)] >= index(u)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from streamplan.errors import ScheduleError
from streamplan.ir.graph import Graph
from streamplan.ir.includes import ACTIVATIONS, Includes
from streamplan.ir.schedule import StreamSchedule, check_structure


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
        waits: dict[str, list[str]] = {}
        for w in schedule.ordering_waits():  # host waits order the device too
            waits.setdefault(w.before, []).append(w.after)
        last_on: list[str | None] = [None] * k
        count = [0] * k
        zero = (0,) * k
        before, after, slot, index, direct_preds = (
            self.before,
            self.after,
            self.slot,
            self.index,
            self.direct_preds,
        )
        streams = schedule.streams
        for op in schedule.launch_order:
            s = slot_of[streams[op]]
            prev = last_on[s]
            cur = after[prev] if prev is not None else zero
            preds = [prev] if prev is not None else []
            for u in waits.get(op, ()):
                clock = after.get(u)
                if clock is None:
                    raise ScheduleError(
                        f"op waits for {u!r}, which is launched later (deadlock)",
                        where=op,
                        hint="launch the op a wait refers to first",
                    )
                cur = tuple(map(max, cur, clock))
                preds.append(u)
            before[op] = cur
            count[s] += 1
            nxt = list(cur)
            nxt[s] = count[s]
            after[op] = tuple(nxt)
            slot[op] = s
            index[op] = count[s]
            direct_preds[op] = tuple(preds) if len(preds) < 2 else tuple(dict.fromkeys(preds))
            last_on[s] = op
        for v in graph.node_ids:
            clock = before[v]
            for u in graph.predecessors(v):
                if u == v or clock[slot[u]] < index[u]:
                    raise ScheduleError(
                        f"dependency {u} -> {v} is not ordered by streams or waits",
                        where=v,
                        hint="derive waits with streamplan.schedule.events.with_derived_waits",
                    )

    def before_matrix(self):
        """``before`` as an (ops x streams) int64 array in launch order (computed once)."""
        m = getattr(self, "_before_matrix", None)
        if m is None:
            import numpy as np

            m = np.array(list(self.before.values()), dtype=np.int64).reshape(-1, self.num_slots)
            self._before_matrix = m
        return m

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


@dataclass(frozen=True, eq=False)
class UseTable:
    """``Liveness.lives`` as arrays for vectorised sweeps (launch indices throughout).

    ``creator[i]`` is -1 for resident storages; the users of storage i are
    ``users[start[i]:start[i + 1]]``.
    """

    creator: object  # np.ndarray[int64]
    persistent: object  # np.ndarray[bool]
    nbytes: object  # np.ndarray[int64]
    users: object  # np.ndarray[int64]
    start: object  # np.ndarray[int64]

    @classmethod
    def of(cls, lives: tuple[StorageLife, ...], launch_index: dict[str, int]) -> UseTable:
        import numpy as np

        creator = np.array(
            [-1 if s.creator is None else launch_index[s.creator] for s in lives], dtype=np.int64
        )
        persistent = np.array([s.persistent for s in lives], dtype=bool)
        nbytes = np.array([s.nbytes for s in lives], dtype=np.int64)
        users = np.array([launch_index[u] for s in lives for u in s.users], dtype=np.int64)
        counts = np.array([len(s.users) for s in lives], dtype=np.int64)
        start = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        return cls(creator, persistent, nbytes, users, start)


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

    @cached_property
    def uses(self) -> UseTable:
        """Creators, persistence and users as launch-index arrays, computed once."""
        return UseTable.of(self.lives, self.hb.launch_index)

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


def liveness(graph: Graph, schedule: StreamSchedule, *, includes: Includes = ACTIVATIONS) -> Liveness:
    """Lifetimes of every counted storage (activations; inputs/params when ``includes`` says)."""
    hb = HappensBefore(graph, schedule)
    values = graph.values
    outputs = {values[v].storage for v in graph.outputs}
    users: dict[str, list[str]] = {}
    for n in graph.nodes:
        touched = [values[v].storage for v in (*n.outputs, *n.inputs, *n.mutates)]
        for sid in dict.fromkeys(touched) if len(touched) > 1 else touched:
            us = users.get(sid)
            if us is None:
                users[sid] = [n.id]
            else:
                us.append(n.id)
    lives = []
    maximal = _Maximal(hb)
    for sid, st in graph.storages().items():
        if st.kind == "activation":
            creator = graph.producer(sid)
            if creator is None:
                continue  # an activation nobody writes; verify() reports it
            us = tuple(users.get(sid, (creator,)))
            lives.append(StorageLife(sid, st.nbytes, st.kind, creator, us, maximal(us), sid in outputs))
        elif includes.counts(st.kind):
            lives.append(StorageLife(sid, st.nbytes, st.kind, None, tuple(users.get(sid, ())), (), True))
    return Liveness(tuple(lives), hb, includes)


class _Maximal:
    """The ops of a set that no other op of the set must follow (its HB-maximal ones)."""

    def __init__(self, hb: HappensBefore):
        self.position = hb.launch_index
        self.before, self.slot, self.index = hb.before, hb.slot, hb.index

    def __call__(self, ops: tuple[str, ...]) -> tuple[str, ...]:
        if len(ops) == 1:
            return ops
        position, before, slot, index = self.position, self.before, self.slot, self.index
        # HB respects launch order, so walking backwards only later (kept) ops can follow u;
        # comparing with the kept maximal ones suffices by transitivity.
        kept: list[str] = []
        for u in sorted(ops, key=position.__getitem__, reverse=True):
            su, iu = slot[u], index[u]
            if not any(before[w][su] >= iu for w in kept):
                kept.append(u)
        kept.reverse()
        return tuple(kept)
