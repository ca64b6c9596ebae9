"""Reference orders the solvers plan on, besides the graph's own and a policy's.

A captured training step runs the optimizer update after the whole backward pass, so
every gradient stays alive from the op that makes it to the end of the step: on a
ResNet-50 that is as many bytes as the parameters, held on top of the backward's
activations, and no recomputation can lower it (a gradient is read once, by its
update). ``updates_early`` moves each update op to the earliest point its
dependencies allow — right after the last op that reads its parameter and the one
that finishes its gradient — which frees each gradient at once (the "optimizer step
in the backward pass" of memory-frugal trainers). It is a topological order of the
same dependencies: every pair of ops that touch one storage, one of them writing,
keeps its relative order, so the dependencies a graph derives from its node order are
the same in the reordered graph.
"""

from __future__ import annotations

from streamplan.ir.graph import Graph
from streamplan.ir.training import training_step


def updates_early(graph: Graph) -> tuple[str, ...] | None:
    """The graph's order with every optimizer-update op as early as its dependencies allow;
    None when the graph has no optimizer update (nothing to move)."""
    step = training_step(graph)
    if step is None or step.first_optimizer_op is None or not graph.has_node(step.first_optimizer_op):
        return None
    start = graph.position(step.first_optimizer_op)
    ids = graph.node_ids
    preds = graph.pred_positions()
    succs = graph.succ_positions()
    waiting = [len(preds[i]) for i in range(len(ids))]
    order: list[str] = []
    placed = [False] * len(ids)

    def place(i: int) -> None:
        stack = [i]
        while stack:
            j = stack.pop()
            placed[j] = True
            order.append(ids[j])
            ready = []
            for k in succs[j]:
                waiting[k] -= 1
                if k >= start and waiting[k] == 0 and not placed[k]:
                    ready.append(k)
            stack.extend(sorted(ready, reverse=True))  # in graph order among themselves

    for i in range(len(ids)):
        if not placed[i] and (i < start or waiting[i] == 0):
            place(i)
    out = tuple(order)
    if len(out) != len(ids):  # cannot happen for a valid graph; keep the graph's order then
        return None
    return None if out == ids else out
