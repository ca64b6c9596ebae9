"""FSDP's wrapping units: which parameters are gathered, freed and reduced together.

Units are read from the parameters' ``state_dict`` names (``Graph.param_names``), so they
follow the module tree without the module:

- ``children``: each top-level child holding parameters (a ResNet's stages ``layer1`` ..
  ``layer4``; its stem and head alone); a child holding every parameter (a ``model``
  wrapper) is replaced by its own children;
- ``auto`` (default): as ``children``, then any unit holding more than half of the
  parameter bytes is split into its children, again and again (a transformer's layer
  list becomes one unit per layer; ResNet-50's last stage one unit per block), as a
  size-based wrapping policy would.

Units holding less than ``ROOT_FRACTION`` of the bytes (norms, biases at the top) join the
*root* unit, named ``root``, as FSDP's root module keeps what no wrapped child holds.
"""

from __future__ import annotations

from collections.abc import Mapping

ROOT = "root"
ROOT_FRACTION = 0.01


def wrapping_units(param_bytes: Mapping[str, int], rule: str = "auto") -> dict[str, str]:
    """Each parameter's unit (``name -> unit prefix``) for ``param_bytes`` (``state_dict`` name
    -> bytes), by ``rule`` (``auto`` or ``children``)."""
    total = sum(param_bytes.values()) or 1
    names = list(param_bytes)

    def size(prefix: str) -> int:
        return sum(b for n, b in param_bytes.items() if _under(n, prefix))

    def children(prefix: str) -> list[str]:
        out: dict[str, None] = {}
        for n in names:
            if _under(n, prefix) and n != prefix:
                rest = n[len(prefix) + 1 :] if prefix else n
                head = rest.split(".", 1)[0]
                out[f"{prefix}.{head}" if prefix else head] = None
        return list(out)

    units = children("")
    while len(units) == 1 and children(units[0]) and units[0] not in param_bytes:
        units = children(units[0])  # a wrapper holding everything: look inside
    if rule == "auto":
        changed = True
        while changed:
            changed = False
            for u in list(units):
                kids = children(u)
                if size(u) > total / 2 and len(kids) > 1:
                    at = units.index(u)
                    units[at : at + 1] = kids
                    changed = True
                    break
    out: dict[str, str] = {}
    for n in names:
        unit = next((u for u in units if _under(n, u)), ROOT)
        out[n] = unit if size(unit) >= ROOT_FRACTION * total else ROOT
    return out


def _under(name: str, prefix: str) -> bool:
    return not prefix or name == prefix or name.startswith(prefix + ".")
