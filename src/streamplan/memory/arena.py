"""A static arena valid for every timing (``docs/memory.md``, figure 5).

Two storages *never coexist* iff every HB-maximal user of one happens-before the
creator of the other (outputs and resident storages never die); otherwise they may
be live together in some timing and must not share bytes (those pairs, and the
independent check of a placement, are ``memory.conflicts``). "Dies before the other
is born" is a partial order, so the storages that pairwise may coexist form an
antichain of it: the arena's lower bound is a maximum-weight antichain, found
exactly with one max-flow (weighted Dilworth) on a network of O(storages x
streams) edges. On one stream it is simply the host-order peak. (Only when the
byte total overflows the solver's int32 capacities are sizes rounded, and the
bound is then a proven, not exact, one: ``lower_bound_exact=False``.)

Placement: best fit (the smallest gap between already placed conflicting storages
that fits) under several orders — size, lifetime length, birth, conflict weight,
breadth — then iterated greedy (the storages reaching the top placed first) and
seeded perturbations of the size order, keeping the smallest arena.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from streamplan.ir.frozen import freeze
from streamplan.ir.graph import Graph
from streamplan.ir.includes import ACTIVATIONS, Includes
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.conflicts import _Ranges, conflict_pairs
from streamplan.memory.liveness import Lifetimes, Liveness, StorageLife, liveness

MAX_CONFLICT_PAIRS = 20_000_000  # above this, place on conservative launch intervals


@dataclass(frozen=True)
class ArenaPlan:
    """Byte offsets of every counted storage in one arena, and the arena's lower bound."""

    offsets: Mapping[str, int]
    sizes: Mapping[str, int]
    arena_bytes: int
    lower_bound_bytes: int
    lower_bound_exact: bool
    bound_storages: tuple[str, ...]  # a heaviest set found of pairwise may-coexist storages
    order: str  # the placement order that won
    includes: Includes

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", freeze(self.offsets))
        object.__setattr__(self, "sizes", freeze(self.sizes))
        object.__setattr__(self, "bound_storages", tuple(self.bound_storages))

    @property
    def ratio(self) -> float:
        """Arena size over its lower bound (1.0 is optimal)."""
        return self.arena_bytes / self.lower_bound_bytes if self.lower_bound_bytes else 1.0

    def to_dict(self) -> dict:
        return {
            "arena_bytes": self.arena_bytes,
            "arena_lower_bound_bytes": self.lower_bound_bytes,
            "lower_bound_exact": self.lower_bound_exact,
            "order": self.order,
            "bound_storages": list(self.bound_storages),
            "offsets": dict(self.offsets),
            "includes": self.includes.describe(),
        }

    def __str__(self) -> str:
        mib = 1 << 20
        exact = "" if self.lower_bound_exact else " (proven bound, not exact)"
        return (
            f"static arena {self.arena_bytes / mib:.3f} MiB, lower bound "
            f"{self.lower_bound_bytes / mib:.3f} MiB{exact}, ratio {self.ratio:.3f}, "
            f"order {self.order} ({self.includes.describe()})"
        )


def _neighbours(n: int, first: np.ndarray, second: np.ndarray) -> list[np.ndarray]:
    src = np.concatenate([first, second])
    dst = np.concatenate([second, first])
    order = np.argsort(src, kind="stable")
    src, dst = src[order], dst[order]
    bounds = np.searchsorted(src, np.arange(n + 1))
    return [dst[bounds[i] : bounds[i + 1]] for i in range(n)]


def _best_fit(lo: np.ndarray, hi: np.ndarray, nbytes: int) -> int:
    """Offset for ``nbytes`` among the placed storages it conflicts with, at ``[lo, hi)``.

    The start of the smallest free gap that fits (the lowest of equal gaps), or the
    top of those storages when none fits; 0 when there are none.
    """
    if not len(lo):
        return 0
    srt = np.argsort(lo, kind="stable")
    lo = lo[srt]
    top = np.maximum.accumulate(hi[srt])
    starts = np.concatenate(([0], top[:-1]))  # free space begins after everything below
    gaps = lo - starts
    fit = np.nonzero(gaps >= nbytes)[0]
    return int(starts[fit[np.argmin(gaps[fit])]]) if len(fit) else int(top[-1])


def _place(order: list[int], size: np.ndarray, nbrs: list[np.ndarray]) -> np.ndarray:
    """Best-fit placement in ``order`` against the already placed conflict neighbours."""
    off = np.full(len(size), -1, dtype=np.int64)
    for i in order:
        nb = nbrs[i]
        nb = nb[off[nb] >= 0]
        lo = off[nb]
        off[i] = _best_fit(lo, lo + size[nb], size[i])
    return off


