"""Which storages a memory figure counts: the one type every analysis and budget takes.

Activations (every storage an op creates) always count. Graph inputs and the model's
parameters, buffers and constants belong to the caller: counted when asked, as storages
*resident* for the whole run (live before the first op and after the last).
"""

from __future__ import annotations

from dataclasses import dataclass

PARAM_KINDS = ("param", "buffer", "constant")


@dataclass(frozen=True, slots=True)
class Includes:
    """Which storages a memory figure counts besides activations: graph ``inputs``, ``params``
    (parameters, buffers and constants)."""

    inputs: bool = False
    params: bool = False

    def describe(self) -> str:
        parts = ["activations"]
        if self.inputs:
            parts.append("inputs")
        if self.params:
            parts.append("params/buffers/constants")
        return " + ".join(parts)

    def to_dict(self) -> dict[str, bool]:
        return {"activations": True, "inputs": self.inputs, "params": self.params}


ACTIVATIONS = Includes()
EVERYTHING = Includes(inputs=True, params=True)
