"""A proven upper bound on the worst-case device peak, computed op by op in launch order.

At any instant of any timing, let v be the op launched last among those that have
started. Ops launched after v have not started; every op that happens before v has
finished (v started after them). On each stream at most one op runs, so a stream's
state is a *position* p: ``2f`` when its first f ops are finished and the next has not
started, ``2f + 1`` when op f + 1 runs. For each stream t the instant's position lies
between ``2 * before_v[t]`` (what v waited for) and ``2 * launched_t`` (its ops launched
so far); v's own stream sits at v (position ``2 * index(v) - 1``).

Every storage x that may be live is charged to one stream, over an interval of
positions outside which it is certainly dead:

- to its creator's stream: from the creator's start (``2a - 1``) until the first op
  of that stream that happens after every user of x starts (``2k - 2``);
- or, once all its users are launched and the last ones share one other stream t, to
  t: from the position v's creator waited for on t until the last user finishes.

A storage all of whose users happen before v is dead at such instants and is not
charged. The live bytes of the instant are then at most the resident bytes plus, for
each stream, the largest total charged at one position in its range; the bound is the
largest such sum over v. On one stream it is exactly the host-order peak; under
full serialisation of v it is at most the host-order live bytes at v.

``PositionBound`` keeps the state incrementally, so a search can ask what placing an
op with given waits would cost before committing (``probe``/``place``), and
``position_bound`` runs it over a finished schedule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from streamplan.ir.graph import Graph
from streamplan.ir.includes import ACTIVATIONS, Includes
from streamplan.ir.schedule import StreamSchedule, check_structure

NEVER = 1 << 40  # an interval end (or a user index) that no position reaches


@dataclass(frozen=True, slots=True)
class CountedStorages:
    """The storages a figure counts, by op: bytes created, users, resident bytes."""

    nbytes: tuple[int, ...]
    creator: tuple[str, ...]
    users: tuple[tuple[str, ...], ...]
    persistent: tuple[bool, ...]
    created_by: Mapping[str, tuple[int, ...]]  # op -> storages it creates
    used_by: Mapping[str, tuple[int, ...]]  # op -> storages it creates, reads or writes
    resident_bytes: int


def counted_storages(graph: Graph, *, includes: Includes = ACTIVATIONS) -> CountedStorages:
    """Activation storages with their creator and users (as ``memory.liveness`` counts them);
    inputs and params, when included, are resident bytes."""
    outputs = {graph.storage_of(v) for v in graph.outputs}
    users: dict[str, list[str]] = {}
    for n in graph.nodes:
        for sid in dict.fromkeys(graph.storage_of(v) for v in (*n.outputs, *n.inputs, *n.mutates)):
            users.setdefault(sid, []).append(n.id)
    nbytes, creator, uses, persistent = [], [], [], []
    resident = 0
    created_by: dict[str, list[int]] = {}
    used_by: dict[str, list[int]] = {}
    for sid, st in graph.storages().items():
        if st.kind == "activation":
            c = graph.producer(sid)
            if c is None:
                continue
            k = len(nbytes)
            us = tuple(users.get(sid, (c,)))
            nbytes.append(st.nbytes)
            creator.append(c)
            uses.append(us)
            persistent.append(sid in outputs)
            created_by.setdefault(c, []).append(k)
            for u in us:
                used_by.setdefault(u, []).append(k)
        elif includes.counts(st.kind):
            resident += st.nbytes
    return CountedStorages(
        tuple(nbytes),
        tuple(creator),
        tuple(uses),
        tuple(persistent),
        {k: tuple(v) for k, v in created_by.items()},
        {k: tuple(v) for k, v in used_by.items()},
        resident,
    )


class PositionBound:
    """The bound's state after a prefix of the launch order (see the module docstring).

    ``probe(op, stream, before)`` is the bound at the instants where ``op`` is the
    latest-launched started op, if it were launched next on ``stream`` having waited
    for ``before`` (a vector clock: per stream slot, how many of its ops finish first);
    ``place`` commits it. ``num_slots`` is the number of streams the schedule uses.
    """

    def __init__(self, facts: CountedStorages, num_slots: int):
        self.facts = facts
        self.num_slots = k = max(1, num_slots)
        m = len(facts.nbytes)
        self.weight = np.array(facts.nbytes, dtype=np.int64)
        self.charged = np.zeros(m, dtype=np.int64)  # stream slot the storage is charged to
        self.lo = np.zeros(m, dtype=np.int64)  # its interval of positions on that slot
        self.hi = np.full(m, NEVER, dtype=np.int64)
        self.done_by = np.full((m, k), NEVER, dtype=np.int64)  # per slot, once all users launched: last index
        self.last_seen = np.zeros((m, k), dtype=np.int64)  # per slot: index of its last user launched so far
        self.creator_before = np.zeros((m, k), dtype=np.int64)  # the clock its creator waited for
        self.live_set: list[int] = []  # created and maybe still live for a later op
        self._live_np: np.ndarray | None = None
        self.remaining_users = [len(u) for u in facts.users]
        self.unended: list[list[int]] = [[] for _ in range(k)]  # charged to a slot, interval still open
        self.slot_of_stream: dict[int, int] = {}
        self.count = [0] * k  # ops launched per slot
        self.tail: list[str | None] = [None] * k
        self.index: dict[str, int] = {}  # op -> 1-based index on its slot
        self.slot: dict[str, int] = {}
        self.before: dict[str, tuple[int, ...]] = {}  # the clock the op waited for
        self.after: dict[str, tuple[int, ...]] = {}  # ... and with the op itself finished
        self.peak_bytes = facts.resident_bytes
        self.peak_op: str | None = None
        self.complete = True  # every op placed (``position_bound`` may stop early)

    def slot_for(self, stream: int) -> int:
        """The slot of ``stream`` (the next free one on first use)."""
        s = self.slot_of_stream.get(stream)
        if s is None:
            s = len(self.slot_of_stream)
            if s >= self.num_slots:
                raise ValueError(f"more streams than the {self.num_slots} this bound was sized for")
            self.slot_of_stream[stream] = s
        return s

    def clock_before(self, stream: int, waits: Iterable[str]) -> tuple[int, ...]:
        """What an op launched next on ``stream`` after ``waits`` knows has finished."""
        prev = self.tail[self.slot_for(stream)]
        cur = list(self.after[prev]) if prev is not None else [0] * self.num_slots
        for u in waits:
            cur = [max(a, b) for a, b in zip(cur, self.after[u], strict=True)]
        return tuple(cur)

    def probe(self, op: str, stream: int, before: Sequence[int], *, enough: int | None = None) -> int:
        """The bound at instants where ``op`` (launched next on ``stream`` after ``before``) is the
        latest-launched op that has started. With ``enough``, a cheaper, larger figure (the bytes
        of every storage that may be live) is returned when that is already at most ``enough``."""
        s = self.slot_for(stream)
        bef = np.asarray(before, dtype=np.int64)
        pos_lo, pos_hi = 2 * bef, 2 * np.asarray(self.count, dtype=np.int64)
        pos_lo[s] = pos_hi[s] = 2 * self.count[s] + 1  # op itself runs
        total = self.facts.resident_bytes + sum(
            self.facts.nbytes[x] for x in self.facts.created_by.get(op, ())
        )
        if self.live_set:
            idx = self._live_array()
            unfinished = self.done_by[idx] > bef  # per slot: some user there may not have finished
            open_ = unfinished.any(axis=1)  # else every user happens before op: dead
            idx, unfinished = idx[open_], unfinished[open_]
            if enough is not None and total + int(self.weight[idx].sum()) <= enough:
                return total + int(self.weight[idx].sum())
            if idx.size:
                charged, lo, hi = self._charges(idx, unfinished)
                total += _largest_position_sums(
                    charged, lo, hi, self.weight[idx], pos_lo, pos_hi, self.num_slots
                )
        return total

    def _live_array(self) -> np.ndarray:
        """``live_set`` as an array, rebuilt only after it changed (a search probes one state often)."""
        if self._live_np is None or len(self._live_np) != len(self.live_set):
            self._live_np = np.fromiter(self.live_set, dtype=np.int64, count=len(self.live_set))
        return self._live_np

    def _charges(self, idx: np.ndarray, unfinished: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each storage's slot and interval for this probe: its standing charge, or, when the users
        that may be unfinished all sit on one slot t, t from its creator's start until the last
        user there finishes, whichever is shorter."""
        charged, lo, hi = self.charged[idx], self.lo[idx], self.hi[idx]
        one = unfinished.sum(axis=1) == 1
        if not one.any():
            return charged, lo, hi
        rows = np.nonzero(one)[0]
        t = unfinished[rows].argmax(axis=1)
        lo_t = 2 * self.creator_before[idx[rows], t]
        hi_t = 2 * self.done_by[idx[rows], t] - 1
        better = hi_t - lo_t < hi[rows] - lo[rows]
        rows, t, lo_t, hi_t = rows[better], t[better], lo_t[better], hi_t[better]
        charged, lo, hi = charged.copy(), lo.copy(), hi.copy()
        charged[rows], lo[rows], hi[rows] = t, lo_t, hi_t
        return charged, lo, hi

    def place(self, op: str, stream: int, before: Sequence[int], *, bound: int | None = None) -> int:
        """Launch ``op`` next on ``stream`` after ``before`` (``bound``: its probe, if known);
        returns the op's bound and keeps the largest."""
        value = self.probe(op, stream, before) if bound is None else bound
        if self.peak_op is None or value > self.peak_bytes:
            self.peak_bytes, self.peak_op = max(value, self.peak_bytes), op
        s = self.slot_for(stream)
        self.count[s] += 1
        i = self.count[s]
        self.index[op], self.slot[op] = i, s
        self.before[op] = tuple(before)
        after = list(before)
        after[s] = i
        self.after[op] = tuple(after)
        self.tail[s] = op
        # storages created on this slot whose users all happen before op: their creator-slot
        # interval ends at op; charge them here again if that is now the shorter interval
        bef = np.asarray(before, dtype=np.int64)
        still = []
        for x in self.unended[s]:
            if self.remaining_users[x] == 0 and bool((self.done_by[x] <= bef).all()):
                lo_a, hi_a = 2 * self.index[self.facts.creator[x]] - 1, 2 * i - 2
                if self.charged[x] == s or hi_a - lo_a < self.hi[x] - self.lo[x]:
                    self.charged[x], self.lo[x], self.hi[x] = s, lo_a, hi_a
            else:
                still.append(x)
        self.unended[s] = still
        for x in self.facts.created_by.get(op, ()):
            self.charged[x], self.lo[x], self.hi[x] = s, 2 * i - 1, NEVER
            self.creator_before[x] = before
            self.live_set.append(x)
            if not self.facts.persistent[x]:
                self.unended[s].append(x)
        for x in self.facts.used_by.get(op, ()):
            self.remaining_users[x] -= 1
            self.last_seen[x, s] = i  # launched in order: the latest so far on this slot
            if self.remaining_users[x] == 0 and not self.facts.persistent[x]:
                self._users_launched(x)
        return value

    def _users_launched(self, x: int) -> None:
        """Every user of x is launched: its last indices per slot are final, and when its last
        users share one other slot, charge it there if that interval is shorter."""
        self.done_by[x] = self.last_seen[x]
        users = self.facts.users[x]
        last = [u for u in users if not any(self._hb(u, w) for w in users)]
        slots = {self.slot[u] for u in last}
        c = self.facts.creator[x]
        if len(slots) != 1 or slots == {self.slot[c]}:
            return
        (t,) = slots
        lo_b = 2 * self.before[c][t]  # x exists only once its creator started, after these finished
        hi_b = 2 * max(self.index[u] for u in last) - 1  # ... and until the last of them finishes
        if hi_b - lo_b < self.hi[x] - self.lo[x]:
            self.charged[x], self.lo[x], self.hi[x] = t, lo_b, hi_b

    def _hb(self, u: str, w: str) -> bool:
        """u happens before w (both launched)."""
        return u != w and self.before[w][self.slot[u]] >= self.index[u]

    def prune(self) -> None:
        """Forget storages dead for every op still to come: each slot's tail follows all their
        users (only once every slot has a tail)."""
        if any(t is None for t in self.tail) or not self.live_set:
            return
        idx = np.fromiter(self.live_set, dtype=np.int64, count=len(self.live_set))
        dead = np.ones(idx.size, dtype=bool)
        for t in self.tail:
            dead &= (self.done_by[idx] <= np.asarray(self.after[t], dtype=np.int64)).all(axis=1)
        self.live_set = [int(x) for x in idx[~dead]]
        self._live_np = None


