"""Every unsupported construct a frontend meets, collected and raised as one error at the end
(so the user sees all of them at once, not the first only)."""

from __future__ import annotations

from dataclasses import dataclass, field

from streamplan.errors import UnsupportedError

SHOWN_NODES = 5


@dataclass
class Problems:
    """Every distinct unsupported construct met, with the nodes where it occurs.

    ``action`` names what failed in the message (``capture``, ``import``); ``hint`` is the
    error's hint.
    """

    model: str
    action: str = "capture"
    hint: str = "fix or replace each construct listed above, then capture again"
    items: dict[str, tuple[list[str], str]] = field(default_factory=dict)

    def add(self, what: str, node: str, todo: str) -> None:
        nodes, _ = self.items.setdefault(what, ([], todo))
        if node not in nodes:
            nodes.append(node)

    def raise_if_any(self) -> None:
        if not self.items:
            return
        lines = []
        for what, (nodes, todo) in self.items.items():
            shown = ", ".join(nodes[:SHOWN_NODES])
            if len(nodes) > SHOWN_NODES:
                shown += f" and {len(nodes) - SHOWN_NODES} more"
            lines.append(f"  - {what} (at {shown}): {todo}")
        count = len(self.items)
        raise UnsupportedError(
            f"cannot {self.action}: {count} unsupported construct{'s' if count > 1 else ''}\n"
            + "\n".join(lines),
            where=self.model,
            hint=self.hint,
        )