def _breadth(lives: list[StorageLife], lt: Lifetimes) -> list[int]:
    """Greedy-by-breadth key: the heaviest launch-order load over each storage's lifetime
    (storages at the fullest moments are placed first, as TFLite's planner does)."""
    diff = np.zeros(lt.n + 3, dtype=np.int64)
    spans = []
    for life, birth, death in zip(lives, lt.birth, lt.death, strict=True):
        b, d = birth + 1, death + 1  # shift: residents are born at -1
        spans.append((b, d))
        diff[b] += life.nbytes
        diff[d + 1] -= life.nbytes
    load = np.cumsum(diff)
    return [int(load[b : d + 1].max()) for b, d in spans]


@dataclass(frozen=True, eq=False)
class _Placement:
    """One placement found: its arena size, the order that produced it, the offsets."""

    arena_bytes: int
    order: str
    offsets: np.ndarray


def _promote_top(best: _Placement, keys, lives, size, nbrs, bound: int, rounds: int = 40) -> _Placement:
    """Iterated greedy: the storages that reach the top of the arena are moved to the front of
    the placement order and everything is placed again; keep the best arena seen."""
    name, top, off = best.order, best.arena_bytes, best.offsets
    order = sorted(range(len(lives)), key=keys[name] if name in keys else keys["size"])
    for _ in range(rounds):
        culprits = set(np.nonzero(off + size >= top)[0].tolist())
        order = [i for i in order if i in culprits] + [i for i in order if i not in culprits]
        off = _place(order, size, nbrs)
        top = int((off + size).max())
        if top < best.arena_bytes:
            best = _Placement(top, f"{name}+promote", off)
        if best.arena_bytes <= bound:
            break
    return best


RANDOM_RESTARTS = 48
RANDOM_RESTART_MAX_STORAGES = 5000


def plan_arena(
    graph: Graph,
    schedule: StreamSchedule,
    *,
    includes: Includes = ACTIVATIONS,
    live: Liveness | None = None,
) -> ArenaPlan:
    """Offsets for every counted storage, valid for every timing, and the lower bound."""
    if live is None:
        live = liveness(graph, schedule, includes=includes)
    ranges = _Ranges(live)
    if ranges.pair_count() > MAX_CONFLICT_PAIRS:
        return _plan_by_launch_intervals(live, ranges)
    lt = live.lifetimes
    birth, death = lt.birth, lt.death
    lives = list(live.lives)
    size = np.array([s.nbytes for s in lives], dtype=np.int64)
    nbrs = _neighbours(len(lives), *conflict_pairs(live, ranges))
    keys = {
        "size": lambda i: (-lives[i].nbytes, birth[i]),
        "lifetime": lambda i: (-(death[i] - birth[i]), -lives[i].nbytes, birth[i]),
        "birth": lambda i: (birth[i], -lives[i].nbytes),
        "conflict-weight": lambda i: (-len(nbrs[i]) * lives[i].nbytes, birth[i]),
    }
    if len(lives) <= RANDOM_RESTART_MAX_STORAGES:
        breadth = _breadth(lives, lt)
        keys["breadth"] = lambda i: (-breadth[i], -lives[i].nbytes, birth[i])
    lb = lower_bound(live, ranges)
    bound = lb.nbytes
    best: _Placement | None = None
    for name, key in keys.items():
        off = _place(sorted(range(len(lives)), key=key), size, nbrs)
        top = int((off + size).max()) if len(lives) else 0
        if best is None or top < best.arena_bytes:
            best = _Placement(top, name, off)
        if top <= bound:
            break  # already optimal
    assert best is not None
    if best.arena_bytes > bound and len(lives) <= RANDOM_RESTART_MAX_STORAGES:
        best = _promote_top(best, keys, lives, size, nbrs, bound)
    if best.arena_bytes > bound and len(lives) <= RANDOM_RESTART_MAX_STORAGES:
        # Best fit is sensitive to ties and near-ties in size; a few seeded perturbations
        # of the size order close most of the remaining gap (as TVM's hill climbing does).
        rng = np.random.default_rng(0)
        base_key = np.array([s.nbytes for s in lives], dtype=np.float64)
        for attempt in range(RANDOM_RESTARTS):
            noisy = base_key * rng.uniform(0.7, 1.3, size=len(lives))
            off = _place(list(np.argsort(-noisy, kind="stable")), size, nbrs)
            top = int((off + size).max())
            if top < best.arena_bytes:
                best = _Placement(top, f"size-perturbed-{attempt}", off)
            if best.arena_bytes <= bound:
                break
    offs = {s.storage: int(best.offsets[i]) for i, s in enumerate(lives)}
    sizes = {s.storage: s.nbytes for s in live.lives}
    return ArenaPlan(offs, sizes, best.arena_bytes, bound, lb.exact, lb.members, best.order, live.includes)


