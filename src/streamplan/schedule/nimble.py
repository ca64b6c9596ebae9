"""``nimble`` (Kwon et al. 2020): chains from a maximum matching, merged without losing concurrency.

1. Transitive reduction of the dependency DAG (bitset closure).
2. Maximum bipartite matching on the reduced edges (left copy -> right copy of
   each op): matched edges link ops into chains, so every unmatched edge is one
   sync, and the number of syncs is the fewest possible for chains in the reduction.
   Among maximum matchings it takes one matching as many ops with a single
   reduced successor as possible: an op with two or more reduced successors always
   records an event, one with a single successor only when that edge is unmatched,
   so this also gives the fewest events (checked against brute force in tests).
3. A second maximum matching on the chains' closure (chain A -> chain B when A's
   last op reaches B's first op) strings chains one after another onto a stream:
   ops on one stream stay totally ordered, so every two independent ops are still
   on different streams, with the fewest streams that allow it.
4. Over ``max_streams``, streams are packed further (list scheduling by level);
   ``meta["lost_concurrency_pairs"]`` counts the independent op pairs that then
   share a stream.

Cost: closure O(n * e / 64) word operations and O(n^2 / 8) bytes of memory,
Hopcroft-Karp O(e' * sqrt(n)) on the reduced edges and on the chain closure
(up to chains^2 edges). Fine to ~10k ops; not meant for 100k.
"""

from __future__ import annotations

import numpy as np

from streamplan.ir.analysis import levels, transitive_closure_bits
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.schedule._launch import level_launch_order, renumber_streams
from streamplan.schedule.context import DEFAULT_CONTEXT, ScheduleContext
from streamplan.schedule.events import with_derived_waits


def schedule_nimble(graph: Graph, ctx: ScheduleContext = DEFAULT_CONTEXT) -> StreamSchedule:
    """Nimble's stream assignment, capped at ``ctx.max_streams`` streams."""
    max_streams = ctx.max_streams
    n = len(graph.nodes)
    reach = transitive_closure_bits(graph)
    succs = graph.succ_positions()
    reduced = [_reduced_succs(u, succs[u], reach) for u in range(n)]
    tr_edges = sum(len(r) for r in reduced)
    # Ops with one reduced successor record an event only when that edge is unmatched: match
    # those edges first, then grow to a maximum matching (augmenting keeps them matched).
    single = [r if len(r) == 1 else [] for r in reduced]
    nxt = _hopcroft_karp(reduced, n, _hopcroft_karp(single, n))
    chains = _paths(nxt, n)
    # Chain closure: tail(A) reaches head(B). Indexed by positions: rows are tails, columns heads.
    head_mask = 0
    for ch in chains:
        head_mask |= 1 << ch[0]
    rows: list[list[int]] = [[] for _ in range(n)]
    for ch in chains:
        rows[ch[-1]] = _bits_to_indices(reach[ch[-1]] & head_mask, n).tolist()
    chain_of_head = {ch[0]: ch for ch in chains}
    after = _hopcroft_karp(rows, n)  # tail position -> head position of the next chain, or -1
    linked = {h for h in after if h >= 0}
    streams_ops: list[list[int]] = []
    for ch in chains:
        if ch[0] in linked:
            continue
        ops: list[int] = []
        cur = ch
        while True:
            ops.extend(cur)
            h = after[cur[-1]]
            if h < 0:
                break
            cur = chain_of_head[h]
        streams_ops.append(ops)
    uncapped = len(streams_ops)
    bins = _pack(streams_ops, max_streams, levels(graph))
    ids = graph.node_ids
    stream_of = {ids[p]: b for b, ops in enumerate(bins) for p in ops}
    order = level_launch_order(graph)
    stream_of = renumber_streams(order, stream_of)
    lost = _lost_pairs(bins, reach, n) if uncapped > max_streams else 0
    meta = {
        "reduced_edges": tr_edges,
        "chains": len(chains),
        "streams_uncapped": uncapped,
        "lost_concurrency_pairs": lost,
    }
    return with_derived_waits(graph, order, stream_of, "nimble", **meta)


