"""What a generated module may contain, checked on its text: ``module_problems(source)``.

The text is parsed and every statement is held to what codegen means to write:

* at module level: the docstring, ``import contextlib`` and ``import torch``,
  ``aten = torch.ops.aten``, the data tables (``PREDICTIONS``, ``OUTPUTS``, ``WEIGHTS``,
  ``RENAMED``, ``CONSTANTS``, ``PROCESS_GROUPS``, ``SHARDS``) made of literals only,
  streamplan's helper functions exactly as ``templates`` writes them (the only place a
  ``torch.distributed`` call may be: the collectives of a rank program), and one class;
* in the class: a subclass of ``torch.nn.Module`` with a docstring, the methods of
  ``templates`` exactly, and ``forward``;
* in ``forward``: assignments, calls, ``with _on(s):`` blocks, ``del`` and ``return`` only;
  each call is a ``torch.ops`` overload (``aten.name.overload`` or
  ``torch.ops.ns.name.overload``, as ``ir.opname`` allows) or one of the module's helpers;
  each name is an argument, something ``forward`` assigned before, or one of the
  module's own; attributes are torch's dtypes, layouts and memory formats, ``.device``
  and ``self.tensors``; a collective helper (``_all_gather``, ``_reduce_scatter``,
  ``_all_reduce``) takes a tensor, ``self.groups[<int>]`` and (reducing) a bool, and
  ``self.groups`` appears nowhere else.

``generate_module`` runs it on every module it writes; the hostile-input tests run it on
modules made from crafted graphs. An empty list means the module holds nothing else.
"""

from __future__ import annotations

import ast
import functools

import streamplan.codegen.templates as templates
from streamplan.frontends.argcodec import TORCH_CONSTANTS
from streamplan.ir.opname import split_op

DATA_TABLES = frozenset(
    {"PREDICTIONS", "OUTPUTS", "WEIGHTS", "RENAMED", "CONSTANTS", "PROCESS_GROUPS", "SHARDS"}
)
HELPER_CALLS = frozenset(
    {"_on", "_event", "_wait", "_host_wait", "_hand_over", "_join", "_weights", "_fold_batch_norm"}
)
# the collective helpers and how many arguments each takes (tensor, process group[, average])
COLLECTIVE_CALLS = {"_all_gather": 2, "_reduce_scatter": 3, "_all_reduce": 3}
MODULE_NAMES = HELPER_CALLS | COLLECTIVE_CALLS.keys() | {"torch", "aten", "self"}
TORCH_VALUES = frozenset().union(*TORCH_CONSTANTS.values())


@functools.cache
def _fixed() -> tuple[dict[str, str], dict[str, frozenset[str]]]:
    """The dumps of the helper functions, and of each method's allowed texts, by name."""
    helpers = {
        f.name: ast.dump(f)
        for text in (
            templates.HELPERS,
            templates.FOLD_HELPER,
            templates.HOST_WAIT_HELPER,
            templates.COLLECTIVE_HELPERS,
            templates.SHARD_HELPER,
        )
        for f in ast.parse(text).body
        if isinstance(f, ast.FunctionDef)
    }
    variants = [
        *(
            templates.init(constants_embedded=c, process_groups=g)
            for c in (False, True)
            for g in (False, True)
        ),
        *(
            templates.load_weights(optimizer_state=o, renamed=r, sharded=h)
            for o in (False, True)
            for r in (False, True)
            for h in (False, True)
        ),
        *(templates.load_optimizer_state(renamed=r, sharded=h) for r in (False, True) for h in (False, True)),
        templates.FORK,
    ]
    methods: dict[str, set[str]] = {}
    for text in variants:
        f = ast.parse(text).body[0]
        methods.setdefault(f.name, set()).add(ast.dump(f))
    return helpers, {k: frozenset(v) for k, v in methods.items()}


def module_problems(source: str | ast.Module) -> list[str]:
    """Everything in ``source`` (text, or text already parsed) that a generated module may not
    hold (empty: nothing)."""
    try:
        tree = ast.parse(source) if isinstance(source, str) else source
    except SyntaxError as e:
        return [f"does not parse: {e}"]
    checker = _Checker()
    checker.module(tree)
    return checker.problems


def _dump(text: str) -> str:
    return ast.dump(ast.parse(text, mode="eval").body)


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


