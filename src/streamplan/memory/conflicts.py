"""Which storages may be live together in some timing: the conflict pairs a static arena
must keep apart, and an independent check of a placement against them.

Two storages *never coexist* iff every HB-maximal user of one happens-before the creator of
the other (outputs and resident storages never die). ``conflict_pairs`` finds every pair
that may, stream by stream, with numpy; ``arena_overlaps`` and ``may_coexist`` decide it
directly from happens-before, independently of the planner.
"""

from __future__ import annotations

import numpy as np

from streamplan.memory.liveness import Liveness, StorageLife


class _Ranges:
    """For each storage and stream, which creators on that stream it may coexist with.

    Along one stream the start clocks only grow, so the ops that start after a
    storage is dead for sure form a suffix of the stream: ``dead_from[s][t]`` is
    where it begins (the latest of one ``searchsorted`` per clock coordinate). The
    storages created on stream t between the storage's own creator and that suffix
    may coexist with it.
    """

    def __init__(self, live: Liveness):
        hb = live.hb
        k = hb.num_slots
        self.ops: list[list[str]] = [[] for _ in range(k)]
        for op in hb.launch_index:
            self.ops[hb.slot[op]].append(op)
        self.launch_pos = [np.array([hb.launch_index[op] for op in ops], dtype=np.int64) for ops in self.ops]
        self.created: dict[str, list[StorageLife]] = {}
        for life in live.lives:
            if life.creator is not None:
                self.created.setdefault(life.creator, []).append(life)
        self.born_at = np.array(
            [i for i, life in enumerate(live.lives) if life.creator is not None], dtype=np.int64
        )
        born = [live.lives[i] for i in self.born_at]
        big = np.iinfo(np.int64).max
        death = _death_clocks(live, born, k, big)
        pos = (
            np.array(live.lifetimes.birth, dtype=np.int64)[self.born_at]
            if len(born)
            else np.zeros(0, np.int64)
        )
        first_after = np.zeros((len(born), k), dtype=np.int64)
        dead_from = np.zeros((len(born), k), dtype=np.int64)
        before = hb.before_matrix()
        for t in range(k):
            first_after[:, t] = np.searchsorted(self.launch_pos[t], pos, side="right")
            clocks = before[self.launch_pos[t]]  # start clocks of stream t's ops, in stream order
            cols = [np.searchsorted(clocks[:, x], death[:, x], side="left") for x in range(k)]
            dead_from[:, t] = np.max(np.stack(cols), axis=0) if cols else 0
        self.first_after_matrix, self.dead_from_matrix = first_after, dead_from
        self._row = {x.storage: i for i, x in enumerate(born)}

    @property
    def first_after(self) -> _RowView:
        return _RowView(self._row, self.first_after_matrix)

    @property
    def dead_from(self) -> _RowView:
        return _RowView(self._row, self.dead_from_matrix)

    def pair_count(self) -> int:
        """How many (a, b) conflicts the ranges hold (before residents and same-creator pairs)."""
        total = 0
        for t, ops in enumerate(self.ops):
            counts = np.array([len(self.created.get(op, ())) for op in ops], dtype=np.int64)
            cum = np.concatenate(([0], np.cumsum(counts)))
            fa = self.first_after_matrix[:, t]
            df = np.maximum(self.dead_from_matrix[:, t], fa)
            total += int((cum[df] - cum[fa]).sum())
        return total

    def dead_position(self, life: StorageLife, n: int) -> int:
        """First launch position from which every op starts after ``life`` is dead for sure."""
        if life.persistent or life.creator is None:
            return n
        df = self.dead_from[life.storage]
        last = [int(self.launch_pos[t][df[t] - 1]) for t in range(len(self.ops)) if df[t] > 0]
        return max(last, default=-1) + 1

    def dead_positions(self, live: Liveness) -> np.ndarray:
        """``dead_position`` of every storage in ``live.lives`` order, at once."""
        n = live.lifetimes.n
        out = np.full(len(live.lives), n, dtype=np.int64)
        if not len(self.born_at):
            return out
        last = np.full(len(self.born_at), -1, dtype=np.int64)
        for t in range(len(self.ops)):
            df = self.dead_from_matrix[:, t]
            if len(self.launch_pos[t]):
                at = self.launch_pos[t][np.maximum(df - 1, 0)]
                last = np.maximum(last, np.where(df > 0, at, -1))
        persistent = np.array([live.lives[i].persistent for i in self.born_at], dtype=bool)
        out[self.born_at] = np.where(persistent, n, last + 1)
        return out


