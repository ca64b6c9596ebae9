"""Python source for generated modules: literals, identifiers, and lines laid out as ruff formats them.

A generated file must pass ``ruff format --check`` unchanged, so calls and
collections are laid out the way ruff (like Black) lays them out at the default
line length of 88: on one line when it fits; otherwise split at the outermost
bracket with the contents on one indented line when that fits; otherwise one item
per line with a trailing comma (a sole item is split inside its own brackets, with
no comma added). Expressions are a small tree (``Atom``, ``Call``, ``Seq``,
``Keyword``) so that the layout can recurse into any argument; ``render`` makes that tree
from a module's ``ast`` nodes.
"""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

LINE_LENGTH = 88
INDENT = "    "


@dataclass(frozen=True, slots=True)
class Atom:
    """Source text that is never split (a name, a number, a string)."""

    text: str


@dataclass(frozen=True, slots=True)
class Keyword:
    """``name=value`` inside a call."""

    name: str
    value: Expr


@dataclass(frozen=True, slots=True)
class Call:
    """``func(args...)``; ``func`` is dotted source text."""

    func: str
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Seq:
    """A list (``[`` ``]``) or tuple (``(`` ``)``) display."""

    open: str
    items: tuple[Expr, ...]

    @property
    def close(self) -> str:
        return {"[": "]", "(": ")", "{": "}"}[self.open]


Expr = Atom | Keyword | Call | Seq


def flat(e: Expr) -> str:
    """``e`` on one line."""
    if isinstance(e, Atom):
        return e.text
    if isinstance(e, Keyword):
        return f"{e.name}={flat(e.value)}"
    if isinstance(e, Call):
        return f"{e.func}({', '.join(flat(a) for a in e.args)})"
    inner = ", ".join(flat(i) for i in e.items)
    if e.open == "(" and len(e.items) == 1:
        inner += ","
    return f"{e.open}{inner}{e.close}"


def layout(e: Expr, *, indent: int, prefix: str = "", suffix: str = "") -> list[str]:
    """Lines (indented ``indent`` levels) for ``prefix + e + suffix``, as ruff would format them."""
    pad = INDENT * indent
    line = pad + prefix + flat(e) + suffix
    if len(line) <= LINE_LENGTH:
        return [line]
    if isinstance(e, Keyword):
        return layout(e.value, indent=indent, prefix=f"{prefix}{e.name}=", suffix=suffix)
    if isinstance(e, Atom):
        return [line]  # cannot be split; kept rare by short names
    opener, items, closer = (e.func + "(", e.args, ")") if isinstance(e, Call) else (e.open, e.items, e.close)
    if not items:
        return [line]
    head = pad + prefix + opener
    tail = pad + closer + suffix
    one_tuple = isinstance(e, Seq) and e.open == "(" and len(items) == 1
    body = INDENT * (indent + 1) + ", ".join(flat(i) for i in items) + ("," if one_tuple else "")
    if len(body) <= LINE_LENGTH:
        return [head, body, tail]
    if len(items) == 1 and not one_tuple:
        return [head, *layout(items[0], indent=indent + 1), tail]
    lines = [head]
    for item in items:
        lines.extend(layout(item, indent=indent + 1, suffix=","))
    lines.append(tail)
    return lines


def statement(e: Expr, *, indent: int, target: str | None = None) -> list[str]:
    """``target = e`` (or ``e`` alone) laid out as ruff would."""
    return layout(e, indent=indent, prefix=f"{target} = " if target else "")


def exploded(open_: str, items: Sequence[Expr], *, indent: int, prefix: str = "") -> list[str]:
    """A collection written one item per line with a trailing comma (kept so by ruff: the
    trailing comma is "magic"), e.g. a table of weights. A one-item tuple is laid out as any
    expression: its comma is syntax, not magic, and ruff joins it onto one line."""
    pad = INDENT * indent
    closer = Seq(open_, ()).close
    if not items:
        return [pad + prefix + open_ + closer]
    if open_ == "(" and len(items) == 1:
        return layout(Seq(open_, tuple(items)), indent=indent, prefix=prefix)
    lines = [pad + prefix + open_]
    for item in items:
        lines.extend(layout(item, indent=indent + 1, suffix=","))
    lines.append(pad + closer)
    return lines


# -- literals -----------------------------------------------------------------


def py_str(text: str) -> str:
    """A string literal that reads back as ``text``: double quotes unless the text holds more
    double than single quotes (ruff's choice), and every character that is not printable
    (controls, line and paragraph separators, bidirectional overrides, lone surrogates) escaped,
    so that a literal is always one line of plain text whatever the string holds."""
    quote = "'" if text.count('"') > text.count("'") else '"'
    out = [quote]
    for ch in text:
        if ch == "\\" or ch == quote:
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append(quote)
    return "".join(out)


def py_float(x: float) -> str:
    """A float literal that round-trips (infinities and NaN as ``float("...")``)."""
    if math.isnan(x):
        return 'float("nan")'
    if math.isinf(x):
        return 'float("inf")' if x > 0 else '-float("inf")'
    return repr(float(x)).replace("e+", "e")  # ruff writes exponents without "+"


def plain(text: object) -> str:
    """``text`` for a comment or a docstring: each character that is not printable, and each
    backslash or double quote (which could end a docstring or start an escape), becomes "?"."""
    return "".join(ch if ch.isprintable() and ch not in '\\"' else "?" for ch in str(text))


# -- identifiers ----------------------------------------------------------------

_NOT_IDENT = re.compile(r"[^0-9A-Za-z_]")
# names ruff flags as ambiguous (E741), and builtins a generated body must not shadow
_AVOID = {"l", "I", "O", "float", "int", "dict", "tuple", "list", "super", "len", "range", "type", "id"}


class Namer:
    """Gives each key a unique, valid, readable identifier (stable: same keys in, same names out)."""

    def __init__(self, reserved: Iterable[str] = ()):
        self._taken: set[str] = set(reserved)
        self._names: dict[str, str] = {}

    def reserve(self, name: str) -> None:
        self._taken.add(name)

    def __call__(self, key: str, *, base: str | None = None) -> str:
        """The name of ``key`` (made from ``base``, default the key itself, on first use)."""
        found = self._names.get(key)
        if found is not None:
            return found
        base = _NOT_IDENT.sub("_", key if base is None else base).strip("_") or "v"
        if base[0].isdigit():
            base = "v" + base
        if keyword.iskeyword(base) or keyword.issoftkeyword(base) or base in _AVOID:
            base += "_"
        name, k = base, 1
        while name in self._taken:
            name = f"{base}_{k}"
            k += 1
        self._taken.add(name)
        self._names[key] = name
        return name


def class_name(*words: str) -> str:
    """``("seed-example2", "asap")`` -> ``SeedExample2Asap``."""
    parts = [p for w in words for p in re.split(r"[^0-9A-Za-z]+", w) if p]
    name = "".join(p[:1].upper() + p[1:] for p in parts) or "Scheduled"
    return name if not name[0].isdigit() else "Model" + name
