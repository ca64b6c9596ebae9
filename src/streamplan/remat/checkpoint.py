"""Activation-checkpointing policies as rematerialization plans, so one analysis prices them.

Training frameworks ship fixed policies over a model's repeated blocks (torchtitan's
per-layer *full* AC, its op-level *selective* AC). Each is a choice of what a block keeps
for the backward; everything else the backward reads is computed again right before the
block's backward starts. Written as a plan (``remat.problem``), it goes through the same
rewrite, scheduling, worst-case analysis and simulation as a plan the solvers found, so
its peak, its step time and its recomputed FLOPs sit beside theirs.

**Blocks** are the model's numbered submodules (``layers.3``, ``encoder.layer.3``,
``h.3``, ``layer2.1``): a block's parameters are those whose ``state_dict`` key has that
prefix up to its first number. In the forward, block i runs from a *cut* to the next:
the cut before block i lies between the last op reading block i-1's parameters and the
first reading block i's, where the fewest bytes made earlier are still read later (the
residual stream, which torchtitan saves as the block's input, rather than the two
tensors the residual add sums).

**Policies** (what a block keeps; the ops before the first block and after the last are
not checkpointed, as torchtitan wraps blocks only):

- ``full``: nothing but what leaves the block (its output, read by the next block);
- ``selective``: also the outputs of the ops torchtitan's op-level policy saves — every
  other matrix multiply (the 1st, 3rd, ... ``mm`` of the block's forward) and fused
  attention (``_scaled_dot_product_*_attention``) — recomputing the rest.

Ops that cannot be recomputed (random ones, in-place writers) keep their outputs in
both. The recomputation of a block is what its backward reads and what that needs,
in forward order, placed before the block's first backward op (what PyTorch's
non-reentrant checkpoint with early stop reruns).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from streamplan.cost.op_classes import op_base_name
from streamplan.errors import BudgetError
from streamplan.ir.frozen import FrozenDict
from streamplan.ir.graph import Graph
from streamplan.ir.training import training_step
from streamplan.remat.problem import RematProblem

# each policy, and whether it also keeps the outputs of the ops torchtitan's selective policy saves
CHECKPOINT_POLICIES: Mapping[str, bool] = FrozenDict({"full": False, "selective": True})
SELECTIVE_SAVED_OPS = frozenset(
    {
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
    }
)
_MATMUL = "mm"
_BLOCK_KEY = re.compile(r"^(.*?)\.(\d+)\.")


@dataclass(frozen=True)
class Block:
    """One repeated block: its name (``model.layers.3``) and its forward ops (graph positions
    ``start`` to ``end``, end excluded)."""

    name: str
    start: int
    end: int


def blocks(graph: Graph) -> tuple[Block, ...]:
    """The forward extent of every numbered submodule of a training step, in forward order."""
    step = training_step(graph)
    if step is None or step.first_backward_op is None:
        raise BudgetError(
            f"{graph.name} is not a training step: activation checkpointing needs a backward",
            hint="analyse the model's training step (--train)",
        )
    forward_end = graph.position(step.first_backward_op)
    block_of_param: dict[str, str] = {}
    for vid, key in graph.param_names.items():
        m = _BLOCK_KEY.match(key)
        if m:
            block_of_param[vid] = f"{m.group(1)}.{m.group(2)}"
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    other_after: list[int] = []  # forward ops reading a parameter of no block
    params = set(graph.params)
    for i, node in enumerate(graph.nodes[:forward_end]):
        for v in node.inputs:
            if v not in params:
                continue
            name = block_of_param.get(v)
            if name is None:
                other_after.append(i)
                continue
            first.setdefault(name, i)
            last[name] = i
    if len(first) < 2:
        raise BudgetError(
            f"{graph.name} has no repeated blocks to checkpoint (numbered submodules such as "
            "layers.0, layers.1 whose parameters the forward reads)",
            hint="use a budget instead: streamplan remat MODEL --train --budget 0.5x",
        )
    names = sorted(first, key=first.__getitem__)
    crossing = _crossing_bytes(graph, forward_end)
    cuts = []
    for k, name in enumerate(names):
        if k:
            lo = last[names[k - 1]] + 1
        else:  # after what reads the model's own parameters before the blocks (the embedding)
            lo = max((i + 1 for i in other_after if i < first[name]), default=0)
        cuts.append(_best_cut(crossing, lo, first[name]))
    tail_end = next((i for i in other_after if i > last[names[-1]]), forward_end)
    cuts.append(_best_cut(crossing, last[names[-1]] + 1, tail_end))
    return tuple(Block(name, cuts[k], cuts[k + 1]) for k, name in enumerate(names))


def _crossing_bytes(graph: Graph, forward_end: int) -> np.ndarray:
    """For each forward position c: bytes of activations made before c and read by the forward
    at or after c (what a cut there would have to keep)."""
    crossing = np.zeros(forward_end + 2, dtype=np.int64)
    storages = graph.storages()
    last_read: dict[str, int] = {}
    for i, node in enumerate(graph.nodes[:forward_end]):
        for v in node.inputs:
            last_read[graph.storage_of(v)] = i
    for sid, i in last_read.items():
        producer = graph.producer(sid)
        if producer is None or storages[sid].kind != "activation":
            continue
        born = graph.position(producer)
        if born < i:
            crossing[born + 1] += storages[sid].nbytes
            crossing[i + 1] -= storages[sid].nbytes
    return np.cumsum(crossing)


def _best_cut(crossing: np.ndarray, lo: int, hi: int) -> int:
    """The position in [lo, hi] with the fewest crossing bytes (the earliest among equals)."""
    if hi <= lo:
        return hi
    return lo + int(np.argmin(crossing[lo : hi + 1]))


def checkpoint_plan(
    problem: RematProblem, checkpointing: str, found: tuple[Block, ...] | None = None
) -> tuple[int, ...]:
    """The plan (a sequence of ``problem.order`` positions) that checkpoints the blocks as
    ``checkpointing`` (``full`` or ``selective``) says."""
    if checkpointing not in CHECKPOINT_POLICIES:
        raise BudgetError(
            f"unknown checkpointing policy {checkpointing!r}",
            hint=f"choose one of: {', '.join(CHECKPOINT_POLICIES)}",
        )
    graph = problem.graph
    found = blocks(graph) if found is None else found
    forward_end = graph.position(training_step(graph).first_backward_op)  # type: ignore[union-attr, arg-type]
    forward = [graph.position(nid) < forward_end for nid in problem.order]
    pos = {nid: k for k, nid in enumerate(problem.order)}
    inserts: dict[int, set[int]] = {}  # stage -> recomputations placed before it
    for block in found:
        ops = [pos[graph.node_ids[i]] for i in range(block.start, block.end)]
        kept = _kept(problem, ops, CHECKPOINT_POLICIES[checkpointing], forward)
        made_here = {s: k for k in ops for s in problem.writes[k]}
        remade = {  # what the backward reads of the block and the block may drop
            s
            for s in made_here
            if s not in kept
            and problem.droppable[s]
            and not problem.persistent[s]
            and any(not forward[r] for r in problem.readers[s])
        }
        if not remade:
            continue
        first_backward = min(r for s in remade for r in problem.readers[s] if not forward[r])
        need: set[int] = set()
        stack = [made_here[s] for s in remade]
        while stack:  # and what those need, made in the block and not kept, again
            k = stack.pop()
            if k in need:
                continue
            need.add(k)
            stack.extend(
                made_here[s]
                for s in problem.reads[k]
                if s in made_here and s not in kept and problem.droppable[s] and made_here[s] not in need
            )
        inserts.setdefault(first_backward, set()).update(need)
    seq: list[int] = []
    for q in range(problem.n):
        seq.extend(sorted(inserts.get(q, ())))
        seq.append(q)
    return tuple(seq)


def _kept(problem: RematProblem, ops: list[int], saves_ops: bool, forward: list[bool]) -> set[int]:
    """Storages made in a block that the policy keeps: what later forward ops read (the block's
    output), what cannot be made again, and (``saves_ops``: selective) the saved ops' outputs."""
    inside = set(ops)
    kept: set[int] = set()
    matmuls = 0
    for k in ops:
        base = op_base_name(problem.graph.node(problem.order[k]).op)
        save = not problem.recomputable[k]
        if saves_ops:
            if base == _MATMUL:
                matmuls += 1
                save = save or matmuls % 2 == 1  # every other one: the 1st, 3rd, ...
            save = save or base in SELECTIVE_SAVED_OPS
        for s in problem.writes[k]:
            if save or any(forward[r] and r not in inside for r in problem.readers[s]):
                kept.add(s)
    return kept
