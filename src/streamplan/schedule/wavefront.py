"""``wavefront`` (RAF): waves of ready ops, each extended into a chain, with a barrier between waves.

Wave k holds the ops whose predecessors all ran in earlier waves. Each op of a
wave is extended into a chain while the next op is its only successor and has no
other predecessor; the chain runs on one stream. Every chain of wave k+1 waits
for every chain of wave k (the barrier), expressed as waits that
``make_schedule`` then prunes to the few not implied by others. Chains beyond
``max_streams`` share streams round-robin. Linear in ops + edges.
"""

from __future__ import annotations

from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule, Wait
from streamplan.schedule.context import DEFAULT_CONTEXT, ScheduleContext


def wavefront_chains(graph: Graph) -> list[list[list[int]]]:
    """The waves, each a list of chains of node positions."""
    preds, succs = graph.pred_positions(), graph.succ_positions()
    missing = [len(p) for p in preds]
    claimed = [False] * len(preds)
    ready = [i for i, m in enumerate(missing) if m == 0]
    waves: list[list[list[int]]] = []
    while ready:
        wave: list[list[int]] = []
        for head in ready:
            chain = [head]
            claimed[head] = True
            while len(succs[chain[-1]]) == 1 and len(preds[succs[chain[-1]][0]]) == 1:
                chain.append(succs[chain[-1]][0])
                claimed[chain[-1]] = True
            wave.append(chain)
        nxt: list[int] = []
        for chain in wave:
            for u in chain:
                for w in succs[u]:
                    missing[w] -= 1
                    if missing[w] == 0 and not claimed[w]:
                        nxt.append(w)
        waves.append(wave)
        ready = sorted(nxt)
    return waves


def schedule_wavefront(graph: Graph, ctx: ScheduleContext = DEFAULT_CONTEXT) -> StreamSchedule:
    """RAF's wavefront schedule with at most ``ctx.max_streams`` streams (barrier waits unpruned)."""
    max_streams = ctx.max_streams
    ids = graph.node_ids
    waves = wavefront_chains(graph)
    order: list[str] = []
    streams: dict[str, int] = {}
    waits: list[Wait] = []
    prev_tails: list[str] = []
    for wave in waves:
        for c, chain in enumerate(wave):
            for p in chain:
                streams[ids[p]] = c % max_streams
        # Interleave the chains' ops so every stream gets work early.
        longest = max(len(ch) for ch in wave)
        for step in range(longest):
            for chain in wave:
                if step < len(chain):
                    order.append(ids[chain[step]])
        for chain in wave:
            head = ids[chain[0]]
            waits.extend(Wait(t, head) for t in prev_tails if streams[t] != streams[head])
        prev_tails = [ids[chain[-1]] for chain in wave]
    meta = {"waves": len(waves), "chains": sum(len(w) for w in waves)}
    return StreamSchedule(tuple(order), streams, tuple(waits), "wavefront", meta)