def _plan_by_launch_intervals(live: Liveness, r: _Ranges) -> ArenaPlan:
    """Placement for very many conflicts: conservative lifetimes on the launch line.

    Each storage gets the launch interval [creator, first position from which every
    op starts after it is dead for sure); overlapping intervals is implied by may-
    coexist, so a placement without interval overlaps is valid. Best fit in birth
    order against the intervals still open.
    """
    lt = live.lifetimes
    lives = live.lives
    dead_at = np.maximum(r.dead_positions(live), np.array(lt.birth, dtype=np.int64) + 1).tolist()
    order = sorted(range(len(lives)), key=lambda i: (lt.birth[i], -lives[i].nbytes))
    sizes_list = [life.nbytes for life in lives]
    if all(b > 0 for b in sizes_list):
        offs = _interval_best_fit(order, lt.birth, sizes_list, dead_at)
    else:
        offs = _interval_best_fit_arrays(order, lt.birth, sizes_list, dead_at)
    offsets = {lives[i].storage: offs[i] for i in range(len(lives))}
    top = max((offs[i] + sizes_list[i] for i in range(len(lives))), default=0)
    lb = lower_bound(live, r)
    sizes = {s.storage: s.nbytes for s in live.lives}
    return ArenaPlan(offsets, sizes, top, lb.nbytes, lb.exact, lb.members, "launch-interval", live.includes)


def _interval_best_fit(order, birth, size, dead) -> list[int]:
    """``_interval_best_fit_arrays`` for positive sizes, in O(log open) per storage.

    Positive open blocks never overlap (each was placed clear of all open ones), so in
    offset order each block's gap is its start minus the previous block's end; the gaps
    are kept sorted by (size, offset), and the first that fits is the smallest one, the
    lowest of equal ones: the same choice as the array version.
    """
    import bisect
    import heapq

    los: list[int] = []  # open blocks by offset
    hi_of: dict[int, int] = {}
    gaps: list[tuple[int, int]] = []  # (gap before the block, block offset)
    expiry: list[tuple[int, int]] = []  # (dead position, block offset)
    offs = [0] * len(size)

    def prev_hi(k: int) -> int:
        return hi_of[los[k - 1]] if k > 0 else 0

    def drop_gap(gap: int, lo: int) -> None:
        del gaps[bisect.bisect_left(gaps, (gap, lo))]

    for i in order:
        b = birth[i]
        while expiry and expiry[0][0] <= b:
            _, lo = heapq.heappop(expiry)
            k = bisect.bisect_left(los, lo)
            before = prev_hi(k)
            drop_gap(lo - before, lo)
            if k + 1 < len(los):
                nxt = los[k + 1]
                drop_gap(nxt - hi_of[lo], nxt)
                bisect.insort(gaps, (nxt - before, nxt))
            del los[k]
            del hi_of[lo]
        n = size[i]
        j = bisect.bisect_left(gaps, (n, -1))
        if j < len(gaps):
            gap, lo_next = gaps[j]
            off = lo_next - gap
        else:
            off = hi_of[los[-1]] if los else 0
        k = bisect.bisect_left(los, off)
        before = prev_hi(k)
        if k < len(los):
            nxt = los[k]
            drop_gap(nxt - before, nxt)
            bisect.insort(gaps, (nxt - (off + n), nxt))
        bisect.insort(gaps, (off - before, off))
        los.insert(k, off)
        hi_of[off] = off + n
        heapq.heappush(expiry, (dead[i], off))
        offs[i] = off
    return offs


def _interval_best_fit_arrays(order, birth, size, dead) -> list[int]:
    """Best fit in ``order`` against the blocks whose launch interval is still open."""
    off_open = np.zeros(0, dtype=np.int64)
    end_open = np.zeros(0, dtype=np.int64)
    dead_open = np.zeros(0, dtype=np.int64)
    offs = [0] * len(size)
    for i in order:
        keep = dead_open > birth[i]
        off_open, end_open, dead_open = off_open[keep], end_open[keep], dead_open[keep]
        off = _best_fit(off_open, end_open, size[i])
        offs[i] = off
        off_open = np.append(off_open, off)
        end_open = np.append(end_open, off + size[i])
        dead_open = np.append(dead_open, dead[i])
    return offs


@dataclass(frozen=True)
class LowerBound:
    """A heaviest set found of pairwise may-coexist storages; ``exact``: provably the heaviest."""

    nbytes: int
    members: tuple[str, ...]
    exact: bool


