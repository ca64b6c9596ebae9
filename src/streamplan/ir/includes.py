"""Which storages a memory figure counts: the one type every analysis and budget takes.

Activations (every storage an op creates) always count. Graph inputs and the model's
parameters, buffers and constants belong to the caller: counted when asked, as storages
*resident* for the whole run (live before the first op and after the last).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PARAM_KINDS = ("param", "buffer", "constant")


@dataclass(frozen=True, slots=True)
class Includes:
    """Which storages a memory figure counts besides activations: graph ``inputs``, ``params``
    (parameters, buffers and constants)."""

    inputs: bool = False
    params: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", bool(self.inputs))
        object.__setattr__(self, "params", bool(self.params))

    def counts(self, kind: str) -> bool:
        """Whether a storage of ``kind`` (``activation``, ``input``, ``param``...) is counted."""
        if kind == "activation":
            return True
        if kind == "input":
            return self.inputs
        return self.params and kind in PARAM_KINDS

    def describe(self) -> str:
        """``activations + inputs + params/buffers/constants`` (what is counted, in words)."""
        parts = ["activations"]
        if self.inputs:
            parts.append("inputs")
        if self.params:
            parts.append("params/buffers/constants")
        return " + ".join(parts)

    def brief(self, sep: str = " + ") -> str:
        """``activations + inputs + params``: the form of table titles (``sep="+"`` for allocator lines)."""
        return sep.join(["activations"] + ["inputs"] * self.inputs + ["params"] * self.params)

    def to_dict(self) -> dict[str, bool]:
        return {"activations": True, "inputs": self.inputs, "params": self.params}

    def flags(self) -> dict[str, bool]:
        """The two flags under the names the JSON outputs and sweep files have always used."""
        return {"include_inputs": self.inputs, "include_params": self.params}

    @staticmethod
    def from_flags(data: Any) -> Includes:
        """The ``flags()`` form read back (absent flags are False)."""
        return Includes(bool(data.get("include_inputs", False)), bool(data.get("include_params", False)))


ACTIVATIONS = Includes()
EVERYTHING = Includes(inputs=True, params=True)
