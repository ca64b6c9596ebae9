"""Write a scheduled graph as a self-contained PyTorch module (the ``codegen`` command).

The module imports torch only. It defines an ``nn.Module`` whose ``forward`` calls
the graph's ATen ops in the schedule's launch order. With CUDA inputs every op runs
under ``torch.cuda.stream`` of its schedule stream, with the waits, events,
``record_stream`` calls and frees of ``codegen.plan``; on the CPU the streams are
``None`` (``torch.cuda.stream(None)`` does nothing) and the same ops run in launch
order. The weights live in a child module ``tensors`` under their names in the
original model's ``state_dict``, so ``load_weights(model.state_dict())`` fills them.
"""

from __future__ import annotations

import keyword
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import streamplan.codegen.pysource as ps
from streamplan.codegen.plan import LaunchPlan, LaunchStep, launch_plan
from streamplan.errors import ModelSpecError, UnsupportedError
from streamplan.ir.graph import Graph, Node
from streamplan.ir.schedule import StreamSchedule

MIB = 1 << 20
# names of the generated code that values must not take
RESERVED = {"torch", "aten", "self", "w", "device", "caller", "_r", "WEIGHTS", "CONSTANTS", "PREDICTIONS"}
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
    return ps.class_name(graph.name, schedule.policy)