def _largest_position_sums(
    slot: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    weight: np.ndarray,
    pos_lo: np.ndarray,
    pos_hi: np.ndarray,
    num_slots: int,
) -> int:
    """Sum over slots of the largest total weight of intervals covering one position of the
    slot's range [pos_lo, pos_hi] (intervals clipped to it): one sweep over start and end events,
    slot by slot (each slot's events sum to zero, so one running sum serves all)."""
    a = np.maximum(lo, pos_lo[slot])
    e = np.minimum(hi, pos_hi[slot])
    ok = a <= e
    if not ok.any():
        return 0
    slot, a, e, w = slot[ok], a[ok], e[ok], weight[ok]
    span = 2 * (int(pos_hi.max()) + 3)
    # event keys: slot-major, then position; at one position an end (exclusive) before a start
    keys = np.concatenate((slot * span + 2 * a + 1, slot * span + 2 * (e + 1)))
    deltas = np.concatenate((w, -w))
    order = np.argsort(keys, kind="stable")
    running = np.cumsum(deltas[order])
    is_start = order < len(w)
    starts = running[is_start]
    start_slot = slot[order[is_start]]
    best = np.zeros(num_slots, dtype=np.int64)
    np.maximum.at(best, start_slot, starts)
    return int(best.sum())


def position_bound(
    graph: Graph,
    schedule: StreamSchedule,
    *,
    includes: Includes = ACTIVATIONS,
    facts: CountedStorages | None = None,
    stop_above: int | None = None,
) -> PositionBound:
    """The bound of a finished schedule (``.peak_bytes``, reached when ``.peak_op`` is the latest
    op started): no timing of the schedule has more bytes live at once. With ``stop_above`` the
    replay stops at the first op whose bound exceeds it (``.complete`` is then False)."""
    check_structure(graph, schedule)
    if facts is None:
        facts = counted_storages(graph, includes=includes)
    streams = sorted(set(schedule.streams[op] for op in schedule.launch_order))
    state = PositionBound(facts, len(streams))
    waits = schedule.waits_before()
    for n, op in enumerate(schedule.launch_order):
        stream = schedule.streams[op]
        before = state.clock_before(stream, waits.get(op, ()))
        state.place(op, stream, before, bound=state.probe(op, stream, before, enough=stop_above))
        if stop_above is not None and state.peak_bytes > stop_above:
            state.complete = False
            break
        if n % 64 == 63:
            state.prune()
    return state
