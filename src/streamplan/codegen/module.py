"""Write a scheduled graph as a self-contained PyTorch module (the ``codegen`` command).

The module imports torch only. It defines an ``nn.Module`` whose ``forward`` calls
the graph's ATen ops in the schedule's launch order. With CUDA inputs every op runs
under ``torch.cuda.stream`` of its schedule stream, with the waits, events,
``record_stream`` calls and frees of ``codegen.plan``; on the CPU the streams are
``None``, the stream helpers do nothing, and the same ops run in launch order. The
weights live in a child module ``tensors`` under their names in the original model's
``state_dict``, so ``load_weights(model)`` fills them.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass
from typing import Any

import streamplan.codegen.pysource as ps
from streamplan.codegen.forward import FOLD_HELPER, FOLDED, HELPERS, class_lines
from streamplan.codegen.plan import launch_plan
from streamplan.errors import ModelSpecError
from streamplan.ir.fused import folded_pair, fused_parts, is_fused
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.ir.training import TrainingStep, training_step

MIB = 1 << 20
# names of the generated code that values must not take
RESERVED = {
    "torch", "aten", "contextlib", "self", "w", "device", "caller", "_r", "WEIGHTS", "CONSTANTS", "PREDICTIONS",
    "OUTPUTS", *FOLDED.values(),
}  # fmt: skip
# where a training step's optimizer state lives among the module's tensors
STATE_PREFIX = "optimizer_state"
# attributes every nn.Module has: a weight path may not reuse them
_MODULE_ATTRS = {
    "training", "forward", "state_dict", "parameters", "buffers", "modules", "children", "to",
    "cuda", "cpu", "eval", "train", "type", "float", "double", "half", "apply", "zero_grad",
}  # fmt: skip


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


def default_class_name(graph: Graph, schedule: StreamSchedule) -> str:
    step = training_step(graph)
    if step is None:
        return ps.class_name(graph.name, schedule.policy)
    words = ("train",) if step.optimizer == "none" else ("train", step.optimizer)
    return ps.class_name(graph.name, schedule.policy, *words)


def generate_module(
    graph: Graph,
    schedule: StreamSchedule,
    *,
    model: str | None = None,
    predictions: Predictions | None = None,
    class_name: str | None = None,
) -> str:
    """The source of a torch-only module running ``schedule`` (byte-stable for the same input).

    For a training step the module's ``forward`` is the whole step (see ``docs/codegen.md``):
    it takes the inputs and targets, updates the parameters, buffers and optimizer state it
    holds in place, and returns the loss and the gradients (no optimizer) or the updated
    parameters; ``OUTPUTS`` names what it returns. A fused kernel is written as its parts'
    ATen calls in order (a folded batch-norm as the convolution with the folded weight).
    """
    step = training_step(graph)
    plan = launch_plan(graph, schedule)
    names = ps.Namer(RESERVED | {f"s{s}" for s in plan.streams})
    for v in graph.inputs:
        names(v)
    weights = _weight_table(graph, step)
    cls = class_name or default_class_name(graph, schedule)
    if not cls.isidentifier() or keyword.iskeyword(cls) or cls in RESERVED:
        raise ModelSpecError(f"{cls!r} cannot name a Python class", hint="use an identifier, e.g. MyModel")
    lines = _header(graph, schedule, model, predictions, step)
    lines += ["", "import contextlib", "", "import torch", ""]
    if any(n.op.startswith("aten.") for m in graph.nodes for n in (fused_parts(m) or (m,))):
        lines += ["aten = torch.ops.aten"]
    if predictions is not None:
        items = [(ps.Atom(ps.py_str(k)), ps.literal(v)) for k, v in predictions.to_dict().items()]
        lines += ["", *_dict_display("PREDICTIONS", items)]
    if step is not None:
        lines += ["", "# what forward returns, in order"]
        lines += ps.exploded(
            "(", [ps.literal(o) for o in _output_names(graph, step)], indent=0, prefix="OUTPUTS = "
        )
    lines += [
        "",
        "# name in the model's state_dict, shape, dtype, kind (param, buffer, constant or state)",
    ]
    lines += ps.exploded(
        "(",
        [
            ps.literal((key, graph.values[v].shape, graph.values[v].dtype, _kind(v, step, graph)))
            for v, key in weights
        ],
        indent=0,
        prefix="WEIGHTS = ",
    )
    constants = _constants(graph, weights)
    if constants:
        lines += [
            "",
            *_dict_display("CONSTANTS", [(ps.Atom(ps.py_str(k)), ps.literal(c)) for k, c in constants]),
        ]
    lines += ["", "", *HELPERS.strip("\n").splitlines(), "", ""]
    if any(folded_pair(n) is not None for n in graph.nodes if is_fused(n)):
        lines += [*FOLD_HELPER.strip("\n").splitlines(), "", ""]
    lines += class_lines(
        graph, schedule, plan, names, dict(weights), cls, constants_embedded=bool(constants), step=step
    )
    return "\n".join(lines) + "\n"


def _dict_display(name: str, items: list[tuple[ps.Expr, ps.Expr]]) -> list[str]:
    lines = [f"{name} = {{"]
    for k, v in items:
        lines += ps.layout(v, indent=1, prefix=f"{ps.flat(k)}: ", suffix=",")
    return lines + ["}"]


# -- the header -----------------------------------------------------------------


def _mib(b: int) -> str:
    return f"{b / MIB:.3f} MiB"


def _header(
    graph: Graph,
    schedule: StreamSchedule,
    model: str | None,
    predictions: Predictions | None,
    step: TrainingStep | None,
) -> list[str]:
    waits = schedule.num_waits
    lines = [
        f'"""{graph.name} under the {schedule.policy} schedule, as plain PyTorch (made by streamplan codegen).',
        "",
        f"model: {model or graph.name}; {len(graph.nodes)} ops, inputs "
        + ", ".join(f"{v} {list(graph.values[v].shape)} {graph.values[v].dtype}" for v in graph.inputs[:4])
        + (" ..." if len(graph.inputs) > 4 else ""),
        f"policy: {schedule.policy}; {schedule.num_streams} streams, {schedule.num_events} events, "
        f"{waits} cross-stream waits",
    ]
    kernels = [n for n in graph.nodes if is_fused(n)]
    mode = None if schedule.fusion is None else schedule.fusion.mode.value
    if kernels or mode:
        folds = sum(1 for n in kernels if folded_pair(n) is not None)
        lines.append(
            f"fusion: {mode or 'fused'}; {len(kernels)} kernels, each written as its ops in order"
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
            f"device profile: {p.device}; predicted makespan {p.makespan_ms:.4f} ms (simulated)",
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
    lines += [
        "",
        "With CUDA inputs each op runs on its schedule stream (events order the streams,",
        "record_stream guards tensors freed after use on another stream); on the CPU the same",
        "ops run in launch order. Copy the model's weights in with load_weights(model).",
        '"""',
    ]
    # keep the docstring within the line length: long model names or inputs are cut
    return [ln if len(ln) <= ps.LINE_LENGTH else ln[: ps.LINE_LENGTH - 3] + "..." for ln in lines]


# -- weights ----------------------------------------------------------------------


def _training_header(step: TrainingStep) -> list[str]:
    h = step.hyperparameters
    settings = ", ".join(f"{k}={h[k]:g}" for k in sorted(h) if k != "step")
    lines = [f"training step: loss {step.loss_fn}; optimizer {step.optimizer}"]
    if settings:
        lines.append(f"  {settings}")
    if step.optimizer == "adam":
        lines.append(
            f"  Adam's bias corrections are those of step {h.get('step', 1.0):g} (constants of the graph)"
        )
    return lines


def _output_names(graph: Graph, step: TrainingStep) -> list[str]:
    """``loss``, then the state_dict name of each parameter whose gradient (or updated value) follows."""
    of_value = {g: p for p, g in step.gradients.items()} | {u: p for p, u in step.updates.items()}
    names = []
    for v in graph.outputs:
        if v == step.loss:
            names.append("loss")
        else:
            p = of_value.get(v)
            names.append(graph.param_names.get(p, p) if p is not None else v)
    return names


def _kind(v: str, step: TrainingStep | None, graph: Graph) -> str:
    return "state" if step is not None and v in step.optimizer_state else graph.values[v].kind


def _weight_table(graph: Graph, step: TrainingStep | None = None) -> list[tuple[str, str]]:
    """(value id, module path) of every param/buffer/constant the graph reads, in graph order;
    a training step's optimizer state goes under ``optimizer_state.<parameter>.<slot>``."""
    used: dict[str, None] = {}
    for n in graph.nodes:
        for v in n.inputs:
            if graph.producer(v) is None and graph.values[v].kind in ("param", "buffer", "constant"):
                used[v] = None
    for v in graph.outputs:
        if graph.producer(v) is None and graph.values[v].kind in ("param", "buffer", "constant"):
            used[v] = None
    taken: set[str] = set()
    out = []
    rank = {v: i for i, v in enumerate(graph.params)}
    state = step.optimizer_state if step is not None else {}
    for v in sorted(used, key=lambda v: (rank.get(v, len(rank)), v)):
        if v in state:
            param, slot = state[v]
            key = _module_path(f"{STATE_PREFIX}.{graph.param_names.get(param, param)}.{slot}")
        else:
            key = _module_path(graph.param_names.get(v, v))
        while key in taken or any(t.startswith(key + ".") or key.startswith(t + ".") for t in taken):
            key += "_"
        taken.add(key)
        out.append((v, key))
    return out


def _module_path(key: str) -> str:
    parts = [p if p and p not in _MODULE_ATTRS and not p.startswith("_") else f"t{p}" for p in key.split(".")]
    return ".".join(parts)


def _constants(graph: Graph, weights: list[tuple[str, str]]) -> list[tuple[str, Any]]:
    known = graph.meta.get("constant_values", {}) or {}
    return [(key, known[v]) for v, key in weights if graph.values[v].kind == "constant" and v in known]