class _Checker:
    def __init__(self) -> None:
        self.problems: list[str] = []
        self.defined: set[str] = set()

    def bad(self, node: ast.AST, what: str) -> None:
        self.problems.append(f"line {getattr(node, 'lineno', '?')}: {what}")

    # -- module and class --------------------------------------------------------------
    def module(self, tree: ast.Module) -> None:
        helpers, _ = _fixed()
        classes = 0
        for i, node in enumerate(tree.body):
            if i == 0 and _is_docstring(node):
                continue
            if isinstance(node, ast.Import):
                if [(a.name, a.asname) for a in node.names] not in (
                    [("contextlib", None)],
                    [("torch", None)],
                ):
                    self.bad(node, "imports something other than contextlib and torch")
            elif (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                target = node.targets[0].id
                if target == "aten":
                    if ast.dump(node.value) != _dump("torch.ops.aten"):
                        self.bad(node, "aten is not torch.ops.aten")
                elif target in DATA_TABLES:
                    self.data(node.value)
                else:
                    self.bad(node, f"assigns {target} at module level")
            elif isinstance(node, ast.FunctionDef):
                if helpers.get(node.name) != ast.dump(node):
                    self.bad(node, f"function {node.name} is not one of streamplan's helpers")
            elif isinstance(node, ast.ClassDef):
                classes += 1
                self.cls(node)
            else:
                self.bad(node, f"a {type(node).__name__} statement at module level")
        if classes != 1:
            self.problems.append(f"{classes} classes, not one")

    def data(self, node: ast.expr) -> None:
        """A table of literals: constants, negative numbers, float("nan"/"inf"), tuples, lists, dicts."""
        for n in ast.walk(node):
            if isinstance(n, (ast.Tuple, ast.List, ast.Dict, ast.Load, ast.USub)):
                continue
            if isinstance(n, ast.Constant) and (
                n.value is None or isinstance(n.value, (bool, int, float, str))
            ):
                continue
            if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
                continue
            if isinstance(n, ast.Name) and n.id == "float":
                continue
            if self.float_special(n):
                continue
            self.bad(n, f"a {type(n).__name__} in a data table")
            return

    @staticmethod
    def float_special(n: ast.AST) -> bool:
        """``float("nan")`` or ``float("inf")``."""
        return (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id == "float"
            and not n.keywords
            and len(n.args) == 1
            and isinstance(n.args[0], ast.Constant)
            and n.args[0].value in ("nan", "inf")
        )

    def cls(self, node: ast.ClassDef) -> None:
        _, methods = _fixed()
        if (
            [ast.dump(b) for b in node.bases] != [_dump("torch.nn.Module")]
            or node.keywords
            or node.decorator_list
        ):
            self.bad(node, "the class is not a plain torch.nn.Module subclass")
        forwards = 0
        for i, item in enumerate(node.body):
            if i == 0 and _is_docstring(item):
                continue
            if isinstance(item, ast.FunctionDef) and item.name == "forward":
                forwards += 1
                self.forward(item)
            elif isinstance(item, ast.FunctionDef) and ast.dump(item) in methods.get(item.name, ()):
                continue
            else:
                self.bad(item, f"the class holds a {type(item).__name__} that is not streamplan's")
        if forwards != 1:
            self.bad(node, f"the class has {forwards} forward methods")

    # -- forward --------------------------------------------------------------------------
    def forward(self, fn: ast.FunctionDef) -> None:
        a = fn.args
        if a.posonlyargs or a.vararg or a.kwonlyargs or a.kwarg or a.defaults or not a.args:
            self.bad(fn, "forward takes more than plain tensor arguments")
        tensor = _dump("torch.Tensor")
        for i, p in enumerate(a.args):
            ok = (
                p.annotation is None
                if i == 0
                else (p.annotation is not None and ast.dump(p.annotation) == tensor)
            )
            if (i == 0 and p.arg != "self") or not ok or p.arg in MODULE_NAMES - {"self"}:
                self.bad(fn, f"argument {p.arg} is not a tensor argument")
        if [ast.dump(d) for d in fn.decorator_list] not in ([], [_dump("torch.no_grad()")]):
            self.bad(fn, "forward has a decorator other than torch.no_grad()")
        if fn.returns is None or ast.dump(fn.returns) not in (tensor, _dump("tuple[torch.Tensor, ...]")):
            self.bad(fn, "forward does not return tensors")
        self.defined = set(MODULE_NAMES) | {p.arg for p in a.args}
        self.body(fn.body)

    def body(self, stmts: list[ast.stmt]) -> None:
        for s in stmts:
            if isinstance(s, ast.Assign) and len(s.targets) == 1:
                self.expr(s.value)
                self.bind(s.targets[0])
            elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
                self.expr(s.value)
            elif isinstance(s, ast.With) and len(s.items) == 1 and s.items[0].optional_vars is None:
                on = s.items[0].context_expr
                if not (isinstance(on, ast.Call) and isinstance(on.func, ast.Name) and on.func.id == "_on"):
                    self.bad(s, "a with block that is not _on(stream)")
                self.expr(on)
                self.body(s.body)
            elif isinstance(s, ast.Delete):
                for t in s.targets:
                    if not (isinstance(t, ast.Name) and t.id in self.defined - MODULE_NAMES):
                        self.bad(s, "del of something forward did not assign")
            elif isinstance(s, ast.Return) and s.value is not None:
                self.expr(s.value)
            else:
                self.bad(s, f"a {type(s).__name__} statement in forward")

    def bind(self, target: ast.expr) -> None:
        if isinstance(target, ast.Name):
            if target.id in MODULE_NAMES:
                self.bad(target, f"forward rebinds {target.id}")
            self.defined.add(target.id)
        elif isinstance(target, ast.Tuple):
            for t in target.elts:
                self.bind(t)
        else:
            self.bad(target, f"assignment to a {type(target).__name__}")

    def expr(self, e: ast.expr) -> None:
        if isinstance(e, ast.Name):
            if e.id not in self.defined:
                self.bad(e, f"uses {e.id}, which is neither an argument nor assigned before")
        elif isinstance(e, ast.Constant):
            if not (e.value is None or isinstance(e.value, (bool, int, float, str))):
                self.bad(e, f"a {type(e.value).__name__} constant")
        elif isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
            if not (isinstance(e.operand, ast.Constant) or self.float_special(e.operand)):
                self.bad(e, "negation of something other than a number")
            self.expr(e.operand)
        elif isinstance(e, (ast.List, ast.Tuple)):
            for x in e.elts:
                self.expr(x)
        elif isinstance(e, ast.Subscript):
            self.expr(e.value)
            self.expr(e.slice)
        elif isinstance(e, ast.Attribute):
            self.attribute(e)
        elif isinstance(e, ast.Call):
            self.call(e)
        else:
            self.bad(e, f"a {type(e).__name__} expression")

    def attribute(self, e: ast.Attribute) -> None:
        """torch's dtypes, layouts and memory formats; ``<tensor>.device``; ``self.tensors``."""
        base = e.value
        if isinstance(base, ast.Name) and base.id == "torch" and e.attr in TORCH_VALUES:
            return
        if isinstance(base, ast.Name) and base.id == "self" and e.attr == "tensors":
            return
        if e.attr == "device" and isinstance(base, (ast.Name, ast.Subscript)):
            self.expr(base)
            return
        self.bad(e, f"reads attribute {e.attr}")

    def call(self, e: ast.Call) -> None:
        func = e.func
        if any(k.arg is None for k in e.keywords):
            self.bad(e, "a **mapping argument")
        if self.float_special(e):
            return
        chain = _chain(func)
        if isinstance(func, ast.Name) and func.id in COLLECTIVE_CALLS:
            self.collective(e, func.id)
            return
        if isinstance(func, ast.Name) and func.id in HELPER_CALLS:
            if e.keywords:
                self.bad(e, f"{func.id} called with keywords")
        elif chain == ["self", "_fork"] or chain == ["torch", "device"]:
            pass
        elif chain is not None and (
            chain[0] == "aten" and len(chain) == 3 or chain[:2] == ["torch", "ops"] and len(chain) == 5
        ):
            ns = "aten" if chain[0] == "aten" else chain[2]
            try:
                split_op(".".join([ns, *chain[-2:]]))
            except ValueError as err:
                self.bad(e, str(err))
        else:
            self.bad(e, f"calls {ast.unparse(func)}, which is neither a torch op nor a helper")
        for a in e.args:
            self.expr(a)
        for k in e.keywords:
            self.expr(k.value)

    def collective(self, e: ast.Call, helper: str) -> None:
        """``helper(tensor, self.groups[<int>])`` or, reducing, ``helper(tensor, self.groups[<int>], <bool>)``:
        the process group is read here only, and the average flag is a literal."""
        args = e.args
        if e.keywords or len(args) != COLLECTIVE_CALLS[helper]:
            self.bad(e, f"{helper} takes {COLLECTIVE_CALLS[helper]} positional arguments")
            return
        group = args[1]
        if not (
            isinstance(group, ast.Subscript)
            and _chain(group.value) == ["self", "groups"]
            and isinstance(group.slice, ast.Constant)
            and type(group.slice.value) is int
        ):
            self.bad(e, f"{helper} on something other than self.groups[<int>]")
        if len(args) == 3 and not (isinstance(args[2], ast.Constant) and type(args[2].value) is bool):
            self.bad(e, f"{helper}'s average flag is not True or False")
        self.expr(args[0])


def _chain(e: ast.expr) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; None for anything but names and attributes."""
    parts: list[str] = []
    while isinstance(e, ast.Attribute):
        parts.append(e.attr)
        e = e.value
    if not isinstance(e, ast.Name):
        return None
    return [e.id, *reversed(parts)]
