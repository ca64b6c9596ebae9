"""``Timeline``: what the simulator predicts (per-op spans per stream, makespan)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streamplan.ir.frozen import FrozenDict, deep_freeze, freeze


@dataclass(frozen=True, slots=True)
class OpSpan:
    """One op on the simulated timeline; times in milliseconds from the first launch."""

    op: str
    stream: int
    launch_ms: float  # when the host issued it
    start_ms: float  # when the device started it
    end_ms: float


@dataclass(frozen=True)
class Timeline:
    """Per-op spans (in launch order), makespan and per-stream busy time."""

    spans: tuple[OpSpan, ...]
    makespan_ms: float
    stream_busy_ms: Mapping[int, float]
    device: str = ""
    meta: Mapping[str, Any] = field(default_factory=FrozenDict)

    def __post_init__(self) -> None:
        # read-only, so that a timeline is a value (results holding one can be hashed)
        object.__setattr__(self, "spans", tuple(self.spans))
        object.__setattr__(self, "stream_busy_ms", freeze(self.stream_busy_ms))
        object.__setattr__(self, "meta", deep_freeze(self.meta))

    def span(self, op: str) -> OpSpan:
        for s in self.spans:
            if s.op == op:
                return s
        raise KeyError(op)

    def by_op(self) -> dict[str, OpSpan]:
        return {s.op: s for s in self.spans}
