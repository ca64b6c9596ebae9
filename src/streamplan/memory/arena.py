"""A static arena valid for every timing (DESIGN §4, figure 5).

Two storages *never coexist* iff every HB-maximal user of one happens-before the
creator of the other (outputs and resident storages never die); otherwise they may
be live together in some timing and must not share bytes. "Dies before the other
is born" is a partial order, so the storages that pairwise may coexist form an
antichain of it: the arena's lower bound is a maximum-weight antichain, found
exactly with one max-flow (weighted Dilworth) up to ``EXACT_BOUND_MAX_STORAGES``;
above that it is a proven clique (the worst-case witness or the host-order peak
set) with ``lower_bound_exact=False``. On one stream it is the host-order peak.

Placement: best fit (the smallest gap between already placed conflicting storages
that fits) under several orders — size, lifetime length, birth — keeping the
smallest arena.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamplan.ir.graph import Graph
from streamplan.memory.liveness import Includes, Liveness, StorageLife, liveness
from streamplan.schedule.schedule import StreamSchedule

EXACT_BOUND_MAX_STORAGES = 4000


@dataclass(frozen=True)
class ArenaPlan:
    """Byte offsets of every counted storage in one arena, and the arena's lower bound."""

    offsets: dict[str, int]
    sizes: dict[str, int]
    arena_bytes: int
    lower_bound_bytes: int
    lower_bound_exact: bool
    bound_storages: tuple[str, ...]  # a heaviest set found of pairwise may-coexist storages
    order: str  # the placement order that won
    includes: Includes

    @property
    def ratio(self) -> float:
        """Arena size over its lower bound (1.0 is optimal)."""
        return self.arena_bytes / self.lower_bound_bytes if self.lower_bound_bytes else 1.0

    def to_dict(self) -> dict:
        return {"arena_bytes": self.arena_bytes, "arena_lower_bound_bytes": self.lower_bound_bytes,
                "lower_bound_exact": self.lower_bound_exact, "order": self.order,
                "bound_storages": list(self.bound_storages), "offsets": dict(self.offsets),
                "includes": self.includes.describe()}

    def __str__(self) -> str:
        mib = 1 << 20
        exact = "" if self.lower_bound_exact else " (proven bound, not exact)"
        return (f"static arena {self.arena_bytes / mib:.3f} MiB, lower bound "
                f"{self.lower_bound_bytes / mib:.3f} MiB{exact}, ratio {self.ratio:.3f}, "
                f"order {self.order} ({self.includes.describe()})")


def conflicts(live: Liveness) -> dict[str, list[str]]:
    """For each storage, the storages that may be live together with it in some timing.

    Sweeps creators in launch order keeping the storages that are not yet dead for
    every future op; a pair (a created first, b) conflicts iff a is not dead before
    b's creator starts (b can never die before a is born: HB follows launch order).
    """
    hb = live.hb
    resident = [s for s in live.lives if s.creator is None]
    by_creator: dict[str, list[StorageLife]] = {}
    for s in live.lives:
        if s.creator is not None:
            by_creator.setdefault(s.creator, []).append(s)
    adj: dict[str, list[str]] = {s.storage: [] for s in live.lives}
    for i, a in enumerate(resident):
        for b in live.lives:
            if b is not a and (b.creator is not None or resident.index(b) > i):
                adj[a.storage].append(b.storage)
                adj[b.storage].append(a.storage)
    death = {s.storage: live.death_clock(s) for s in live.lives if s.creator is not None}
    remaining = [0] * hb.num_slots
    for op in hb.launch_index:
        remaining[hb.slot[op]] += 1
    floor_clock = [0] * hb.num_slots  # clock every future op starts at or after, per stream
    last_after: list[tuple[int, ...] | None] = [None] * hb.num_slots
    active: list[StorageLife] = []
    for op in hb.launch_index:
        births = by_creator.get(op, [])
        before = hb.before[op]
        if births:
            still = []
            for a in active:
                da = death[a.storage]
                if da is not None and all(x <= y for x, y in zip(da, before)):
                    if all(x <= y for x, y in zip(da, floor_clock)):
                        continue  # dead for every later op too
                    still.append(a)
                    continue
                still.append(a)
                for b in births:
                    adj[a.storage].append(b.storage)
                    adj[b.storage].append(a.storage)
            for j, b in enumerate(births):
                for c in births[j + 1:]:
                    adj[b.storage].append(c.storage)
                    adj[c.storage].append(b.storage)
            active = still + births
        s = hb.slot[op]
        remaining[s] -= 1
        last_after[s] = hb.after[op]
        live_streams = [t for t in range(hb.num_slots) if remaining[t] > 0]
        floor_clock = [min((last_after[t] or (0,) * hb.num_slots)[x] for t in live_streams)
                       if live_streams else 1 << 60 for x in range(hb.num_slots)]
    return adj


