"""Hostile inputs: a small model whose graph has every kind of field codegen writes, injection
payloads, edits that put them into a graph's JSON, and an independent check of generated code.

The payloads that would run code create ``SENTINEL`` (a file no test creates): a test that finds
it after feeding a payload to streamplan has found code execution. ``module_violations``
checks a generated module without using codegen's own checker: every top-level function but
``forward`` is the same as in a module made from an untouched graph, and ``forward`` and the
data tables hold only the statements, names and calls codegen means to write.
"""

from __future__ import annotations

import ast
import copy
import os
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

# one fixed name (not per process): test ids hold the payloads, and xdist workers must collect the same ids
SENTINEL = Path(tempfile.gettempdir()) / f"streamplan-hostile-sentinel-{os.getuid()}"
_S = str(SENTINEL)

# What people put in strings to make a program run them: code, ways out of a string, a
# docstring or a comment, a call's argument list, markup for HTML and terminals, paths.
PAYLOADS = [
    f"__import__('os').system('touch {_S}')",
    f"out_dtype=None, **{{str(__import__('os').system('touch {_S}')): 0}}, zz",
    f'"""\nimport os; os.system("touch {_S}")\n"""',
    f"'''\nopen({_S!r}, 'w')\n'''",
    f"x\nopen({_S!r}, 'w')  #",
    f"a); open({_S!r}, 'w'); (b",
    "**{}",
    "back\\slash\\",
    "a'b\"c",
    "line\r\nbreak",
    "\u2028\u2029\x85",
    "\u202eevil\u202c",
    "\x00\x1b[31mred\x1b[0m",
    "<script>window.PWNED=1</script>",
    '<img src=x onerror="window.PWNED=1">',
    '<a href="https://example.com/">x</a>',
    "[red]x[/red] :fire:",
    "../../etc/passwd",
    "%{x} {0} %s",
    "",
    " ",
    "__class__",
    "import",
    "9lives",
    "ok_name",
]
# where a payload goes into an op's call, and the word the refusal must name
FIELDS = (
    "kwargs key",
    "string arg",
    "$dtype",
    "$layout",
    "$memory_format",
    "output_index",
    "op",
    "dtype",
    "kind",
)
FIELD_WORDS = {
    "kwargs key": "kwargs",
    "string arg": "args",
    "$dtype": "args",
    "$layout": "args",
    "$memory_format": "args",
    "output_index": "output_index",
    "op": "op",
    "dtype": "dtype",
    "kind": "kind",
}


