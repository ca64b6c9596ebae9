"""The generated class: its constructor, stream setup and the launch-ordered ``forward``.

``forward`` groups consecutive launches on one stream under one ``with _on(s):`` block; each
launch is the waits of its stream, the ``record_stream`` hand-overs, the ATen call, the event
record (when another op waits for it) and the ``del`` of what became dead (``codegen.plan``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import streamplan.codegen.pysource as ps
from streamplan.codegen.plan import LaunchPlan, LaunchStep
from streamplan.errors import UnsupportedError
from streamplan.ir.fused import folded_pair, fused_parts, is_fused
from streamplan.ir.graph import Graph, Node
from streamplan.ir.schedule import StreamSchedule
from streamplan.ir.training import TrainingStep


def class_lines(
    graph: Graph,
    schedule: StreamSchedule,
    plan: LaunchPlan,
    names: ps.Namer,
    keys: dict[str, str],
    cls: str,
    *,
    constants_embedded: bool,
    step: TrainingStep | None = None,
) -> list[str]:
    """The class ``cls``: weights from the ``WEIGHTS`` table, ``load_weights``, the streams, ``forward``
    (for a training step: the optimizer state too, and ``load_optimizer_state``)."""
    args = [names(v) for v in graph.inputs]
    ret = "torch.Tensor" if len(graph.outputs) == 1 else "tuple[torch.Tensor, ...]"
    params = ", ".join(["self", *(f"{a}: torch.Tensor" for a in args)])
    doc = f'"""{graph.name} in the launch order of its {schedule.policy} schedule."""'
    if step is not None:
        doc = (
            f'"""One training step of {graph.name} in the launch order of its {schedule.policy} schedule."""'
        )
        if len(doc) + 4 > ps.LINE_LENGTH:
            doc = f'"""One training step in the launch order of its {schedule.policy} schedule."""'
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
        *(
            [
                "        # optimizer state may start at zero: torch.optim's state before a first step",
                '        missing = [k for k in missing if not k.startswith("optimizer_state.")]',
            ]
            if step is not None and step.optimizer_state
            else []
        ),
        "        if missing:",
        '            raise KeyError(f"state_dict lacks {len(missing)} weights: {missing[0]}...")',
        "",
        *(_optimizer_state_lines() if step is not None and step.optimizer_state else []),
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
        *(["    @torch.no_grad()  # the step computes its gradients itself"] if step is not None else []),
        f"    def forward({params}) -> {ret}:"
        if len(f"    def forward({params}) -> {ret}:") <= ps.LINE_LENGTH
        else "\n".join(_long_def(args, ret)),
    ]
    lines += _forward_body(graph, plan, names, keys, args)
    return lines


def _optimizer_state_lines() -> list[str]:
    return [
        "    def load_optimizer_state(",
        "        self, optimizer: torch.optim.Optimizer, model: torch.nn.Module",
        "    ) -> None:",
        '        """Copy torch.optim\'s state of the model\'s parameters (momentum, moments)."""',
        "        names = {id(p): n for n, p in model.named_parameters()}",
        "        state = {}",
        "        for param, slots in optimizer.state.items():",
        "            for slot, tensor in slots.items():",
        '                if slot != "step" and id(param) in names:',
        '                    state[f"optimizer_state.{names[id(param)]}.{slot}"] = tensor',
        "        self.tensors.load_state_dict(state, strict=False)",
        "",
    ]


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
        if v in FOLDED:
            return FOLDED[v]
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
    if is_fused(node):
        lines += _fused_lines(node, step, names, ref, indent)
    else:
        live = [y for y in node.outputs if y not in step.frees]
        lines += _bind_lines(node, _call_expr(node, ref), live, names, indent)
    if step.records_event:
        lines.append(f"{pad}{_event_name(names, node.id)} = _event(s{step.stream})")
    dead = [names(x) for x in step.frees if x not in node.outputs]  # dead outputs were never bound
    if is_fused(node):  # the values passed between its parts go with the kernel
        dead = [*_fused_locals(node, step, names), *dead]
    lines += _del_lines(dead, pad)
    return lines


def _bind_lines(
    node: Node, call: ps.Expr, live_outputs: list[str], names: ps.Namer, indent: int
) -> list[str]:
    """``call`` as a statement binding the node's ``live_outputs`` (the others are never bound)."""
    pad = ps.INDENT * indent
    lines: list[str] = []
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
        if len(node.outputs) > 1:
            raise UnsupportedError(
                f"op {node.op} has {len(node.outputs)} outputs but no output_index", where=node.id
            )
        lines += ps.statement(call, indent=indent, target=names(node.outputs[0]))
    else:
        lines += ps.statement(call, indent=indent)
    return lines


def _part_live(node: Node, step: LaunchStep) -> dict[str, set[str]]:
    """For each part of a fused kernel, its outputs that are bound: read by a later part, or an
    output of the kernel read after it. A folded batch-norm's output is the convolution's."""
    parts = fused_parts(node)
    fold = folded_pair(node)
    read = {v for p in parts for v in p.inputs}
    kept = {y for y in node.outputs if y not in step.frees}
    live: dict[str, set[str]] = {}
    for p in parts:
        if fold is not None and p.id == fold[1]:
            continue
        outs = (
            next(q for q in parts if q.id == fold[1]).outputs[:1] if fold and p.id == fold[0] else p.outputs
        )
        live[p.id] = {y for y in outs if y in kept or y in read}
    return live


