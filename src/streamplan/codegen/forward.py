"""The generated class: its constructor, stream setup and the launch-ordered ``forward``, as ``ast``.

``forward`` groups consecutive launches on one stream under one ``with _on(s):`` block; each
launch is the host's waits, the waits of its stream, the ``record_stream`` hand-overs, the ATen
call (or, in a rank program, the collective on its stream's process group), the event record
(when another op or the host waits for it) and the ``del`` of what became dead (``codegen.plan``).

Everything the graph says reaches the code through ``pyast``: value, event and stream names
come from the ``Namer``; a keyword argument's name, a literal, a dtype or an op that cannot
be written raises ``GraphError`` naming the node and the field it was read from.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import streamplan.codegen.pysource as ps
import streamplan.codegen.templates as templates
from streamplan.codegen.plan import LaunchPlan, LaunchStep
from streamplan.codegen.pyast import (
    MAX_DEPTH,
    Unwritable,
    attr,
    call,
    keyword_arg,
    literal,
    name,
    op_function,
    store,
    subscript,
    torch_constant,
)
from streamplan.codegen.render import Fixed, Stmt
from streamplan.errors import GraphError, UnsupportedError
from streamplan.frontends.argcodec import NONFINITE, TORCH_CONSTANTS
from streamplan.ir.collectives import collective_kind, is_collective
from streamplan.ir.fused import folded_pair, fused_parts, is_fused
from streamplan.ir.graph import Graph, Node
from streamplan.ir.opname import PYTHON_OPS
from streamplan.ir.training import TrainingStep

Ref = Callable[[str], ast.expr]  # a value id -> the expression that reads it in forward


@contextlib.contextmanager
def reading(graph: Graph, subject: str, field: str) -> Iterator[None]:
    """Turn ``Unwritable`` into a user error naming the node (or value) and the field being written."""
    try:
        yield
    except Unwritable as e:
        raise GraphError(
            f"{subject}: {field}: {e}",
            where=graph.name,
            hint="codegen writes only identifiers, plain literals and torch's own dtypes and ops; "
            "was the graph file edited by hand?",
        ) from None


def class_stmt(
    graph: Graph,
    plan: LaunchPlan,
    names: ps.Namer,
    keys: dict[str, str],
    cls: str,
    doc: str,
    *,
    constants_embedded: bool,
    renamed: bool = False,
    step: TrainingStep | None = None,
    sharded: bool = False,
) -> Stmt:
    """The class ``cls``: weights from the ``WEIGHTS`` table, ``load_weights``, the streams, ``forward``
    (for a training step: the optimizer state too, and ``load_optimizer_state``; for an FSDP rank
    both cut this rank's shards from whole tensors: ``sharded``)."""
    state = step is not None and bool(step.optimizer_state)
    body: list[Stmt | Fixed] = [
        Stmt(ast.Expr(ast.Constant(doc))),
        Fixed(
            templates.init(
                constants_embedded=constants_embedded,
                process_groups=bool(plan.communication_streams),
            ),
            before=("",),
        ),
        Fixed(templates.load_weights(optimizer_state=state, renamed=renamed, sharded=sharded), before=("",)),
    ]
    if state:
        body.append(Fixed(templates.load_optimizer_state(renamed=renamed, sharded=sharded), before=("",)))
    body.append(Fixed(templates.FORK, before=("",)))
    body.append(_forward(graph, plan, names, keys, step))
    node = ast.ClassDef(
        name=cls, bases=[attr("torch", "nn", "Module")], keywords=[], body=[], decorator_list=[]
    )
    return Stmt(node, before=("", ""), body=tuple(body))


def _forward(
    graph: Graph, plan: LaunchPlan, names: ps.Namer, keys: dict[str, str], step: TrainingStep | None
) -> Stmt:
    args = [ast.arg(arg="self")] + [
        ast.arg(arg=names(v), annotation=attr("torch", "Tensor")) for v in graph.inputs
    ]
    tensor = attr("torch", "Tensor")
    ret = (
        tensor
        if len(graph.outputs) == 1
        else subscript(name("tuple"), ast.Tuple([tensor, ast.Constant(...)], ast.Load()))
    )
    decorators = [call("torch.no_grad")] if step is not None else []
    node = ast.FunctionDef(
        name="forward",
        args=ast.arguments(posonlyargs=[], args=args, kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=[],
        decorator_list=decorators,
        returns=ret,
    )
    comment = "the step computes its gradients itself" if step is not None else None
    return Stmt(node, before=("",), body=tuple(_forward_body(graph, plan, names, keys)), comment=comment)


def _device_expr(graph: Graph, names: ps.Namer, keys: dict[str, str]) -> ast.expr:
    if graph.inputs:
        return attr(name(names(graph.inputs[0])), "device")
    if keys:
        return attr(subscript(name("w"), ast.Constant(next(iter(keys.values())))), "device")
    return call("torch.device", [ast.Constant("cpu")])


def _assign(target: str | ast.expr, value: ast.expr, **layout: Any) -> Stmt:
    t = store(target) if isinstance(target, str) else target
    return Stmt(ast.Assign(targets=[t], value=value), **layout)


def _expr(value: ast.expr, **layout: Any) -> Stmt:
    return Stmt(ast.Expr(value), **layout)


def _store_tuple(*items: str | ast.expr) -> ast.Tuple:
    return ast.Tuple([store(i) if isinstance(i, str) else i for i in items], ast.Store())


def _forward_body(graph: Graph, plan: LaunchPlan, names: ps.Namer, keys: dict[str, str]) -> list[Stmt]:
    body: list[Stmt] = []
    if keys:
        body.append(_assign("w", call("_weights", [attr("self", "tensors")])))
    device = _device_expr(graph, names, keys)
    ops = [p for n in graph.nodes for p in (fused_parts(n) or (n,))]  # a kernel's parts hold the arguments
    if any(_mentions_device(p.attrs.get("args")) or _mentions_device(p.attrs.get("kwargs")) for p in ops):
        body.append(_assign("device", device))
        device = name("device")
    streams = [f"s{s}" for s in plan.streams]
    fork = call(attr("self", "_fork"), [device, ast.Constant(len(streams))])
    body.append(_assign(_store_tuple("caller", _store_tuple(*streams)), fork))

    def ref(v: str) -> ast.expr:
        if v in keys:
            return subscript(name("w"), ast.Constant(keys[v]))
        return name(names(v))

    i = 0
    steps = plan.steps
    while i < len(steps):
        j = i
        while j < len(steps) and steps[j].stream == steps[i].stream:
            j += 1
        span = f"launch {i}" if j == i + 1 else f"launches {i}-{j - 1}"
        block: list[Stmt] = []
        for step in steps[i:j]:
            block += _step_stmts(graph, graph.node(step.op), step, names, ref, plan.communication_streams)
        on = ast.With(items=[ast.withitem(call("_on", [name(f"s{steps[i].stream}")]))], body=[])
        body.append(Stmt(on, before=(f"{span} on stream {steps[i].stream}",), body=tuple(block)))
        i = j
    body.append(_expr(call("_join", [name("caller"), ast.Tuple([name(s) for s in streams], ast.Load())])))
    for v in plan.outputs_to_caller:
        body.append(_expr(call("_hand_over", [ref(v), name("caller")])))
    outs = [ref(v) for v in graph.outputs]
    body.append(Stmt(ast.Return(outs[0] if len(outs) == 1 else ast.Tuple(outs, ast.Load()))))
    return body


def _mentions_device(a: Any) -> bool:
    if isinstance(a, dict):
        return "$device" in a or any(_mentions_device(v) for v in a.values())
    return isinstance(a, list) and any(_mentions_device(v) for v in a)


def _step_stmts(
    graph: Graph,
    node: Node,
    step: LaunchStep,
    names: ps.Namer,
    ref: Ref,
    comm_streams: tuple[int, ...] = (),
) -> list[Stmt]:
    stream = name(f"s{step.stream}")
    out = [_expr(call("_host_wait", [name(_event_name(names, u))])) for u in step.host_waits_for]
    out += [_expr(call("_wait", [stream, name(_event_name(names, u))])) for u in step.waits_for]
    out += [_expr(call("_hand_over", [ref(x), stream])) for x in step.record_on_stream]
    if is_fused(node):
        out += _fused_stmts(graph, node, step, names, ref)
    elif is_collective(node):
        live = [y for y in node.outputs if y not in step.frees]
        group = comm_streams.index(step.stream)
        out += _bind(graph, node, _collective_expr(graph, node, ref, group), live, names)
    else:
        live = [y for y in node.outputs if y not in step.frees]
        out += _bind(graph, node, _call_expr(graph, node, ref), live, names)
    if step.records_event:
        out.append(_assign(_event_name(names, node.id), call("_event", [stream])))
    dead = [names(x) for x in step.frees if x not in node.outputs]  # dead outputs were never bound
    if is_fused(node):  # the values passed between its parts go with the kernel
        dead = [*_fused_locals(node, step, names), *dead]
    return out + _del(dead, indent=3)


def _bind(graph: Graph, node: Node, value: ast.expr, live_outputs: list[str], names: ps.Namer) -> list[Stmt]:
    """``value`` as a statement binding the node's ``live_outputs`` (the others are never bound)."""
    if "output_index" in node.attrs:
        index = node.attrs["output_index"]
        index = index if isinstance(index, list) else [index]
        if not live_outputs:
            return [_expr(value)]
        if len(index) != len(node.outputs) or not all(type(k) is int for k in index):
            raise GraphError(
                f"node {node.id!r:.60}: output_index: {index!r:.60} is not one integer per output",
                where=graph.name,
                hint="output_index lists the position of each output in the op's result",
            )
        out = [_assign("_r", value)]
        for y, k in zip(node.outputs, index, strict=True):
            if y in live_outputs:
                out.append(_assign(names(y), subscript(name("_r"), literal(k))))
        return out + [Stmt(ast.Delete([_del_target("_r")]))]
    if not live_outputs:
        return [_expr(value)]
    if len(node.outputs) > 1:
        raise UnsupportedError(
            f"op {node.op} has {len(node.outputs)} outputs but no output_index", where=node.id
        )
    return [_assign(names(node.outputs[0]), value)]


def _del_target(text: str) -> ast.Name:
    return ast.Name(id=name(text).id, ctx=ast.Del())


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


def _fused_stmts(graph: Graph, node: Node, step: LaunchStep, names: ps.Namer, ref: Ref) -> list[Stmt]:
    """A fused kernel as its parts' calls in order; a folded batch-norm is not run: the
    convolution is called with the folded weight and bias instead (as the runtime does)."""
    parts = fused_parts(node)
    if any(is_collective(p) for p in parts):
        raise UnsupportedError(
            f"fused kernel {node.id!r:.60} holds a collective, which codegen does not write in a kernel",
            where=graph.name,
            hint="fuse the rank program without its collectives (they run on their own streams)",
        )
    fold = folded_pair(node)
    by_id = {p.id: p for p in parts}
    live = _part_live(node, step)
    label = f"fused kernel {ps.plain(node.id)}: {len(parts)} ops"
    if len(ps.INDENT * 3 + "# " + label) > ps.LINE_LENGTH:  # a long chain of ops names the kernel
        label = f"fused kernel of {len(parts)} ops"
    out: list[Stmt] = []
    for p in parts:
        if fold is not None and p.id == fold[1]:
            continue  # the convolution already gives the normalised result
        if fold is not None and p.id == fold[0]:
            bn = by_id[fold[1]]
            out.append(_fold_stmt(graph, p, bn, ref))
            target = Node(p.id, p.op, p.inputs, bn.outputs[:1], {})
            folded_ref = lambda v: name(FOLDED[v]) if v in FOLDED else ref(v)  # noqa: E731
            conv = _call_expr(graph, _folded_conv(p), folded_ref)
            out += _bind(graph, target, conv, sorted(live[p.id]), names)
            out.append(Stmt(ast.Delete([_del_target("_folded_weight"), _del_target("_folded_bias")])))
        else:
            out += _bind(graph, p, _call_expr(graph, p, ref), sorted(live[p.id]), names)
    first = out[0]
    out[0] = Stmt(first.node, before=(label, *first.before), body=first.body, comment=first.comment)
    return out


_BN_ARGS = ("input", "weight", "bias", "running_mean", "running_var", "training", "momentum", "eps")


def _fold_stmt(graph: Graph, conv: Node, bn: Node, ref: Ref) -> Stmt:
    """``_folded_weight, _folded_bias = _fold_batch_norm(...)``: ``w * g / sqrt(v + eps)`` and its bias."""
    bound = dict(zip(_BN_ARGS[1:], list(bn.attrs.get("args", []))[1:], strict=False))
    bound.update(bn.attrs.get("kwargs", {}))
    args = list(conv.attrs.get("args", []))
    conv_bias = conv.attrs.get("kwargs", {}).get("bias", args[2] if len(args) > 2 else None)
    eps = bound.get("eps", 1e-5)
    with reading(graph, f"node {bn.id!r:.60}", "args"):
        if isinstance(eps, bool) or not isinstance(eps, (int, float)):
            raise Unwritable(f"eps {eps!r:.40} is not a number")
        if len(args) < 2 or "running_mean" not in bound or "running_var" not in bound:
            raise Unwritable("a folded convolution and batch norm need their weights and statistics")
        tensors = (
            args[1],
            conv_bias,
            bound["running_mean"],
            bound["running_var"],
            bound.get("weight"),
            bound.get("bias"),
        )
        fold = call(
            "_fold_batch_norm",
            [
                _arg_expr(args[1], ref, conv),
                _arg_expr(conv_bias, ref, conv),
                *(_arg_expr(t, ref, bn) for t in tensors[2:]),
                literal(float(eps)),
            ],
        )
    return _assign(_store_tuple("_folded_weight", "_folded_bias"), fold)


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
    inputs = (*conv.inputs, *FOLDED)  # what its arguments may read
    return Node(conv.id, conv.op, inputs, conv.outputs, {**conv.attrs, "args": new_args, "kwargs": kwargs})


# what a folded convolution reads instead of its weight and bias (names no value takes)
FOLDED = {"\0folded weight": "_folded_weight", "\0folded bias": "_folded_bias"}


def _event_name(names: ps.Namer, op: str) -> str:
    return names("\0event " + op, base=f"event_{op}")


def _del(dead: Sequence[str], *, indent: int) -> list[Stmt]:
    """``del`` statements for ``dead``, as many names on each as fit on a line."""
    groups: list[list[str]] = []
    pad = ps.INDENT * indent
    for n in dead:
        if groups and len(f"{pad}del {', '.join([*groups[-1], n])}") <= ps.LINE_LENGTH:
            groups[-1].append(n)
        else:
            groups.append([n])
    return [Stmt(ast.Delete([_del_target(n) for n in g])) for g in groups]


def _collective_expr(graph: Graph, node: Node, ref: Ref, group: int) -> ast.expr:
    """A collective as the module's helper that makes ``runtime.collectives``' torch.distributed
    call, on ``self.groups[group]`` (its stream's process group): ``_all_gather(x, g)``,
    ``_reduce_scatter(x, g, average)`` or ``_all_reduce(x, g, average)`` (``module`` has checked
    every collective node first)."""
    kind = collective_kind(node)
    args = [ref(node.inputs[0]), subscript(attr("self", "groups"), literal(group))]
    if kind == "all_gather":
        return call("_all_gather", args)
    average = literal(node.attrs.get("reduce", "sum") == "avg")
    return call(f"_{kind}", [*args, average])


def _call_expr(graph: Graph, node: Node, ref: Ref) -> ast.expr:
    with reading(graph, f"node {node.id!r:.60}", "args"):
        args = node.attrs.get("args", [])
        if not isinstance(args, list):
            raise Unwritable(f"{args!r:.40} is not a list of arguments")
        args = [_arg_expr(a, ref, node) for a in args]
    with reading(graph, f"node {node.id!r:.60}", "kwargs"):
        kwargs = node.attrs.get("kwargs", {})
        if not isinstance(kwargs, dict):
            raise Unwritable(f"{kwargs!r:.40} is not a mapping of names to arguments")
        keywords = [keyword_arg(k, _arg_expr(v, ref, node)) for k, v in kwargs.items()]
    if node.op in PYTHON_OPS:
        if len(args) != 2 or keywords:
            raise UnsupportedError(f"getitem with {len(args)} arguments", where=node.id)
        return subscript(args[0], args[1])
    with reading(graph, f"node {node.id!r:.60}", "op"):
        return call(op_function(node.op), args, keywords)


def _arg_expr(a: Any, ref: Ref, node: Node, depth: int = 0) -> ast.expr:
    """One encoded argument (``frontends.argcodec``) as an expression; a tensor must be one of
    the node's inputs (what the schedule made sure is computed and not yet freed)."""
    if isinstance(a, list):
        if depth > MAX_DEPTH:
            raise Unwritable(f"arguments nested more than {MAX_DEPTH} levels deep")
        return ast.List([_arg_expr(x, ref, node, depth + 1) for x in a], ast.Load())
    if isinstance(a, dict):
        if "$v" in a:
            if not isinstance(a["$v"], str) or a["$v"] not in node.inputs:
                raise Unwritable(f"the tensor {a['$v']!r:.40} is not an input of the node")
            return ref(a["$v"])
        for tag in TORCH_CONSTANTS:
            if tag in a:
                return torch_constant(tag, a[tag])
        if "$device" in a:
            return name("device")
        if "$float" in a:
            if a["$float"] not in NONFINITE:
                raise Unwritable(f"{a['$float']!r:.40} is not a non-finite float (inf, -inf, nan)")
            return literal(float(a["$float"]))
        raise UnsupportedError(
            f"op {node.op} takes a mapping argument, which cannot be written", where=node.id
        )
    return literal(a)