class HostileNet(nn.Module):
    """Parameters, keyword arguments, dtypes, a device, an op with two outputs (output_index)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, 5)

    def forward(self, x: torch.Tensor):
        h = torch.relu(self.conv(x))
        v, i = torch.max(h, dim=1)
        y = torch.softmax(self.fc(h.mean(dim=(2, 3))), dim=-1, dtype=torch.float64).to(torch.float32)
        return y + torch.arange(5, device=x.device, dtype=torch.float32), v.sum() + i.sum().to(torch.float32)


def build(batch: int = 1):
    torch.manual_seed(0)
    return HostileNet().eval(), (torch.randn(batch, 3, 6, 6),)


SPEC = f"{Path(__file__).resolve()}:build"


# -- edits of a graph's JSON ------------------------------------------------------------


def _walk_refs(obj: Any, old: str, new: str) -> Any:
    if isinstance(obj, list):
        return [_walk_refs(x, old, new) for x in obj]
    if isinstance(obj, dict):
        if obj.get("$v") == old:
            return {**obj, "$v": new}
        return {k: _walk_refs(v, old, new) for k, v in obj.items()}
    return obj


def rename_value(doc: dict, old: str, new: str) -> dict:
    """``doc`` with value ``old`` called ``new`` everywhere a graph names values."""
    doc = copy.deepcopy(doc)
    swap = lambda xs: [new if x == old else x for x in xs]  # noqa: E731
    for v in doc["values"]:
        v["id"] = new if v["id"] == old else v["id"]
        if v.get("storage") == old:
            v["storage"] = new
    for n in doc["nodes"]:
        for key in ("inputs", "outputs", "mutates"):
            if key in n:
                n[key] = swap(n[key])
        n["attrs"] = _walk_refs(n["attrs"], old, new)
    for key in ("inputs", "params", "outputs"):
        doc[key] = swap(doc[key])
    if "param_names" in doc:
        doc["param_names"] = {(new if k == old else k): v for k, v in doc["param_names"].items()}
    meta = doc.get("meta", {})
    if "input_names" in meta:
        meta["input_names"] = swap(meta["input_names"])
    if "output_values" in meta:
        meta["output_values"] = _walk_refs(meta["output_values"], old, new)
    return doc


def rename_node(doc: dict, old: str, new: str) -> dict:
    doc = copy.deepcopy(doc)
    for n in doc["nodes"]:
        n["id"] = new if n["id"] == old else n["id"]
        if "after" in n:
            n["after"] = [new if x == old else x for x in n["after"]]
    return doc


def inject(doc: dict, field: str, payload: str, node: int) -> dict:
    """``doc`` with ``payload`` put into ``field`` of node number ``node`` (or its first output value)."""
    doc = copy.deepcopy(doc)
    n = doc["nodes"][node % len(doc["nodes"])]
    attrs = n["attrs"]
    if field == "kwargs key":
        attrs["kwargs"][payload] = 1
    elif field == "string arg":
        attrs["args"].append(payload)
    elif field.startswith("$"):
        attrs["args"].append({field: payload})
    elif field == "output_index":
        attrs["output_index"] = [payload] * len(n["outputs"])
    elif field == "op":
        n["op"] = payload if "." in payload else f"aten.{payload}.default"
    else:  # a field of the node's first output value
        value = next(v for v in doc["values"] if v["id"] == n["outputs"][0])
        value[field] = payload
    return doc


# -- an independent check of generated modules -----------------------------------------

_FORWARD_NODES = (
    ast.FunctionDef, ast.arguments, ast.arg, ast.Assign, ast.Expr, ast.With, ast.withitem, ast.Delete,
    ast.Return, ast.Call, ast.keyword, ast.Name, ast.Attribute, ast.Subscript, ast.Constant, ast.List,
    ast.Tuple, ast.UnaryOp, ast.USub, ast.Load, ast.Store, ast.Del,
)  # fmt: skip
_DATA_NODES = (ast.Constant, ast.Tuple, ast.List, ast.Dict, ast.UnaryOp, ast.USub, ast.Load)
_CALLABLE_NAMES = {"_on", "_event", "_wait", "_hand_over", "_join", "_weights", "_fold_batch_norm", "float"}
_FORBIDDEN_NAMES = {
    "eval", "exec", "compile", "open", "__import__", "getattr", "setattr", "delattr", "globals", "locals",
    "vars", "os", "sys", "subprocess", "builtins", "breakpoint", "input", "print", "type", "object",
}  # fmt: skip


def _dunder_ops() -> set[str]:
    names = torch._C._dispatch_get_all_op_names()
    return {n.split("::")[1].split(".")[0] for n in names if n.startswith("aten::__")}


def _chain(e: ast.expr) -> list[str]:
    parts = []
    while isinstance(e, ast.Attribute):
        parts.append(e.attr)
        e = e.value
    return [e.id, *reversed(parts)] if isinstance(e, ast.Name) else []


def module_violations(source: str, *references: str) -> list[str]:
    """What ``source`` holds beyond what codegen may write (``references``: modules of untouched
    graphs, one of whose copies of each helper function and method ``source`` must repeat)."""
    tree = ast.parse(source)
    out: list[str] = []

    def fixed_functions(module: ast.Module) -> dict[str, str]:
        found = {f.name: ast.dump(f) for f in module.body if isinstance(f, ast.FunctionDef)}
        for c in (c for c in module.body if isinstance(c, ast.ClassDef)):
            found |= {f"{c.name}.{f.name}": ast.dump(f) for f in c.body if isinstance(f, ast.FunctionDef)}
        return {k.split(".")[-1]: v for k, v in found.items() if not k.endswith("forward")}

    mine = fixed_functions(tree)
    theirs = [fixed_functions(ast.parse(r)) for r in references]
    out += [
        f"function {k} differs from streamplan's" for k in mine if all(t.get(k) != mine[k] for t in theirs)
    ]
    dunders = _dunder_ops()
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in stmt.names]
            if not isinstance(stmt, ast.Import) or names not in (["contextlib"], ["torch"]):
                out.append(f"import of {names}")
        elif isinstance(stmt, ast.Assign) and stmt.targets[0].id != "aten":  # type: ignore[attr-defined]
            for n in ast.walk(stmt.value):
                float_call = isinstance(n, ast.Call) and _chain(n.func) == ["float"]
                if not isinstance(n, _DATA_NODES) and not float_call and _chain(n) != ["float"]:
                    out.append(f"{type(n).__name__} in the data table {stmt.targets[0].id}")  # type: ignore[attr-defined]
    forwards = [
        f
        for c in tree.body
        if isinstance(c, ast.ClassDef)
        for f in c.body
        if getattr(f, "name", "") == "forward"
    ]
    if len(forwards) != 1:
        return out + [f"{len(forwards)} forward methods"]
    for n in ast.walk(forwards[0]):
        if not isinstance(n, _FORWARD_NODES) and not isinstance(n, ast.expr_context):
            out.append(f"a {type(n).__name__} in forward")
        if isinstance(n, ast.Name) and n.id in _FORBIDDEN_NAMES:
            out.append(f"the name {n.id} in forward")
        if isinstance(n, ast.Attribute) and n.attr.startswith("__") and n.attr not in dunders:
            out.append(f"the attribute {n.attr} in forward")
        if isinstance(n, ast.keyword) and n.arg is None:
            out.append("a **mapping argument in forward")
        if isinstance(n, ast.Call):
            chain = _chain(n.func)
            ok = (
                (len(chain) == 1 and chain[0] in _CALLABLE_NAMES)
                or (len(chain) == 3 and chain[0] == "aten")
                or (len(chain) == 5 and chain[:2] == ["torch", "ops"])
                or chain in (["self", "_fork"], ["torch", "device"], ["torch", "no_grad"])
            )
            if not ok:
                out.append(f"a call of {ast.unparse(n.func)} in forward")
    return out