def _fused_locals(node: Node, step: LaunchStep, names: ps.Namer) -> list[str]:
    """The names a fused kernel binds that are not read after it (deleted after it)."""
    kept = {y for y in node.outputs if y not in step.frees}
    live = _part_live(node, step)
    bound = [y for p in fused_parts(node) for y in sorted(live.get(p.id, ())) if y not in kept]
    return [names(y) for y in dict.fromkeys(bound)]


def _fused_lines(node: Node, step: LaunchStep, names: ps.Namer, ref, indent: int) -> list[str]:
    """A fused kernel as its parts' calls in order; a folded batch-norm is not run: the
    convolution is called with the folded weight and bias instead (as the runtime does)."""
    parts = fused_parts(node)
    fold = folded_pair(node)
    by_id = {p.id: p for p in parts}
    live = _part_live(node, step)
    comment = f"{ps.INDENT * indent}# fused kernel {node.id}: {len(parts)} ops"
    if len(comment) > ps.LINE_LENGTH:  # a long chain of ops names the kernel
        comment = f"{ps.INDENT * indent}# fused kernel of {len(parts)} ops"
    lines: list[str] = [comment]
    for p in parts:
        if fold is not None and p.id == fold[1]:
            continue  # the convolution already gives the normalised result
        if fold is not None and p.id == fold[0]:
            bn = by_id[fold[1]]
            lines += _fold_lines(p, bn, ref, indent)
            conv = _folded_conv(p)
            target = Node(p.id, p.op, p.inputs, bn.outputs[:1], {})
            lines += _bind_lines(target, _call_expr(conv, ref), sorted(live[p.id]), names, indent)
            lines.append(f"{ps.INDENT * indent}del _folded_weight, _folded_bias")
        else:
            lines += _bind_lines(p, _call_expr(p, ref), sorted(live[p.id]), names, indent)
    return lines


_BN_ARGS = ("input", "weight", "bias", "running_mean", "running_var", "training", "momentum", "eps")


def _fold_lines(conv: Node, bn: Node, ref, indent: int) -> list[str]:
    """``_folded_weight, _folded_bias = _fold_batch_norm(...)``: ``w * g / sqrt(v + eps)`` and its bias."""
    bound = dict(zip(_BN_ARGS[1:], list(bn.attrs.get("args", []))[1:], strict=False))
    bound.update(bn.attrs.get("kwargs", {}))
    args = list(conv.attrs.get("args", []))
    conv_bias = conv.attrs.get("kwargs", {}).get("bias", args[2] if len(args) > 2 else None)

    def arg(a: Any) -> ps.Expr:
        return _arg_expr(a, ref, bn)

    call = ps.Call(
        "_fold_batch_norm",
        (
            arg(args[1]),
            arg(conv_bias),
            arg(bound["running_mean"]),
            arg(bound["running_var"]),
            arg(bound.get("weight")),
            arg(bound.get("bias")),
            ps.literal(float(bound.get("eps", 1e-5))),
        ),
    )
    return ps.statement(call, indent=indent, target="_folded_weight, _folded_bias")


def _folded_conv(conv: Node) -> Node:
    """The convolution part reading ``_folded_weight`` and ``_folded_bias``."""
    args = list(conv.attrs.get("args", []))
    kwargs = dict(conv.attrs.get("kwargs", {}))
    new_args = [args[0], {"$v": "\0folded weight"}, *args[2:]]
    if "bias" in kwargs:
        kwargs["bias"] = {"$v": "\0folded bias"}
    elif len(new_args) > 2:
        new_args[2] = {"$v": "\0folded bias"}
    else:  # conv2d(input, weight) with the defaults after it
        new_args.append({"$v": "\0folded bias"})
    return Node(
        conv.id, conv.op, conv.inputs, conv.outputs, {**conv.attrs, "args": new_args, "kwargs": kwargs}
    )


# what a folded convolution reads instead of its weight and bias (names no value takes)
FOLDED = {"\0folded weight": "_folded_weight", "\0folded bias": "_folded_bias"}
FOLD_HELPER = '''
def _fold_batch_norm(
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    mean: torch.Tensor,
    var: torch.Tensor,
    gamma: torch.Tensor | None,
    beta: torch.Tensor | None,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A convolution's weight and bias with the batch-norm after it folded in."""
    scale = torch.rsqrt(var + eps)
    if gamma is not None:
        scale = scale * gamma
    shift = -mean * scale
    if beta is not None:
        shift = shift + beta
    folded = weight * scale.reshape(-1, *([1] * (weight.dim() - 1)))
    return folded, shift if bias is None else bias * scale + shift
'''


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
        if "$float" in a:
            return ps.Atom(f"float({a['$float']!r})")
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
        tensor = torch.zeros(shape, dtype=getattr(torch, dtype))
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
