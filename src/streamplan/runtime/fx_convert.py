"""A small ATen FX graph -> ``Graph`` converter for the ``torch.compile`` backend.

Used when ``frontends.torch_capture.graph_from_fx`` is not available (or cannot
take the graph). Every placeholder becomes a graph input, in order (AOTAutograd
passes lifted params first, then user inputs); ``get_attr`` tensors become
constants returned in ``constants``. Multi-output ops get one value per returned
tensor (``name.i``) and ``getitem`` nodes are folded into them. Storage aliasing
(views, in-place writes) comes from the op schema's alias annotations.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx

from streamplan.errors import UnsupportedError
from streamplan.frontends.argcodec import encode
from streamplan.ir.dtypes import tensor_bytes
from streamplan.ir.graph import Graph, Node, Value


def fx_to_graph(gm: torch.fx.GraphModule, *, name: str = "fx") -> tuple[Graph, dict[str, torch.Tensor]]:
    """Convert an ATen-level FX graph; returns the graph and its constants (value id -> tensor)."""
    values: dict[str, Value] = {}
    nodes: list[Node] = []
    inputs: list[str] = []
    constants: dict[str, torch.Tensor] = {}
    ref: dict[torch.fx.Node, Any] = {}  # fx node -> value id, or list of value ids (multi-output)
    bad: list[str] = []

    def tensor_id(obj: Any) -> str | None:
        if isinstance(obj, torch.fx.Node):
            r = ref.get(obj)
            if not isinstance(r, str):
                raise UnsupportedError(f"argument %{obj.name} is not a single tensor")
            return r
        return None

    outputs: list[str] = []
    for fn in gm.graph.nodes:
        if fn.op == "placeholder":
            val = fn.meta.get("val")
            if not isinstance(val, torch.Tensor):
                bad.append(f"non-tensor input %{fn.name}")
                continue
            values[fn.name] = _value(fn.name, val, "input")
            inputs.append(fn.name)
            ref[fn] = fn.name
        elif fn.op == "get_attr":
            t = _getattr(gm, str(fn.target))
            if not isinstance(t, torch.Tensor):
                bad.append(f"non-tensor attribute {fn.target}")
                continue
            values[fn.name] = _value(fn.name, t, "constant")
            constants[fn.name] = t.detach()
            ref[fn] = fn.name
        elif fn.op == "call_function" and fn.target is operator.getitem:
            src, idx = fn.args
            r = ref.get(src)
            if not isinstance(r, list) or not isinstance(idx, int) or not isinstance(r[idx], str):
                bad.append(f"getitem %{fn.name}")
                continue
            ref[fn] = r[idx]
        elif fn.op == "call_function" and isinstance(fn.target, torch._ops.OpOverload):
            try:
                nodes.append(_convert_call(fn, values, ref, tensor_id))
            except UnsupportedError as e:
                bad.append(f"%{fn.name} ({e.message})")
        elif fn.op == "output":
            for o in _flat(fn.args[0]):
                r = ref.get(o) if isinstance(o, torch.fx.Node) else None
                if not isinstance(r, str):
                    bad.append(f"output {o!r} is not a tensor")
                    continue
                outputs.append(r)
        else:
            bad.append(f"%{fn.name} ({fn.op} {fn.target})")
    if bad:
        raise UnsupportedError(f"cannot convert: {'; '.join(bad[:8])}", where=name)
    graph = Graph(name, tuple(nodes), values, tuple(inputs), tuple(constants), tuple(outputs))
    return graph, constants


def _convert_call(fn: torch.fx.Node, values: dict[str, Value], ref: dict, tensor_id) -> Node:
    op: torch._ops.OpOverload = fn.target  # type: ignore[assignment]
    args = encode(list(fn.args), tensor_id)
    kwargs = encode(dict(fn.kwargs), tensor_id)
    ins = list(dict.fromkeys(tensor_id(a) for a in fn.all_input_nodes))
    val = fn.meta.get("val")
    schema = op._schema
    alias_of: dict[Any, str] = {}  # alias set -> input value id
    mutates: list[str] = []
    for sarg, actual in zip(schema.arguments, _schema_actuals(fn), strict=False):
        info = sarg.alias_info
        if info is not None and isinstance(actual, torch.fx.Node):
            vid = tensor_id(actual)
            for s in info.before_set:
                alias_of[s] = vid
            if info.is_write:
                mutates.append(vid)
    if isinstance(val, torch.Tensor):
        vals, ids = [val], [fn.name]
        ref[fn] = fn.name
    elif isinstance(val, (tuple, list)) and all(isinstance(v, torch.Tensor) for v in val):
        vals = list(val)
        ids = [f"{fn.name}.{i}" for i in range(len(vals))]
        ref[fn] = ids
    else:
        raise UnsupportedError(f"{op} returns {type(val).__name__}")
    returns = list(schema.returns)
    for i, (vid, v) in enumerate(zip(ids, vals, strict=True)):
        storage = ""
        rinfo = returns[min(i, len(returns) - 1)].alias_info if returns else None
        if rinfo is not None:
            for s in rinfo.before_set:
                if s in alias_of:
                    storage = values[alias_of[s]].storage
        values[vid] = _value(vid, v, "activation", storage)
    name = str(op).removeprefix("torch.ops.")
    return Node(
        fn.name,
        name,
        tuple(x for x in ins if x is not None),
        tuple(ids),
        {"args": args, "kwargs": kwargs},
        mutates=tuple(mutates),
    )


def _schema_actuals(fn: torch.fx.Node) -> list[Any]:
    schema = fn.target._schema  # type: ignore[union-attr]
    out = list(fn.args)
    for sarg in schema.arguments[len(out) :]:
        out.append(fn.kwargs.get(sarg.name))
    return out


def _value(vid: str, t: torch.Tensor, kind: str, storage: str = "") -> Value:
    dtype = str(t.dtype).removeprefix("torch.")
    shape = tuple(int(d) for d in t.shape)
    return Value(vid, shape, dtype, tensor_bytes(shape, dtype), kind, storage)  # type: ignore[arg-type]


def _getattr(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _flat(obj: Any):
    if isinstance(obj, (tuple, list)):
        for x in obj:
            yield from _flat(x)
    else:
        yield obj
