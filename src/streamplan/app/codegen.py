"""A schedule written as a torch-only Python module, with its predictions (the ``codegen`` command)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamplan.app.analysis import PolicyRun, run_policy, run_schedule
from streamplan.app.display import Shown
from streamplan.codegen import Predictions, default_class_name, generate_module
from streamplan.errors import UnsupportedError
from streamplan.ir.collectives import collectives
from streamplan.ir.graph import Graph
from streamplan.ir.includes import EVERYTHING
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.allocators import replay
from streamplan.memory.host_order import host_order_peak_bytes
from streamplan.memory.simulated import simulated_memory
from streamplan.memory.worst_case import worst_case_peak
from streamplan.schedule.context import DEFAULT_CONTEXT, ScheduleContext


@dataclass(frozen=True)
class GeneratedModule(Shown):
    """The module's source, the class it defines, and what the header predicts; for one rank's
    program, how many collectives it issues, on how many process groups, and its host waits."""

    source: str
    class_name: str
    graph: str
    policy: str
    num_streams: int
    num_events: int
    predictions: Predictions
    collectives: int = 0
    process_groups: int = 0
    host_waits: int = 0

    def __str__(self) -> str:
        return self.source

    def to_dict(self) -> dict[str, Any]:
        return {
            "graph": self.graph,
            "policy": self.policy,
            "class_name": self.class_name,
            "streams": self.num_streams,
            "events": self.num_events,
            "lines": self.source.count("\n"),
            "predictions": self.predictions.to_dict(),
            "collectives": self.collectives,
            "process_groups": self.process_groups,
            "host_waits": self.host_waits,
        }


def predict(graph: Graph, run: PolicyRun, ctx: ScheduleContext | None = None) -> Predictions:
    """The figures a generated module's header records for ``run`` (activations; the allocator
    replay with inputs and weights resident, as a measured ``max_memory_allocated`` counts them)."""
    ctx = ctx or DEFAULT_CONTEXT
    s, tl = run.schedule, run.timeline
    ctx.progress("predicting memory", None, None)
    worst = worst_case_peak(graph, s, time_limit_s=ctx.time_limit_s)
    alloc = replay(graph, s, "torch-cuda", timeline=tl, includes=EVERYTHING)
    return Predictions(
        device=ctx.cost.device_name,
        makespan_ms=tl.makespan_ms,
        host_order_peak_bytes=host_order_peak_bytes(graph, s),
        worst_case_lower_bytes=worst.lower_bytes,
        worst_case_upper_bytes=worst.upper_bytes,
        worst_case_exact=worst.exact,
        simulated_peak_bytes=simulated_memory(graph, s, tl).peak_bytes,
        max_memory_allocated_bytes=alloc.allocated_peak_bytes,
        max_memory_reserved_bytes=alloc.reserved_peak_bytes,
    )


def codegen_run(
    graph: Graph,
    run: PolicyRun,
    ctx: ScheduleContext | None = None,
    *,
    model: str | None = None,
    class_name: str | None = None,
) -> GeneratedModule:
    """The module for a scheduled and simulated ``run`` of ``graph``.

    A fused run is written over its kernels, each as its parts' ATen calls in order. A rank
    program (``--parallel``) is written with its collectives on one ``torch.distributed``
    process group per communication stream and its host waits (``docs/codegen.md``).
    """
    graph = run.scheduled_graph(graph)
    check_ops_exist(graph)
    predictions = predict(graph, run, ctx)
    s = run.schedule
    name = class_name or default_class_name(graph, s)
    source = generate_module(graph, s, model=model, predictions=predictions, class_name=name)
    comm = collectives(graph)
    return GeneratedModule(
        source,
        name,
        graph.name,
        s.policy,
        s.num_streams,
        s.num_events,
        predictions,
        collectives=len(comm),
        process_groups=len({s.streams[n.id] for n in comm}),
        host_waits=len(s.host_waits),
    )


def check_ops_exist(graph: Graph) -> None:
    """Refuse a graph with an op this torch does not have (an ``UnsupportedError`` naming the
    node and the op): the module would fail when it runs, or not import at all."""
    from streamplan.runtime.interpret import unresolvable_ops  # imports torch: only when writing code

    bad = unresolvable_ops(graph)
    if bad:
        node, op = bad[0]
        more = f" (and {len(bad) - 1} more nodes)" if len(bad) > 1 else ""
        raise UnsupportedError(
            f"node {node!r:.60} calls op {op!r:.80}, which torch does not have{more}",
            where=graph.name,
            hint="codegen writes calls of torch.ops overloads only; is the graph from a newer torch, "
            "or does it need a library of custom ops this torch has not loaded?",
        )


def codegen_policy(
    graph: Graph,
    policy: str | StreamSchedule,
    ctx: ScheduleContext | None = None,
    *,
    model: str | None = None,
    class_name: str | None = None,
) -> GeneratedModule:
    """Schedule ``graph`` with ``policy`` (or verify a given schedule), simulate it, write the module."""
    ctx = ctx or DEFAULT_CONTEXT
    if isinstance(policy, StreamSchedule):
        run = run_schedule(graph, policy, ctx)
    else:
        run = run_policy(graph, policy, ctx)
    return codegen_run(graph, run, ctx, model=model, class_name=class_name)
