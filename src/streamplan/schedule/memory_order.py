"""``memory``: one stream, an op order that minimises peak live activation bytes.

The graph is split at single-node cuts (ops every source-to-sink path passes
through): every order runs the ops before a cut, then the cut, then the rest, so
each segment is solved on its own and the peak is the largest segment peak.
Per segment:

- heuristics, as XLA and Inductor do: graph order, greedy "least live bytes
  next", depth-first (LIFO ready list), breadth-first (FIFO) and post-order from
  the sinks; each is replayed and the best kept (so never worse than sequential);
- then an exact dynamic program (Serenity): states are the down-sets of done ops,
  explored layer by layer; the live bytes of a state do not depend on the order
  that reached it, so each state keeps only its least peak. States whose peak
  reaches the best heuristic's are pruned. When a segment needs more than
  ``exact_max_states`` states, the heuristic order stands and the result is
  marked inexact.

Cost: heuristics O(n * width); the DP O(states * width), exponential only in the
width of a segment. Liveness follows ``live_bytes.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.schedule.context import DEFAULT_CONTEXT, ScheduleContext
from streamplan.schedule.live_bytes import StorageFacts, storage_facts
from streamplan.schedule.options import whole

EXACT_MAX_STATES = 20_000


@dataclass(frozen=True, slots=True)
class MemoryOrder:
    """An order, its peak live activation bytes, and whether the peak is proven minimal."""

    order: tuple[str, ...]
    peak_bytes: int
    sequential_peak_bytes: int
    exact: bool
    segments: int
    methods: tuple[str, ...]  # the winning method of each segment


@dataclass(frozen=True)
class MemoryOrderOptions:
    """The ``memory`` policy's tunable: how many states its exact search may visit."""

    exact_max_states: int = EXACT_MAX_STATES

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "exact_max_states", whole("exact_max_states", self.exact_max_states, least=0)
        )


def schedule_memory(graph: Graph, ctx: ScheduleContext = DEFAULT_CONTEXT) -> StreamSchedule:
    """One stream, ops in a peak-minimising order (exact when the search fits the option
    ``exact_max_states``)."""
    mo = memory_order(graph, exact_max_states=ctx.options_as(MemoryOrderOptions).exact_max_states)
    meta = {
        "peak_bytes": mo.peak_bytes,
        "sequential_peak_bytes": mo.sequential_peak_bytes,
        "exact": mo.exact,
        "segments": mo.segments,
        "methods": sorted(set(mo.methods)),
    }
    return StreamSchedule(mo.order, dict.fromkeys(mo.order, 0), (), "memory", meta)


def memory_order(graph: Graph, *, exact_max_states: int = EXACT_MAX_STATES) -> MemoryOrder:
    """The best one-stream order found for peak live activation bytes."""
    facts = storage_facts(graph)
    preds, succs = graph.pred_positions(), graph.succ_positions()
    remaining = list(facts.users)
    live = peak = seq_peak = 0
    order: list[int] = []
    methods: list[str] = []
    exact = True
    segments = _segments(preds, succs)
    for a, b in segments:
        seg = _Segment(a, b, preds, succs, facts, remaining, live)
        best_peak, best_order, best_method = None, None, ""
        for method in ("graph", "greedy", "dfs", "bfs", "postorder"):
            local = getattr(seg, method)()
            p = seg.peak(local)
            if method == "graph":
                seq_peak = max(seq_peak, p)
            if best_peak is None or p < best_peak:
                best_peak, best_order, best_method = p, local, method
        found = seg.exact(best_peak, exact_max_states)
        if found is None:
            exact = False
        elif found[0] < best_peak:
            best_peak, best_order, best_method = found[0], found[1], "exact"
        elif b - a > 1:
            best_method += "(proven)"
        peak = max(peak, best_peak)
        order.extend(a + i for i in best_order)
        methods.append(best_method)
        for i in range(a, b):
            live += facts.alloc_bytes[i]
            for s in facts.touches[i]:
                remaining[s] -= 1
                if remaining[s] == 0 and not facts.pinned[s]:
                    live -= facts.storage_bytes[s]
    ids = graph.node_ids
    return MemoryOrder(tuple(ids[p] for p in order), peak, seq_peak, exact, len(segments), tuple(methods))


def _segments(preds, succs) -> list[tuple[int, int]]:
    """Position ranges between single-node cuts (each cut is a segment of its own).

    In graph (topological) order, the op at p is a cut iff no edge jumps over p,
    every op before p has a successor and every op after p has a predecessor.
    """
    n = len(preds)
    cover = [0] * (n + 1)
    for v, ps in enumerate(preds):
        for u in ps:
            if v - u > 1:
                cover[u + 1] += 1
                cover[v] -= 1
    first_sink = next((i for i in range(n) if not succs[i]), n)
    last_source = next((i for i in range(n - 1, -1, -1) if not preds[i]), -1)
    cuts = []
    jumping = 0
    for p in range(n):
        jumping += cover[p]
        if jumping == 0 and p <= first_sink and p >= last_source:
            cuts.append(p)
    bounds: list[tuple[int, int]] = []
    start = 0
    for c in cuts:
        if c > start:
            bounds.append((start, c))
        bounds.append((c, c + 1))
        start = c + 1
    if start < n:
        bounds.append((start, n))
    return bounds


