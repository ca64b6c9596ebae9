"""Writing a module built as an ``ast`` tree, laid out as ruff formats it, and proving the text
says exactly what the tree says.

A generated module is a block of ``Stmt``s (an ``ast`` statement with the comments and
blank lines before it, and for ``with``/``def``/``class`` its body) and ``Fixed`` pieces
(streamplan's own helper functions, which hold nothing from the graph, written as they
are in ``codegen/templates.py``). ``write_module`` lays the block out as ruff formats
code (line breaks, double quotes, comments: what ``ast.unparse`` would not keep), then
parses the text it wrote and compares the result with the tree: a module whose text
means anything other than the tree it was built from is never returned.

Comments and docstrings are the only free text; they are checked to be printable, one
line per comment, with no backslash or quote that could end a docstring.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Sequence
from dataclasses import dataclass

import streamplan.codegen.pysource as ps
from streamplan.codegen.pyast import identifier


@dataclass(frozen=True)
class Stmt:
    """One statement and its layout.

    ``before``: lines written first at the statement's indent ("" a blank line, other text
    a comment); ``body``: the body of a ``with``, ``def`` or ``class`` (set into the node by
    ``tree``); ``comment``: a comment after the first line; ``exploded``: a tuple, list or
    dict assigned one item per line (kept so by ruff's magic trailing comma).
    """

    node: ast.stmt
    before: tuple[str, ...] = ()
    body: tuple[Stmt | Fixed, ...] = ()
    comment: str | None = None
    exploded: bool = False


@dataclass(frozen=True)
class Fixed:
    """streamplan's own code (no data of the graph), written as its source text says."""

    source: str
    before: tuple[str, ...] = ()

    @property
    def nodes(self) -> list[ast.stmt]:
        return list(_parsed(self.source).body)


Block = Sequence[Stmt | Fixed]


@functools.cache
def _parsed(source: str) -> ast.Module:
    return ast.parse(source)


def tree(block: Block) -> list[ast.stmt]:
    """The statements of ``block`` as a list of ``ast`` nodes (bodies set from ``Stmt.body``)."""
    out: list[ast.stmt] = []
    for s in block:
        if isinstance(s, Fixed):
            out.extend(s.nodes)
        else:
            if s.body:
                s.node.body = tree(s.body)  # type: ignore[attr-defined]
            out.append(s.node)
    return out


def write_module(block: Block) -> tuple[str, ast.Module]:
    """The source of ``block`` and that source parsed; raises ``RuntimeError`` (a bug in codegen)
    when the text parses into anything but the tree ``block`` was built as."""
    text = "\n".join(lines(block, 0)) + "\n"
    built = _complete(ast.Module(body=tree(block), type_ignores=[]))
    try:
        parsed = ast.parse(text)
    except SyntaxError:
        parsed = None
    if parsed is None or ast.dump(parsed) != ast.dump(built):
        raise RuntimeError("codegen laid out a module whose text differs from its tree (a bug in streamplan)")
    return text, parsed


# the fields of the nodes codegen builds that hold lists (the others default to None)
_LIST_FIELDS = frozenset(
    {"args", "bases", "body", "decorator_list", "defaults", "elts", "keys", "keywords", "kw_defaults",
     "kwonlyargs", "names", "posonlyargs", "targets", "type_ignores", "type_params", "values"}
)  # fmt: skip


def _complete(module: ast.Module) -> ast.Module:
    """Fill the optional fields a constructor call left out, and line numbers (``ast.unparse``
    reads both)."""
    for node in ast.walk(module):
        for f in node._fields:
            if not hasattr(node, f):
                setattr(node, f, [] if f in _LIST_FIELDS else None)
    return ast.fix_missing_locations(module)


def lines(block: Block, indent: int) -> list[str]:
    """``block`` as source lines at ``indent`` levels."""
    pad = ps.INDENT * indent
    out: list[str] = []
    for s in block:
        out.extend(pad + "# " + comment(b) if b else "" for b in s.before)
        if isinstance(s, Fixed):
            out.extend(pad + ln if ln else "" for ln in s.source.strip("\n").splitlines())
        else:
            first = len(out)
            out.extend(_statement(s, indent))
            if s.comment is not None:
                out[first] += "  # " + comment(s.comment)
    return out


def comment(text: str) -> str:
    """``text`` checked to be one printable line (what follows ``#``)."""
    if not text.isprintable():
        raise ValueError(f"a comment must be one printable line: {text!r:.60}")
    return text


def docstring(text: str) -> str:
    """``text`` checked to be safe between triple double quotes: printable lines, no backslash,
    no double quote (so nothing can end the docstring or start an escape)."""
    if any(not line.isprintable() or "\\" in line or '"' in line for line in text.split("\n")):
        raise ValueError(f"a docstring must be printable text without backslashes or quotes: {text!r:.60}")
    return text


# -- statements -------------------------------------------------------------------------


def _statement(s: Stmt, indent: int) -> list[str]:
    node, pad = s.node, ps.INDENT * indent
    if (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ):
        return (pad + '"""' + docstring(node.value.value) + '"""').split("\n")
    if isinstance(node, ast.Expr):
        return ps.statement(expr(node.value), indent=indent)
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = _target(node.targets[0])
        if s.exploded:
            return _exploded(node.value, indent, f"{target} = ")
        return ps.statement(expr(node.value), indent=indent, target=target)
    if isinstance(node, ast.Delete):
        return [pad + "del " + ", ".join(_target(t) for t in node.targets)]
    if isinstance(node, ast.Return) and node.value is not None:
        return ps.layout(expr(node.value), indent=indent, prefix="return ")
    if isinstance(node, ast.Import):
        return [pad + "import " + ", ".join(identifier(a.name) for a in node.names)]
    if isinstance(node, ast.With) and len(node.items) == 1 and node.items[0].optional_vars is None:
        head = ps.layout(expr(node.items[0].context_expr), indent=indent, prefix="with ", suffix=":")
        return head + lines(s.body, indent + 1)
    if isinstance(node, ast.FunctionDef):
        return _function(s, node, indent)
    if isinstance(node, ast.ClassDef):
        bases = ", ".join(ps.flat(expr(b)) for b in node.bases)
        return [f"{pad}class {identifier(node.name)}({bases}):", *lines(s.body, indent + 1)]
    raise ValueError(f"codegen does not write {type(node).__name__} statements")


def _function(s: Stmt, node: ast.FunctionDef, indent: int) -> list[str]:
    """``def`` with positional arguments, annotations and a return annotation; the arguments on
    one line when the line fits, else one per line with a trailing comma."""
    pad = ps.INDENT * indent
    a = node.args
    if a.posonlyargs or a.vararg or a.kwonlyargs or a.kwarg or a.defaults:
        raise ValueError("codegen writes functions with plain positional arguments only")
    params = [
        identifier(p.arg) + (f": {ps.flat(expr(p.annotation))}" if p.annotation is not None else "")
        for p in a.args
    ]
    ret = f" -> {ps.flat(expr(node.returns))}" if node.returns is not None else ""
    out = [f"{pad}@{ps.flat(expr(d))}" for d in node.decorator_list]
    one = f"{pad}def {identifier(node.name)}({', '.join(params)}){ret}:"
    if len(one) <= ps.LINE_LENGTH:
        out.append(one)
    else:
        inner = pad + ps.INDENT
        out += [f"{pad}def {identifier(node.name)}(", *(f"{inner}{p}," for p in params), f"{pad}){ret}:"]
    return out + lines(s.body, indent + 1)


def _exploded(value: ast.expr, indent: int, prefix: str) -> list[str]:
    if isinstance(value, (ast.Tuple, ast.List)):
        return ps.exploded("(" if isinstance(value, ast.Tuple) else "[", [expr(e) for e in value.elts],
                           indent=indent, prefix=prefix)  # fmt: skip
    if isinstance(value, ast.Dict) and all(k is not None for k in value.keys):
        out = [ps.INDENT * indent + prefix + "{"]
        for k, v in zip(value.keys, value.values, strict=True):
            out += ps.layout(expr(v), indent=indent + 1, prefix=f"{ps.flat(expr(k))}: ", suffix=",")
        return out + [ps.INDENT * indent + "}"]
    raise ValueError(f"codegen cannot explode a {type(value).__name__}")


def _target(node: ast.expr, nested: bool = False) -> str:
    """An assignment or ``del`` target: a name, or a tuple of targets (parenthesised inside another)."""
    if isinstance(node, ast.Name):
        return identifier(node.id)
    if isinstance(node, ast.Tuple) and node.elts:
        inner = ", ".join(_target(e, nested=True) for e in node.elts) + ("," if len(node.elts) == 1 else "")
        return f"({inner})" if nested else inner
    raise ValueError(f"codegen does not assign to {type(node).__name__}")


# -- expressions ------------------------------------------------------------------------


def expr(node: ast.expr) -> ps.Expr:
    """An expression as the layout tree of ``pysource`` (atoms, calls, lists and tuples)."""
    if isinstance(node, ast.Name):
        return ps.Atom(identifier(node.id))
    if isinstance(node, ast.Constant):
        return ps.Atom(_constant(node.value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return ps.Atom("-" + ps.flat(expr(node.operand)))
    if isinstance(node, ast.Attribute):
        return ps.Atom(ps.flat(expr(node.value)) + "." + identifier(node.attr))
    if isinstance(node, ast.Subscript):
        index = node.slice
        if isinstance(index, ast.Tuple):  # x[a, b]: the tuple without its parentheses
            inner = ", ".join(ps.flat(expr(e)) for e in index.elts) + ("," if len(index.elts) == 1 else "")
        else:
            inner = ps.flat(expr(index))
        return ps.Atom(f"{ps.flat(expr(node.value))}[{inner}]")
    if isinstance(node, ast.Call):
        if any(k.arg is None for k in node.keywords):
            raise ValueError("codegen never writes **mapping arguments")
        args = [expr(a) for a in node.args] + [
            ps.Keyword(identifier(k.arg), expr(k.value)) for k in node.keywords
        ]
        return ps.Call(ps.flat(expr(node.func)), tuple(args))
    if isinstance(node, (ast.List, ast.Tuple)):
        return ps.Seq("[" if isinstance(node, ast.List) else "(", tuple(expr(e) for e in node.elts))
    raise ValueError(f"codegen does not write {type(node).__name__} expressions")


def _constant(value: object) -> str:
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return ps.py_float(value)
    if isinstance(value, str):
        return ps.py_str(value)
    if value is Ellipsis:
        return "..."
    raise ValueError(f"codegen does not write {type(value).__name__} constants")