def _place(order: list[StorageLife], adj: dict[str, list[str]]) -> dict[str, int]:
    """Best-fit placement in ``order``: the smallest fitting gap among placed neighbours."""
    offsets: dict[str, int] = {}
    size = {s.storage: s.nbytes for s in order}
    for s in order:
        busy = sorted((offsets[n], offsets[n] + size[n]) for n in adj[s.storage] if n in offsets)
        best_off, best_gap, cur = None, None, 0
        for lo, hi in busy:
            gap = lo - cur
            if gap >= s.nbytes and (best_gap is None or gap < best_gap):
                best_off, best_gap = cur, gap
            cur = max(cur, hi)
        offsets[s.storage] = cur if best_off is None else best_off
    return offsets


def plan_arena(graph: Graph, schedule: StreamSchedule, *, include_inputs: bool = False,
               include_params: bool = False, live: Liveness | None = None,
               known_clique: tuple[str, ...] = ()) -> ArenaPlan:
    """Offsets for every counted storage, valid for every timing, and the lower bound.

    ``known_clique`` may name storages known to be live together at one instant (a
    worst-case witness); it serves as the bound when the exact bound is too large.
    """
    if live is None:
        live = liveness(graph, schedule, include_inputs=include_inputs, include_params=include_params)
    adj = conflicts(live)
    index = live.hb.launch_index
    n = len(index)

    def birth(s: StorageLife) -> int:
        return -1 if s.creator is None else index[s.creator]

    def death(s: StorageLife) -> int:
        return n if s.persistent else max(index[u] for u in s.users)

    orders = {
        "size": sorted(live.lives, key=lambda s: (-s.nbytes, birth(s))),
        "lifetime": sorted(live.lives, key=lambda s: (-(death(s) - birth(s)), -s.nbytes, birth(s))),
        "birth": sorted(live.lives, key=lambda s: (birth(s), -s.nbytes)),
        "conflict-weight": sorted(live.lives, key=lambda s: (-sum(1 for _ in adj[s.storage]) * s.nbytes,
                                                            birth(s))),
    }
    best = None
    for name, order in orders.items():
        offs = _place(order, adj)
        top = max((offs[s.storage] + s.nbytes for s in live.lives), default=0)
        if best is None or top < best[0]:
            best = (top, name, offs)
    top, name, offs = best
    bound, members, exact = lower_bound(live, adj, known_clique)
    sizes = {s.storage: s.nbytes for s in live.lives}
    return ArenaPlan(offs, sizes, top, bound, exact, tuple(members), name, live.includes)


def lower_bound(live: Liveness, adj: dict[str, list[str]],
                known_clique: tuple[str, ...] = ()) -> tuple[int, list[str], bool]:
    """Heaviest set of pairwise may-coexist storages: (bytes, members, exact)."""
    lives = list(live.lives)
    if not lives:
        return 0, [], True
    if live.hb.num_slots <= 1:
        return _host_order_clique(live) + (True,)
    if len(lives) <= EXACT_BOUND_MAX_STORAGES:
        return _max_weight_antichain(live) + (True,)
    size = live.by_storage()
    cands = [_host_order_clique(live)]
    clique = [s for s in known_clique if s in size]
    if all(b in set(adj[a]) for i, a in enumerate(clique) for b in clique[i + 1:]):
        cands.append((sum(size[s].nbytes for s in clique), clique))
    value, members = max(cands, key=lambda c: c[0])
    return value, members, False