def _reduced_succs(u: int, succ: tuple[int, ...], reach: list[int]) -> list[int]:
    """Successors of u not reachable through another successor (edges of the transitive reduction)."""
    via = 0
    for w in succ:
        via |= reach[w]
    return [w for w in succ if not (via >> w) & 1]


def _hopcroft_karp(adj: list[list[int]], n_right: int, start: list[int] | None = None) -> list[int]:
    """Maximum matching left u -> right v over ``adj[u]``, grown from the matching ``start``.

    Returns the right partner of each left node or -1. Augmenting paths never unmatch a
    matched left node, so every left node matched in ``start`` stays matched.
    """
    n = len(adj)
    match_left = list(start) if start is not None else [-1] * n
    match_right = [-1] * n_right
    for u, v in enumerate(match_left):
        if v >= 0:
            match_right[v] = u
    unreached = n + 1
    while True:
        dist = [unreached] * n
        queue = [u for u in range(n) if match_left[u] < 0 and adj[u]]
        for u in queue:
            dist[u] = 0
        found = False
        k = 0
        while k < len(queue):
            u = queue[k]
            k += 1
            for v in adj[u]:
                w = match_right[v]
                if w < 0:
                    found = True
                elif dist[w] == unreached:
                    dist[w] = dist[u] + 1
                    queue.append(w)
        if not found:
            return match_left
        it = [0] * n
        for root in range(n):
            if match_left[root] >= 0 or dist[root] != 0:
                continue
            stack, via = [root], []
            while stack:
                u = stack[-1]
                if it[u] == len(adj[u]):
                    dist[u] = unreached  # dead end for the rest of this phase
                    stack.pop()
                    if via:
                        via.pop()
                    continue
                v = adj[u][it[u]]
                it[u] += 1
                w = match_right[v]
                if w < 0:
                    via.append(v)
                    for x, y in zip(stack, via, strict=True):
                        match_left[x], match_right[y] = y, x
                    break
                if dist[w] == dist[u] + 1:
                    stack.append(w)
                    via.append(v)


def _paths(nxt: list[int], n: int) -> list[list[int]]:
    """Split 0..n-1 into paths following ``nxt`` (each node has at most one matched predecessor)."""
    has_pred = [False] * n
    for v in nxt:
        if v >= 0:
            has_pred[v] = True
    paths = []
    for u in range(n):
        if has_pred[u]:
            continue
        path = [u]
        while nxt[path[-1]] >= 0:
            path.append(nxt[path[-1]])
        paths.append(path)
    return paths


def _bits_to_indices(bits: int, n: int) -> np.ndarray:
    if not bits:
        return np.zeros(0, dtype=np.int32)
    raw = np.frombuffer(bits.to_bytes((n + 7) // 8, "little"), dtype=np.uint8)
    return np.flatnonzero(np.unpackbits(raw, bitorder="little")[:n]).astype(np.int32)


def _pack(streams_ops: list[list[int]], max_streams: int, level: list[int]) -> list[list[int]]:
    """Pack streams onto at most ``max_streams``: each goes where the previous work ends earliest."""
    if len(streams_ops) <= max_streams:
        return streams_ops
    bins: list[list[int]] = [[] for _ in range(max_streams)]
    end = [-1] * max_streams
    for ops in sorted(streams_ops, key=lambda ops: (level[ops[0]], ops[0])):
        b = min(range(max_streams), key=lambda i: (end[i], i))
        bins[b].extend(ops)
        end[b] = max(end[b], level[ops[-1]])
    return [sorted(b) for b in bins if b]


def _lost_pairs(bins: list[list[int]], reach: list[int], n: int) -> int:
    """Independent op pairs placed on one stream (concurrency the cap took away)."""
    lost = 0
    for ops in bins:
        mask = 0
        for p in ops:
            mask |= 1 << p
        for p in ops:
            later = mask >> (p + 1) << (p + 1)
            lost += (later & ~reach[p]).bit_count()
    return lost