def generate_module(
    graph: Graph,
    schedule: StreamSchedule,
    *,
    model: str | None = None,
    predictions: Predictions | None = None,
    class_name: str | None = None,
) -> str:
    """The source of a torch-only module running ``schedule`` (byte-stable for the same input)."""
    plan = launch_plan(graph, schedule)
    names = ps.Namer(RESERVED | {f"s{s}" for s in plan.streams})
    for v in graph.inputs:
        names(v)
    weights = _weight_table(graph)
    cls = class_name or default_class_name(graph, schedule)
    if not cls.isidentifier() or keyword.iskeyword(cls) or cls in RESERVED:
        raise ModelSpecError(f"{cls!r} cannot name a Python class", hint="use an identifier, e.g. MyModel")
    lines = _header(graph, schedule, model, predictions)
    lines += ["", "import contextlib", "", "import torch", ""]
    if any(n.op.startswith("aten.") for n in graph.nodes):
        lines += ["aten = torch.ops.aten"]
    if predictions is not None:
        items = [
            (ps.Atom(ps.py_str(k)), ps.literal(v if not isinstance(v, bool) else v))
            for k, v in predictions.to_dict().items()
        ]
        lines += ["", *_dict_display("PREDICTIONS", items)]
    lines += ["", "# name in the model's state_dict, shape, dtype, kind (param, buffer or constant)"]
    lines += ps.exploded(
        "(",
        [
            ps.literal((key, graph.values[v].shape, graph.values[v].dtype, graph.values[v].kind))
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
    lines += _class(graph, schedule, plan, names, dict(weights), cls, constants_embedded=bool(constants))
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
    graph: Graph, schedule: StreamSchedule, model: str | None, predictions: Predictions | None
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


def _weight_table(graph: Graph) -> list[tuple[str, str]]:
    """(value id, module path) of every param/buffer/constant the graph reads, in graph order."""
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
    for v in sorted(used, key=lambda v: (rank.get(v, len(rank)), v)):
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


# -- the class ----------------------------------------------------------------------


def _class(
    graph: Graph,
    schedule: StreamSchedule,
    plan: LaunchPlan,
    names: ps.Namer,
    keys: dict[str, str],
    cls: str,
    *,
    constants_embedded: bool,
) -> list[str]:
    args = [names(v) for v in graph.inputs]
    ret = "torch.Tensor" if len(graph.outputs) == 1 else "tuple[torch.Tensor, ...]"
    params = ", ".join(["self", *(f"{a}: torch.Tensor" for a in args)])
    doc = f'"""{graph.name} in the launch order of its {schedule.policy} schedule."""'
    lines = [
        f"class {cls}(torch.nn.Module):",
        f"    {doc}",
        "",
        "    def __init__(self) -> None:",
        "        super().__init__()",
        "        # None: use streams when the inputs are on a CUDA device",
        "        self.use_streams: bool | None = None",
        "        self._streams: dict[torch.device, tuple[torch.cuda.Stream, ...]] = {}",
        "        self.tensors = _weights_module(WEIGHTS, "
        + ("CONSTANTS" if constants_embedded else "{}")
        + ")",
        "",
        "    def load_weights(self, model: torch.nn.Module | dict[str, torch.Tensor]) -> None:",
        '        """Copy the weights the graph reads from the model (or a state_dict)."""',
        "        if isinstance(model, torch.nn.Module):  # buffers left out of state_dict too",
        "            model = {**dict(model.named_buffers()), **model.state_dict()}",
        "        missing = self.tensors.load_state_dict(model, strict=False).missing_keys",
        "        if missing:",
        '            raise KeyError(f"state_dict lacks {len(missing)} weights: {missing[0]}...")',
        "",
        "    def _fork(self, device: torch.device, count: int) -> tuple:",
        '        """The caller\'s stream and `count` side streams that wait for it (or None)."""',
        '        use = device.type == "cuda" if self.use_streams is None else self.use_streams',
        "        if not use:",
        "            return None, (None,) * count",
        "        caller = torch.cuda.current_stream()",
        "        streams = self._streams.get(device)",
        "        if streams is None:",
        "            streams = tuple(torch.cuda.Stream() for _ in range(count))",
        "            self._streams[device] = streams",
        "        for stream in streams:",
        "            stream.wait_stream(caller)",
        "        return caller, streams",
        "",
        f"    def forward({params}) -> {ret}:"
        if len(f"    def forward({params}) -> {ret}:") <= ps.LINE_LENGTH
        else "\n".join(_long_def(args, ret)),
    ]
    lines += _forward_body(graph, plan, names, keys, args)
    return lines


def _long_def(args: list[str], ret: str) -> list[str]:
    return [
        "    def forward(",
        "        self,",
        *(f"        {a}: torch.Tensor," for a in args),
        f"    ) -> {ret}:",
    ]


def _device_expr(graph: Graph, args: list[str], keys: dict[str, str]) -> str:
    if args:
        return f"{args[0]}.device"
    if keys:
        return f"w[{ps.py_str(next(iter(keys.values())))}].device"
    return 'torch.device("cpu")'


def _forward_body(
    graph: Graph, plan: LaunchPlan, names: ps.Namer, keys: dict[str, str], args: list[str]
) -> list[str]:
    body: list[str] = []
    ind = 2
    if keys:
        body.append("        w = _weights(self.tensors)")
    device = _device_expr(graph, args, keys)
    if any("$device" in str(n.attrs.get("args", "")) + str(n.attrs.get("kwargs", "")) for n in graph.nodes):
        body.append(f"        device = {device}")
        device = "device"
    streams = [f"s{s}" for s in plan.streams]
    unpack = f"({streams[0]},)" if len(streams) == 1 else f"({', '.join(streams)})"
    body.append(f"        caller, {unpack} = self._fork({device}, {len(streams)})")

    def ref(v: str) -> str:
        if v in keys:
            return f"w[{ps.py_str(keys[v])}]"
        return names(v)

    i = 0
    steps = plan.steps
    while i < len(steps):
        j = i
        while j < len(steps) and steps[j].stream == steps[i].stream:
            j += 1
        span = f"launch {i}" if j == i + 1 else f"launches {i}-{j - 1}"
        body.append(f"        # {span} on stream {steps[i].stream}")
        body.append(f"        with _on(s{steps[i].stream}):")
        for step in steps[i:j]:
            body += _step_lines(graph, graph.node(step.op), step, names, ref, ind + 1)
        i = j
    body.append(f"        _join(caller, ({', '.join(streams)}{',' if len(streams) == 1 else ''}))")
    for v in plan.outputs_to_caller:
        body.append(f"        _hand_over({ref(v)}, caller)")
    body += _return_lines([ref(v) for v in graph.outputs], ind)
    return body


def _return_lines(outs: list[str], indent: int) -> list[str]:
    if len(outs) == 1:
        return ps.layout(ps.Atom(outs[0]), indent=indent, prefix="return ")
    return ps.layout(ps.Seq("(", tuple(ps.Atom(o) for o in outs)), indent=indent, prefix="return ")


def _step_lines(graph: Graph, node: Node, step: LaunchStep, names: ps.Namer, ref, indent: int) -> list[str]:
    pad = ps.INDENT * indent
    lines = [f"{pad}_wait(s{step.stream}, {_event_name(names, u)})" for u in step.waits_for]
    lines += [f"{pad}_hand_over({ref(x)}, s{step.stream})" for x in step.record_on_stream]
    call = _call_expr(node, ref)
    live_outputs = [y for y in node.outputs if y not in step.frees]
    if "output_index" in node.attrs:
        index = node.attrs["output_index"]
        index = index if isinstance(index, list) else [index]
        if live_outputs:
            lines += ps.statement(call, indent=indent, target="_r")
            for y, k in zip(node.outputs, index, strict=True):
                if y in live_outputs:
                    lines.append(f"{pad}{names(y)} = _r[{k}]")
            lines.append(f"{pad}del _r")
        else:
            lines += ps.statement(call, indent=indent)
    elif live_outputs:
        targets = ", ".join(names(y) for y in node.outputs)
        if len(node.outputs) > 1:
            raise UnsupportedError(
                f"op {node.op} has {len(node.outputs)} outputs but no output_index", where=node.id
            )
        lines += ps.statement(call, indent=indent, target=targets)
    else:
        lines += ps.statement(call, indent=indent)
    if step.records_event:
        lines.append(f"{pad}{_event_name(names, node.id)} = _event(s{step.stream})")
    dead = [names(x) for x in step.frees if x not in node.outputs]  # dead outputs were never bound
    lines += _del_lines(dead, pad)
    return lines


def _event_name(names: ps.Namer, op: str) -> str:
    return names("\0event " + op, base=f"event_{op}")


def _del_lines(dead: Sequence[str], pad: str) -> list[str]:
    lines: list[str] = []
    current: list[str] = []
    for name in dead:
        if current and len(f"{pad}del {', '.join([*current, name])}") > ps.LINE_LENGTH:
            lines.append(f"{pad}del {', '.join(current)}")
            current = []
        current.append(name)
    if current:
        lines.append(f"{pad}del {', '.join(current)}")
    return lines


def _call_expr(node: Node, ref) -> ps.Expr:
    args = [_arg_expr(a, ref, node) for a in node.attrs.get("args", [])]
    kwargs = [ps.Keyword(k, _arg_expr(v, ref, node)) for k, v in node.attrs.get("kwargs", {}).items()]
    if node.op in ("getitem", "operator.getitem", "_operator.getitem"):
        if len(args) != 2 or kwargs:
            raise UnsupportedError(f"getitem with {len(args)} arguments", where=node.id)
        return ps.Atom(f"{ps.flat(args[0])}[{ps.flat(args[1])}]")
    parts = node.op.split(".")
    if len(parts) == 2:
        parts.append("default")
    if len(parts) != 3:
        raise UnsupportedError(f"cannot write op {node.op!r} as a torch call", where=node.id)
    func = ("aten." if parts[0] == "aten" else f"torch.ops.{parts[0]}.") + ".".join(parts[1:])
    return ps.Call(func, tuple(args) + tuple(kwargs))


def _arg_expr(a: Any, ref, node: Node) -> ps.Expr:
    if isinstance(a, list):
        return ps.Seq("[", tuple(_arg_expr(x, ref, node) for x in a))
    if isinstance(a, dict):
        if "$v" in a:
            return ps.Atom(ref(a["$v"]))
        if "$dtype" in a:
            return ps.Atom(f"torch.{a['$dtype']}")
        if "$device" in a:
            return ps.Atom("device")
        if "$layout" in a:
            return ps.Atom(f"torch.{a['$layout']}")
        if "$memory_format" in a:
            return ps.Atom(f"torch.{a['$memory_format']}")
        raise UnsupportedError(
            f"op {node.op} takes a mapping argument, which cannot be written", where=node.id
        )
    try:
        return ps.literal(a)
    except TypeError:
        raise UnsupportedError(
            f"op {node.op} takes an argument of type {type(a).__name__}", where=node.id
        ) from None


HELPERS = '''
def _weights_module(table: tuple, constants: dict) -> torch.nn.Module:
    """Each weight under its state_dict name, in modules nested as in the model."""
    root = torch.nn.Module()
    for key, shape, dtype, kind in table:
        *path, name = key.split(".")
        owner = root
        for part in path:
            if part not in owner._modules:
                owner.add_module(part, torch.nn.Module())
            owner = owner._modules[part]
        tensor = torch.empty(shape, dtype=getattr(torch, dtype))
        if key in constants:
            tensor = torch.tensor(constants[key], dtype=tensor.dtype).reshape(shape)
        if kind == "param":
            owner.register_parameter(name, torch.nn.Parameter(tensor))
        else:
            owner.register_buffer(name, tensor, persistent=key not in constants)
    return root


def _weights(tensors: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every weight by its state_dict name."""
    found = dict(tensors.named_parameters())
    found.update(tensors.named_buffers())
    return found


def _on(stream: torch.cuda.Stream | None) -> contextlib.AbstractContextManager:
    """Launch on `stream` inside the block (CPU: in order, on the host)."""
    return contextlib.nullcontext() if stream is None else torch.cuda.stream(stream)


def _event(stream: torch.cuda.Stream | None) -> torch.cuda.Event | None:
    """An event recorded on `stream` after the work launched on it so far."""
    if stream is None:
        return None
    event = torch.cuda.Event()
    event.record(stream)
    return event


def _wait(stream: torch.cuda.Stream | None, event: torch.cuda.Event | None) -> None:
    """Make `stream` wait for `event` before what is launched on it next."""
    if stream is not None:
        stream.wait_event(event)


def _hand_over(tensor: torch.Tensor, stream: torch.cuda.Stream | None) -> None:
    """Tell the caching allocator `tensor` is used on `stream`: its block is not reused
    until that stream's work queued by the time it is freed is done."""
    if stream is not None:
        tensor.record_stream(stream)


def _join(caller: torch.cuda.Stream | None, streams: tuple) -> None:
    """Make the caller's stream wait for everything launched on the side streams."""
    if caller is not None:
        for stream in streams:
            caller.wait_stream(stream)
'''
