"""What an op name in a graph may be: ``namespace.name[.overload]`` of a ``torch.ops`` namespace.

A node's ``op`` comes from a file the user may have been given, and both the runtime
(``torch.ops.<ns>.<name>.<overload>``) and codegen (the same chain written as Python)
follow it attribute by attribute. ``split_op`` is the one check both use: three
identifiers, a namespace that is not one of ``torch.ops``' own attributes (``load_library``
and ``import_module`` load code), no dunder name but the operator ops ATen defines
(``__and__``...), and no overload starting with an underscore (``__call__`` would make a
call of whatever the first two parts name). The runtime then also requires the object it
finds to be a real ``OpOverload``.
"""

from __future__ import annotations

import keyword

# the attributes of torch.ops that are not op namespaces (a test compares them with torch's)
NOT_NAMESPACES = frozenset({"_dir", "higher_order", "import_module", "load_library", "loaded_libraries"})
# ATen's ops whose names are Python's operator methods
DUNDER_OPS = frozenset(
    {"__and__", "__iand__", "__ilshift__", "__ior__", "__irshift__", "__ixor__", "__lshift__", "__or__",
     "__rshift__", "__xor__"}
)  # fmt: skip
PYTHON_OPS = ("getitem", "operator.getitem", "_operator.getitem")  # indexing, not a torch op


def split_op(op: object) -> tuple[str, str, str]:
    """``(namespace, name, overload)`` of ``op`` (overload ``default`` when not given);
    ``ValueError`` saying why when ``op`` is not the name of a ``torch.ops`` overload."""
    parts = op.split(".") if isinstance(op, str) else []
    if len(parts) == 2:
        parts.append("default")
    shown = repr(op) if len(repr(op)) <= 60 else repr(op)[:57] + "..."
    if len(parts) != 3 or not all(
        p.isascii() and p.isidentifier() and not keyword.iskeyword(p) for p in parts
    ):
        raise ValueError(f"{shown} is not namespace.name[.overload] made of identifiers")
    ns, name, overload = parts
    if ns.startswith("__") or ns in NOT_NAMESPACES:
        raise ValueError(f"{shown}: {ns!r} is not an op namespace of torch.ops")
    if name.startswith("__") and name not in DUNDER_OPS:
        raise ValueError(f"{shown}: {name!r} is not an op name")
    if overload.startswith("_"):
        raise ValueError(f"{shown}: {overload!r} is not an overload name")
    return ns, name, overload
