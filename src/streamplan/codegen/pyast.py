"""The pieces of a generated module as ``ast`` nodes, each checked as it is made.

Codegen never splices text into code: it builds the module as an ``ast`` tree with these
constructors and ``render`` writes that tree. Every identifier goes through ``identifier``
(one Python reads back unchanged and that is not a keyword); every literal through
``literal`` (None, bools, ints, floats, strings, and lists or tuples of them); torch's
dtypes, layouts and memory formats through ``torch_constant`` (names on a fixed list); an
op through ``op_function`` (a ``torch.ops`` namespace, name and overload: ``ir.opname``).
Anything else raises ``Unwritable`` saying what it was given; the caller names the node
and the field it came from.
"""

from __future__ import annotations

import ast
import keyword
import math
import unicodedata
from collections.abc import Sequence
from typing import Any

from streamplan.frontends.argcodec import TORCH_CONSTANTS
from streamplan.ir.opname import split_op

MAX_DEPTH = 16  # nesting of list literals: a real op argument has two or three levels


class Unwritable(ValueError):
    """A piece of a graph that cannot be written as Python (the message says which)."""


def shown(x: Any, limit: int = 60) -> str:
    """``repr(x)`` cut to ``limit`` characters: how a rejected piece is quoted in messages."""
    text = repr(x)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_identifier(text: Any) -> bool:
    """True when ``text`` can name a variable, argument, attribute or keyword argument:
    an identifier that is no keyword and that Python reads back as itself (NFKC-stable)."""
    return (
        isinstance(text, str)
        and text.isidentifier()
        and not keyword.iskeyword(text)
        and unicodedata.normalize("NFKC", text) == text
    )


def identifier(text: Any) -> str:
    """``text`` when ``is_identifier``; ``Unwritable`` otherwise."""
    if not is_identifier(text):
        raise Unwritable(f"{shown(text)} is not a Python identifier")
    return text


def name(text: str) -> ast.Name:
    return ast.Name(id=identifier(text), ctx=ast.Load())


def store(text: str) -> ast.Name:
    return ast.Name(id=identifier(text), ctx=ast.Store())


def attr(value: ast.expr | str, *names: str) -> ast.expr:
    """``value.a.b...``; a string ``value`` is a name."""
    node = name(value) if isinstance(value, str) else value
    for n in names:
        node = ast.Attribute(value=node, attr=identifier(n), ctx=ast.Load())
    return node


def call(
    func: ast.expr | str, args: Sequence[ast.expr] = (), keywords: Sequence[ast.keyword] = ()
) -> ast.Call:
    """``func(args..., keywords...)``; a dotted string ``func`` is an attribute chain."""
    if isinstance(func, str):
        head, *rest = func.split(".")
        func = attr(head, *rest)
    return ast.Call(func=func, args=list(args), keywords=list(keywords))


def keyword_arg(key: Any, value: ast.expr) -> ast.keyword:
    """``key=value`` in a call (never ``**mapping``)."""
    return ast.keyword(arg=identifier(key), value=value)


def subscript(value: ast.expr, index: ast.expr) -> ast.Subscript:
    return ast.Subscript(value=value, slice=index, ctx=ast.Load())


def literal(x: Any, depth: int = 0) -> ast.expr:
    """A plain value as an expression: None, bool, int, float (NaN and infinities as
    ``float("nan")``...), str, and lists or tuples of these. Negative numbers are ``-`` applied
    to a positive constant, as Python parses them."""
    if depth > MAX_DEPTH:
        raise Unwritable(f"a value nested more than {MAX_DEPTH} levels deep")
    if x is None or isinstance(x, (bool, str)):
        return ast.Constant(value=x)
    if isinstance(x, int):
        return _negated(ast.Constant(value=-x)) if x < 0 else ast.Constant(value=x)
    if isinstance(x, float):
        if math.isnan(x):
            return call("float", [ast.Constant(value="nan")])
        if math.isinf(x):
            inf = call("float", [ast.Constant(value="inf")])
            return inf if x > 0 else _negated(inf)
        return _negated(ast.Constant(value=-x)) if math.copysign(1.0, x) < 0 else ast.Constant(value=x)
    if isinstance(x, list):
        return ast.List(elts=[literal(v, depth + 1) for v in x], ctx=ast.Load())
    if isinstance(x, tuple):
        return ast.Tuple(elts=[literal(v, depth + 1) for v in x], ctx=ast.Load())
    raise Unwritable(f"a {type(x).__name__} ({shown(x, 40)}) cannot be written as a literal")


def _negated(node: ast.expr) -> ast.expr:
    return ast.UnaryOp(op=ast.USub(), operand=node)


def torch_constant(tag: str, value: Any) -> ast.expr:
    """``torch.<value>`` for a dtype, layout or memory format (``tag`` is its argcodec tag,
    e.g. ``"$dtype"``); only the names torch gives these objects are accepted."""
    allowed = TORCH_CONSTANTS[tag]
    if not isinstance(value, str) or value not in allowed:
        raise Unwritable(f"{shown(value)} is not a torch {tag.lstrip('$').replace('_', ' ')}")
    return attr("torch", value)


def op_function(op: Any) -> ast.expr:
    """The callable of an op name (``ir.opname.split_op``): ``aten.add.Tensor`` -> ``aten.add.Tensor``,
    ``ns.name[.overload]`` -> ``torch.ops.ns.name.overload`` (``default`` when not given)."""
    try:
        ns, op_name, overload = split_op(op)
    except ValueError as e:
        raise Unwritable(str(e)) from None
    return attr("aten", op_name, overload) if ns == "aten" else attr("torch", "ops", ns, op_name, overload)
