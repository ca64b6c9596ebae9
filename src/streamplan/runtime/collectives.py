"""Collective nodes run with ``torch.distributed`` in a process that is one rank.

``Communicator`` owns one process group per communication stream of a schedule: the
runtime runs each stream on its own thread (CPU) or CUDA stream, and the collectives
of one stream are issued in launch order on every rank, so giving each stream a group
of its own keeps every group's sequence the same on all ranks (two streams sharing a
group could interleave differently on two ranks and deadlock). ``installed(comm)`` makes
it the one ``interpret.call_node`` hands collective nodes to in this process.

Semantics (``ir.collectives``): an all-gather writes a new tensor of ``group_size``
shards in rank order; a reduce-scatter a new tensor with this rank's part of the sum
(divided by the group size for ``avg``); an all-reduce reduces its input in place.
gloo has no average, so ``avg`` is a sum divided after, as FSDP does it on gloo.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from streamplan.errors import ExecutionError
from streamplan.ir.collectives import collective_kind
from streamplan.ir.graph import Graph, Node
from streamplan.ir.schedule import StreamSchedule

_ACTIVE: list[Communicator] = []
_LOCK = threading.Lock()


class Communicator:
    """The process groups of one rank's schedule, one per stream that runs collectives."""

    def __init__(self, graph: Graph, schedule: StreamSchedule, backend: str = "gloo"):
        import torch.distributed as dist

        if not dist.is_initialized():
            raise ExecutionError(
                "a rank program runs inside torch.distributed: the process group is not initialised",
                hint="run it with streamplan.runtime.distributed.run_ranks (or `streamplan run --parallel`)",
            )
        self.dist = dist
        self.world = dist.get_world_size()
        self.rank = dist.get_rank()
        comm_streams = sorted({schedule.streams[n.id] for n in graph.nodes if n.op.startswith("comm.")})
        # every rank makes the same groups in the same order (new_group is itself collective)
        self.groups = {s: dist.new_group(backend=backend) for s in comm_streams}
        self.streams = dict(schedule.streams)
        for n in graph.nodes:
            size = n.attrs.get("group_size")
            if n.op.startswith("comm.") and size != self.world:
                raise ExecutionError(
                    f"{n.id} spans {size} ranks but {self.world} processes run the program",
                    where=graph.name,
                    hint=f"start {size} ranks, or make the plan for {self.world}",
                )

    def __call__(self, node: Node, env: Mapping[str, Any]) -> tuple[Any, ...]:
        kind = collective_kind(node)
        src = env[node.inputs[0]]
        group = self.groups[self.streams[node.id]]
        n = self.world
        average = node.attrs.get("reduce", "sum") == "avg"
        if kind == "all_gather":
            out = torch.empty(src.numel() * n, dtype=src.dtype, device=src.device)
            self.dist.all_gather_single(out, src.contiguous(), group=group)
            return (out.view(-1),)
        if kind == "reduce_scatter":
            out = torch.empty(src.numel() // n, dtype=src.dtype, device=src.device)
            self.dist.reduce_scatter_single(out, src.contiguous(), group=group)
            if average:
                out.div_(n)
            return (out,)
        if kind == "all_reduce":
            self.dist.all_reduce(src, group=group)
            if average:
                src.div_(n)
            return (src,)
        raise ExecutionError(f"{node.id}: unknown collective {node.op}")


@contextlib.contextmanager
def installed(comm: Communicator) -> Iterator[Communicator]:
    """Make ``comm`` run the collective nodes executed in this process inside the block."""
    with _LOCK:
        _ACTIVE.append(comm)
    try:
        yield comm
    finally:
        with _LOCK:
            _ACTIVE.remove(comm)


def run_collective(node: Node, env: Mapping[str, Any]) -> tuple[Any, ...]:
    """Run collective ``node`` with the installed communicator (``ExecutionError`` without one)."""
    if not _ACTIVE:
        raise ExecutionError(
            f"%{node.id} is a collective ({node.op}): it needs the other ranks",
            hint="run a rank program with `streamplan run --parallel ...`, which starts one process per rank",
        )
    return _ACTIVE[-1](node, env)