def lower_bound(live: Liveness, ranges: _Ranges | None = None) -> LowerBound:
    """Heaviest set of pairwise may-coexist storages (the arena's lower bound)."""
    if not live.lives:
        return LowerBound(nbytes=0, members=(), exact=True)
    if live.hb.num_slots <= 1:
        return _host_order_clique(live)
    return _max_weight_antichain(live, ranges or _Ranges(live))


def _host_order_clique(live: Liveness) -> LowerBound:
    """Storages live at the host-order peak (pairwise co-live: a clique, exact on one stream)."""
    lt = live.lifetimes
    best, at = -1, -1
    spans = list(zip(lt.birth, lt.death, live.lives, strict=True))
    points = {max(b, 0) for b, _, _ in spans} or {0}  # a set: membership below is O(1)
    delta: dict[int, int] = {}
    for b, d, s in spans:
        delta[max(b, 0)] = delta.get(max(b, 0), 0) + s.nbytes
        delta[d + 1] = delta.get(d + 1, 0) - s.nbytes
    cur = 0
    for t in sorted(delta):
        cur += delta[t]
        if t in points and cur > best:
            best, at = cur, t
    members = [s for b, d, s in spans if max(b, 0) <= at <= d]
    return LowerBound(
        nbytes=sum(s.nbytes for s in members), members=tuple(s.storage for s in members), exact=True
    )


def _max_weight_antichain(live: Liveness, r: _Ranges) -> LowerBound:
    """Maximum-weight antichain of "dies before the other is born" (weighted Dilworth).

    Max-flow from a source through a_L (capacity: a's bytes) to b_R (capacity: b's
    bytes) and the sink, where a_L reaches b_R iff a dies before b is born. That
    relation is routed through one chain of nodes per stream (a_L enters stream t
    where a is dead for sure, and walks on to every later creator), so the network
    has O(storages x streams) edges. The antichain is {a : a_L reachable from the
    source in the residual graph, a_R not}; its weight is total - max flow.
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import breadth_first_order, maximum_flow

    lives = list(live.lives)
    n = len(lives)
    weights = np.array([s.nbytes for s in lives], dtype=np.int64)
    unit = int(np.gcd.reduce(weights[weights > 0])) if np.any(weights > 0) else 1
    exact = True
    if int(weights.sum()) // unit >= 2**30:  # scipy wants int32 capacities
        unit, exact = max(unit, int(weights.sum()) // 2**30 + 1), False
    w = weights // unit  # rounding down keeps the antichain real; its true bytes are summed below
    inf = int(w.sum()) + 1
    chain_base = [2 * n + 2]
    for ops in r.ops:
        chain_base.append(chain_base[-1] + len(ops) + 1)
    src, sink, total_nodes = 2 * n, 2 * n + 1, chain_base[-1]
    born = r.born_at
    idx = np.arange(n, dtype=np.int64)
    wi = w.astype(np.int64)
    us, vs, caps = [np.full(n, src), n + idx], [idx, np.full(n, sink)], [wi, wi]
    slot, index = live.hb.slot, live.hb.index
    for t, ops in enumerate(r.ops):
        j = r.dead_from_matrix[:, t]
        enter = j < len(ops)  # a is dead for sure before stream t's op j starts
        us.append(born[enter])
        vs.append(chain_base[t] + j[enter])
        caps.append(np.full(int(enter.sum()), inf))
        along = np.arange(len(ops), dtype=np.int64) + chain_base[t]
        us.append(along)
        vs.append(along + 1)
        caps.append(np.full(len(ops), inf))
    creator_node = np.array(
        [chain_base[slot[lives[i].creator]] + index[lives[i].creator] - 1 for i in born], dtype=np.int64
    )
    us.append(creator_node)
    vs.append(n + born)
    caps.append(np.full(len(born), inf))
    u, v, cap = np.concatenate(us), np.concatenate(vs), np.concatenate(caps)
    graph = csr_matrix((cap.astype(np.int32), (u, v)), shape=(total_nodes, total_nodes))
    flow = maximum_flow(graph, src, sink)
    residual = graph - flow.flow
    residual.data = np.where(residual.data > 0, residual.data, 0)
    residual.eliminate_zeros()
    reach = np.zeros(total_nodes, dtype=bool)
    reach[breadth_first_order(residual, src, directed=True, return_predecessors=False)] = True
    pick = np.nonzero(reach[:n] & ~reach[n : 2 * n])[0].tolist()
    return LowerBound(
        nbytes=sum(lives[i].nbytes for i in pick), members=tuple(lives[i].storage for i in pick), exact=exact
    )