class _Segment:
    """Ops a..b-1 with everything before a done; local indices 0..m-1."""

    def __init__(self, a, b, preds, succs, facts: StorageFacts, remaining, base_live):
        self.m = m = b - a
        self.a = a
        self.facts = facts
        self.remaining = remaining
        self.base_live = base_live
        self.preds = [[u - a for u in preds[p] if u >= a] for p in range(a, b)]
        self.succs = [[w - a for w in succs[p] if w < b] for p in range(a, b)]
        self.alloc = [facts.alloc_bytes[p] for p in range(a, b)]
        # Storages freed inside this segment: (mask of their local users, bytes).
        users: dict[int, int] = {}
        for i in range(m):
            for s in facts.touches[a + i]:
                users[s] = users.get(s, 0) | (1 << i)
        freeable = {
            s: mask for s, mask in users.items() if not facts.pinned[s] and remaining[s] == mask.bit_count()
        }
        self.frees = [
            [(freeable[s], facts.storage_bytes[s], s) for s in facts.touches[a + i] if s in freeable]
            for i in range(m)
        ]

    # -- replay ----------------------------------------------------------
    def peak(self, local: list[int]) -> int:
        rem: dict[int, int] = {}
        live, peak = self.base_live, 0
        for i in local:
            live += self.alloc[i]
            peak = max(peak, live)
            for _, nbytes, s in self.frees[i]:
                r = rem.get(s, self.remaining[s]) - 1
                rem[s] = r
                if r == 0:
                    live -= nbytes
        return peak

    # -- heuristics ------------------------------------------------------
    def graph(self) -> list[int]:
        return list(range(self.m))

    def _kahn(self, pick) -> list[int]:
        missing = [len(p) for p in self.preds]
        ready = [i for i in range(self.m) if not missing[i]]
        out: list[int] = []
        while ready:
            v = pick(ready)
            out.append(v)
            for w in self.succs[v]:
                missing[w] -= 1
                if not missing[w]:
                    ready.append(w)
        return out

    def dfs(self) -> list[int]:
        return self._kahn(lambda ready: ready.pop())

    def bfs(self) -> list[int]:
        missing = [len(p) for p in self.preds]
        queue = [i for i in range(self.m) if not missing[i]]
        k = 0
        while k < len(queue):
            v = queue[k]
            k += 1
            for w in self.succs[v]:
                missing[w] -= 1
                if not missing[w]:
                    queue.append(w)
        return queue

    def greedy(self) -> list[int]:
        rem: dict[int, int] = {}

        def score(v: int) -> tuple[int, int]:
            freed = sum(nb for _, nb, s in self.frees[v] if rem.get(s, self.remaining[s]) == 1)
            return (self.alloc[v] - freed, v)

        def pick(ready: list[int]) -> int:
            j = min(range(len(ready)), key=lambda j: score(ready[j]))
            v = ready[j]
            ready[j] = ready[-1]
            ready.pop()
            for _, _, s in self.frees[v]:
                rem[s] = rem.get(s, self.remaining[s]) - 1
            return v

        return self._kahn(pick)

    def postorder(self) -> list[int]:
        done = [False] * self.m
        out: list[int] = []
        for root in range(self.m):
            if self.succs[root] or done[root]:
                continue
            stack = [(root, 0)]
            while stack:
                v, k = stack.pop()
                if done[v]:
                    continue
                ps = self.preds[v]
                while k < len(ps) and done[ps[k]]:
                    k += 1
                if k < len(ps):
                    stack.append((v, k + 1))
                    stack.append((ps[k], 0))
                else:
                    done[v] = True
                    out.append(v)
        return out

    # -- exact -----------------------------------------------------------
    def exact(self, bound: int, max_states: int) -> tuple[int, list[int]] | None:
        """(peak, order) of an optimal order below ``bound``; (bound, []) when none beats it;
        None when the search needs more than ``max_states`` states."""
        m = self.m
        if m <= 1:
            return (bound, [])
        pred_mask = [sum(1 << u for u in ps) for ps in self.preds]
        start_ready = sum(1 << i for i in range(m) if not pred_mask[i])
        layer = {0: (0, self.base_live, start_ready)}  # down-set -> (peak, live, ready)
        parents: list[dict[int, tuple[int, int]]] = []
        states = 1
        for _ in range(m):
            nxt: dict[int, tuple[int, int, int]] = {}
            back: dict[int, tuple[int, int]] = {}
            for done, (peak, live, ready) in layer.items():
                r = ready
                while r:
                    low = r & -r
                    v = low.bit_length() - 1
                    r ^= low
                    during = live + self.alloc[v]
                    new_peak = peak if peak > during else during
                    if new_peak >= bound:
                        continue
                    new_done = done | low
                    old = nxt.get(new_done)
                    if old is not None and old[0] <= new_peak:
                        continue
                    new_live = during
                    for mask, nbytes, _ in self.frees[v]:
                        if mask & ~new_done == 0:
                            new_live -= nbytes
                    new_ready = ready ^ low
                    for w in self.succs[v]:
                        if pred_mask[w] & ~new_done == 0:
                            new_ready |= 1 << w
                    nxt[new_done] = (new_peak, new_live, new_ready)
                    back[new_done] = (done, v)
            states += len(nxt)
            if states > max_states:
                return None
            if not nxt:
                return (bound, [])
            parents.append(back)
            layer = nxt
        ((full, (peak, _, _)),) = layer.items()
        order: list[int] = []
        for back in reversed(parents):
            full, v = back[full]
            order.append(v)
        order.reverse()
        return (peak, order)