class _RowView:
    """``ranges.dead_from[storage]`` (and ``first_after``): one storage's row as a list."""

    def __init__(self, row: dict[str, int], matrix: np.ndarray):
        self._row, self._matrix = row, matrix

    def __getitem__(self, storage: str) -> list[int]:
        return self._matrix[self._row[storage]].tolist()


def _death_clocks(live: Liveness, born: list[StorageLife], k: int, big: int) -> np.ndarray:
    """The vector clock after which each storage is dead (``big`` everywhere: never dies)."""
    after = live.hb.after
    out = np.full((len(born), k), big, dtype=np.int64)
    for i, life in enumerate(born):
        if not life.persistent:
            last = life.last_users
            out[i] = after[last[0]] if len(last) == 1 else np.max([after[u] for u in last], axis=0)
    return out


def conflict_pairs(live: Liveness, ranges: _Ranges | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (i, j), i < j, of ``live.lives`` positions that may be live together.

    A pair (a created first in launch order, b) conflicts iff a is not dead before
    b's creator starts (b cannot die before a is born: HB follows launch order).
    Output-sensitive: the storages created on one stream between a's creator and the
    point where a is dead for sure are one contiguous slice.
    """
    r = ranges or _Ranges(live)
    lives = list(live.lives)
    pos = {s.storage: i for i, s in enumerate(lives)}
    flat, cum = [], []
    for ops in r.ops:
        items = [pos[b.storage] for op in ops for b in r.created.get(op, ())]
        counts = [len(r.created.get(op, ())) for op in ops]
        flat.append(np.array(items, dtype=np.int64))
        cum.append(np.concatenate(([0], np.cumsum(counts, dtype=np.int64))))
    first: list[np.ndarray] = []
    second: list[np.ndarray] = []
    resident = [i for i, s in enumerate(lives) if s.creator is None]
    everyone = np.arange(len(lives), dtype=np.int64)
    for i in resident:
        others = everyone[everyone != i]
        first.append(np.full(len(others), i, dtype=np.int64))
        second.append(others)
    for births in r.created.values():
        ids = [pos[b.storage] for b in births]
        for j, x in enumerate(ids):
            for y in ids[j + 1 :]:
                first.append(np.array([x]))
                second.append(np.array([y]))
    for i, life in enumerate(lives):
        if life.creator is None:
            continue
        fa, df = r.first_after[life.storage], r.dead_from[life.storage]
        parts = [flat[t][cum[t][fa[t]] : cum[t][df[t]]] for t in range(len(r.ops)) if df[t] > fa[t]]
        if parts:
            nb = np.concatenate(parts)
            first.append(np.full(len(nb), i, dtype=np.int64))
            second.append(nb)
    if not first:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    x, y = np.concatenate(first), np.concatenate(second)
    lo, hi = np.minimum(x, y), np.maximum(x, y)
    key = np.sort(lo * len(lives) + hi)  # sorted and deduplicated: residents meet each other twice
    key = key[np.concatenate(([True], key[1:] != key[:-1]))] if len(key) else key
    return key // len(lives), key % len(lives)


def conflicts(live: Liveness) -> dict[str, list[str]]:
    """For each storage, the storages that may be live together with it in some timing."""
    names = [s.storage for s in live.lives]
    adj: dict[str, list[str]] = {n: [] for n in names}
    for i, j in zip(*conflict_pairs(live), strict=False):
        adj[names[i]].append(names[j])
        adj[names[j]].append(names[i])
    return adj


def arena_overlaps(live: Liveness, offsets: dict[str, int]) -> list[tuple[str, str]]:
    """Pairs of storages that may be live together yet overlap in the arena (empty: valid).

    Independent of the planner: byte ranges are compared directly and coexistence is
    decided from happens-before, not from the planner's conflict lists.
    """
    size = {s.storage: s.nbytes for s in live.lives}
    missing = [s for s in size if s not in offsets]
    bad: list[tuple[str, str]] = [(s, s) for s in missing]
    by = live.by_storage()
    spans = sorted((offsets[s], offsets[s] + size[s], s) for s in size if s in offsets and size[s] > 0)
    open_: list[tuple[int, str]] = []
    for lo, hi, s in spans:
        open_ = [(h, t) for h, t in open_ if h > lo]
        for _, t in open_:
            if may_coexist(live, by[s], by[t]):
                bad.append((t, s))
        open_.append((hi, s))
    return bad


def may_coexist(live: Liveness, a: StorageLife, b: StorageLife) -> bool:
    """True when some timing has ``a`` and ``b`` live at the same instant."""
    if a.creator is None or b.creator is None:
        return True
    return not (live.dead_before(a, b.creator) or live.dead_before(b, a.creator))
