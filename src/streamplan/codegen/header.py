"""The generated module's docstring: what was scheduled and what streamplan predicts of it.

``header(graph, schedule, model, predictions, step)`` writes the text between the
docstring's quotes: the model and its inputs, the policy's streams and events, how the
graph was fused, a rank program's collectives, a training step's loss and optimizer, and
the ``Predictions`` (makespan, activation peaks, the CUDA allocator's figures). Names from
the graph and the schedule go through ``pysource.plain``: nothing in them can end the
docstring.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamplan.codegen.pysource as ps
from streamplan.ir.collectives import collectives
from streamplan.ir.fused import folded_pair, is_fused
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.ir.training import TrainingStep

MIB = 1 << 20


@dataclass(frozen=True)
class Predictions:
    """What streamplan predicts for the schedule (written into the module's header).

    Memory figures count activations; ``max_memory_allocated_bytes`` is the ``torch-cuda``
    allocator replay with inputs and weights resident and without op workspaces.
    """

    device: str
    makespan_ms: float
    host_order_peak_bytes: int
    worst_case_lower_bytes: int
    worst_case_upper_bytes: int
    worst_case_exact: bool
    simulated_peak_bytes: int
    max_memory_allocated_bytes: int
    max_memory_reserved_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "makespan_ms": self.makespan_ms,
            "host_order_peak_bytes": self.host_order_peak_bytes,
            "worst_case_lower_bytes": self.worst_case_lower_bytes,
            "worst_case_upper_bytes": self.worst_case_upper_bytes,
            "worst_case_exact": self.worst_case_exact,
            "simulated_peak_bytes": self.simulated_peak_bytes,
            "max_memory_allocated_bytes": self.max_memory_allocated_bytes,
            "max_memory_reserved_bytes": self.max_memory_reserved_bytes,
        }


def _mib(b: int) -> str:
    return f"{b / MIB:.3f} MiB"


def header(
    graph: Graph,
    schedule: StreamSchedule,
    model: str | None,
    predictions: Predictions | None,
    step: TrainingStep | None,
) -> str:
    """The module's docstring: what was scheduled and what streamplan predicts. Names from the
    graph and the schedule are shown with ``plain`` (nothing in them can end the docstring)."""
    waits = schedule.num_waits
    lines = [
        f'"""{ps.plain(graph.name)} under the {ps.plain(schedule.policy)} schedule, as plain PyTorch (made by streamplan codegen).',
        "",
        f"model: {ps.plain(model or graph.name)}; {len(graph.nodes)} ops, inputs "
        + ", ".join(
            ps.plain(f"{v} {list(graph.values[v].shape)} {graph.values[v].dtype}") for v in graph.inputs[:4]
        )
        + (" ..." if len(graph.inputs) > 4 else ""),
        f"policy: {ps.plain(schedule.policy)}; {schedule.num_streams} streams, {schedule.num_events} events, "
        f"{waits} cross-stream waits",
    ]
    lines += _rank_header(graph, schedule)
    kernels = [n for n in graph.nodes if is_fused(n)]
    mode = None if schedule.fusion is None else schedule.fusion.mode.value
    if kernels or mode:
        folds = sum(1 for n in kernels if folded_pair(n) is not None)
        lines.append(
            f"fusion: {ps.plain(mode or 'fused')}; {len(kernels)} kernels, each written as its ops in order"
            + (f"; {folds} batch-norms folded" if folds else "")
        )
    if step is not None:
        lines += _training_header(step)
    if predictions is not None:
        p = predictions
        worst = (
            _mib(p.worst_case_lower_bytes)
            if p.worst_case_exact
            else f"between {_mib(p.worst_case_lower_bytes)} and {_mib(p.worst_case_upper_bytes)}"
        )
        lines += [
            f"device profile: {ps.plain(p.device)}; predicted makespan {p.makespan_ms:.4f} ms (simulated)",
            "predicted activation peaks: host order " + _mib(p.host_order_peak_bytes),
            f"  worst case over all timings {worst}, simulated {_mib(p.simulated_peak_bytes)}",
            f"predicted torch.cuda.max_memory_allocated {_mib(p.max_memory_allocated_bytes)}, "
            f"reserved {_mib(p.max_memory_reserved_bytes)}",
            "  (caching-allocator replay; inputs and weights resident; op workspaces not counted)",
        ]
    if step is not None:
        lines += [
            "",
            "One call of the module is one training step: forward, loss, backward"
            + (" and the update of" if step.optimizer != "none" else ", with the gradients of"),
            "the parameters it holds"
            + (
                " (in place, with its optimizer state)."
                if step.optimizer != "none"
                else " returned (nothing is updated)."
            ),
        ]
    guard = (
        "record_stream guards tensors freed after use on another stream;"
        if schedule.record_stream
        else "a tensor used on another stream is freed after a wait (no record_stream);"
    )
    lines += [
        "",
        "With CUDA inputs each op runs on its schedule stream: events order the streams, and",
        guard,
        "on the CPU the same ops run in launch order. Copy the model's weights in with",
        "load_weights(model).",
        '"""',
    ]
    # keep the docstring within the line length: long model names or inputs are cut
    lines = [ln if len(ln) <= ps.LINE_LENGTH else ln[: ps.LINE_LENGTH - 3] + "..." for ln in lines]
    return "\n".join(ln.rstrip() for ln in lines)[3:-3]  # the text between the quotes


def _rank_header(graph: Graph, schedule: StreamSchedule) -> list[str]:
    """What a rank program's header adds: its collectives and host waits, and how it runs."""
    comm = collectives(graph)
    lines = []
    if comm:
        streams = len({schedule.streams[n.id] for n in comm})
        lines += [
            f"rank program: {len(comm)} collectives on {streams} process groups (one per stream);",
            "  run one process per rank after torch.distributed.init_process_group (torchrun)",
        ]
    if schedule.host_waits:
        lines.append(
            f"host waits: {len(schedule.host_waits)} (CUDA: the host blocks on an event; CPU: nothing)"
        )
    return lines


def _training_header(step: TrainingStep) -> list[str]:
    h = step.hyperparameters
    settings = ", ".join(f"{ps.plain(k)}={h[k]:g}" for k in sorted(h) if k != "step")
    lines = [f"training step: loss {ps.plain(step.loss_fn)}; optimizer {ps.plain(step.optimizer)}"]
    if settings:
        lines.append(f"  {settings}")
    if step.optimizer in ("adam", "adamw"):
        lines.append(
            f"  Adam's bias corrections are those of step {h.get('step', 1.0):g} (constants of the graph)"
        )
    return lines