def _host_order_clique(live: Liveness) -> tuple[int, list[str]]:
    """Storages live at the host-order peak (pairwise co-live: a clique)."""
    index = live.hb.launch_index
    n = len(index)
    best, at = -1, -1
    spans = []
    for s in live.lives:
        b = -1 if s.creator is None else index[s.creator]
        d = n if s.persistent else max(index[u] for u in s.users)
        spans.append((b, d, s))
    points = sorted({max(b, 0) for b, _, _ in spans}) or [0]
    delta: dict[int, int] = {}
    for b, d, s in spans:
        delta[max(b, 0)] = delta.get(max(b, 0), 0) + s.nbytes
        delta[d + 1] = delta.get(d + 1, 0) - s.nbytes
    cur = 0
    for t in sorted(delta):
        cur += delta[t]
        if t in points and cur > best:
            best, at = cur, t
    members = [s.storage for b, d, s in spans if max(b, 0) <= at <= d]
    return sum(s.nbytes for b, d, s in spans if max(b, 0) <= at <= d), members


def _max_weight_antichain(live: Liveness) -> tuple[int, list[str]]:
    """Maximum-weight antichain of "dies before the other is born" (weighted Dilworth).

    Max-flow on the bipartite graph (a_L -> b_R when a < b, source -> a_L and
    b_R -> sink with capacity the bytes); the antichain is {a : a_L reachable from
    the source in the residual graph, a_R not}, and its weight is total - flow.
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import breadth_first_order, maximum_flow

    lives = list(live.lives)
    n = len(lives)
    k = live.hb.num_slots
    big = 1 << 60
    death = np.full((n, k), big, dtype=np.int64)
    birth = np.full((n, k), -1, dtype=np.int64)
    for i, s in enumerate(lives):
        dc = live.death_clock(s)
        if dc is not None:
            death[i] = dc
        if s.creator is not None:
            birth[i] = live.hb.before[s.creator]
    rows, cols = [], []
    step = max(1, 2_000_000 // max(1, n * k))
    for lo in range(0, n, step):
        less = np.all(death[lo:lo + step, None, :] <= birth[None, :, :], axis=2)
        a, b = np.nonzero(less)
        rows.append(a + lo)
        cols.append(b)
    a = np.concatenate(rows)
    b = np.concatenate(cols)
    # Scale bytes down by their gcd so capacities stay small integers (int32 for scipy).
    weights = np.array([s.nbytes for s in lives], dtype=np.int64)
    g = int(np.gcd.reduce(weights[weights > 0])) if np.any(weights > 0) else 1
    w = weights // max(g, 1)
    inf = int(w.sum()) + 1
    if inf >= 2**31 - 1:
        raise OverflowError("arena bound capacities exceed int32; use the approximate bound")
    src, sink = 2 * n, 2 * n + 1
    u = np.concatenate([a, np.full(n, src), n + np.arange(n)])
    v = np.concatenate([n + b, np.arange(n), np.full(n, sink)])
    cap = np.concatenate([np.full(len(a), inf), w, w]).astype(np.int32)
    graph = csr_matrix((cap, (u, v)), shape=(2 * n + 2, 2 * n + 2))
    flow = maximum_flow(graph, src, sink)
    residual = graph - flow.flow
    residual.data = np.where(residual.data > 0, residual.data, 0)
    residual.eliminate_zeros()
    reach = set(breadth_first_order(residual, src, directed=True, return_predecessors=False).tolist())
    members = [lives[i].storage for i in range(n) if i in reach and (n + i) not in reach]
    value = sum(lives[i].nbytes for i in range(n) if i in reach and (n + i) not in reach)
    return value, members


def check_arena(live: Liveness, offsets: dict[str, int]) -> list[tuple[str, str]]:
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
