"""``SweepRow``: one job's result, written as one line of JSON.

A row is the job's axes, the name of the graph it analysed, the fields of a ``compare
--json`` row (``PolicyRow.to_dict()``: streams, events, makespan, speedup, search time,
every memory figure), the error if the job failed, how many times it ran, and the
sweep's settings. The compare fields are kept as ``PolicyRow`` wrote them, so a
field the comparison gains appears in sweep rows without a change here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streamplan.errors import FileFormatError
from streamplan.ir.frozen import FrozenDict, freeze
from streamplan.sweep.spec import AXIS_NAMES, Job, SweepSettings

# fields that vary from run to run of the same job (left out when rows are compared)
TIMING_FIELDS = ("search_time_s", "elapsed_s")
_META = ("graph", "error", "attempts", "elapsed_s", "settings")


@dataclass(frozen=True)
class SweepRow:
    """One job's row. ``fields`` holds the compare row's fields (the axes excepted)."""

    job: Job
    settings: SweepSettings
    fields: Mapping[str, Any] = field(default_factory=FrozenDict)
    graph: str | None = None
    error: str | None = None
    attempts: int = 1
    elapsed_s: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.fields, FrozenDict):
            object.__setattr__(self, "fields", _freeze(self.fields))

    @property
    def key(self) -> tuple[Any, ...]:
        return self.job.key()

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def makespan_ms(self) -> float | None:
        return self.fields.get("makespan_ms")

    @property
    def speedup(self) -> float | None:
        """Over the sequential schedule of the same graph on the same device."""
        return self.fields.get("speedup")

    @property
    def search_time_s(self) -> float | None:
        return self.fields.get("search_time_s")

    def memory_figure(self, *path: str) -> Any:
        """A memory figure by its path in the compare row: ``memory_figure("host_order_peak_bytes")``,
        ``memory_figure("worst_case_peak_bytes", "upper")``; None when absent."""
        node: Any = self.fields.get("memory")
        for part in path:
            if not isinstance(node, Mapping):
                return None
            node = node.get(part)
        return node

    @property
    def worst_case_peak_bytes(self) -> int | None:
        """The worst-case peak over all timings (its proven upper bound when not exact)."""
        return self.memory_figure("worst_case_peak_bytes", "upper")

    @property
    def host_order_peak_bytes(self) -> int | None:
        return self.memory_figure("host_order_peak_bytes")

    def to_dict(self) -> dict[str, Any]:
        """The row as written: axes, graph, compare fields, error, attempts, time, settings."""
        return {
            **self.job.to_dict(),
            "graph": self.graph,
            **_thaw(self.fields),
            "error": self.error,
            "attempts": self.attempts,
            "elapsed_s": self.elapsed_s,
            "settings": self.settings.to_dict(),
        }

    def comparable(self) -> dict[str, Any]:
        """``to_dict()`` without the fields that vary between runs (timings)."""
        return {k: v for k, v in self.to_dict().items() if k not in TIMING_FIELDS}

    @staticmethod
    def from_dict(d: Mapping[str, Any], *, where: str = "<row>") -> SweepRow:
        """A row read back from its JSON; something that is not a sweep row raises ``FileFormatError``."""
        if not isinstance(d, Mapping) or "model" not in d or "settings" not in d:
            raise FileFormatError(
                "not a sweep row (a JSON object with the axes, the compare fields and 'settings')",
                where=where,
            )
        try:
            job = Job.from_dict(d)
            settings = SweepSettings.from_dict(d["settings"] or {}, where=where)
        except (TypeError, ValueError) as e:
            raise FileFormatError(f"not a sweep row: {e}", where=where) from None
        fields = {k: v for k, v in d.items() if k not in AXIS_NAMES and k not in _META}
        return SweepRow(
            job=job,
            settings=settings,
            fields=fields,
            graph=d.get("graph"),
            error=d.get("error"),
            attempts=int(d.get("attempts") or 1),
            elapsed_s=float(d.get("elapsed_s") or 0.0),
        )

    @staticmethod
    def from_compare(
        job: Job, settings: SweepSettings, compare_row: Mapping[str, Any], *, graph: str, elapsed_s: float
    ) -> SweepRow:
        """The row of a ``PolicyRow.to_dict()`` (its ``error``, if any, becomes the row's)."""
        fields = {k: v for k, v in compare_row.items() if k not in AXIS_NAMES and k != "error"}
        return SweepRow(
            job=job,
            settings=settings,
            fields=strict(fields),
            graph=graph,
            error=compare_row.get("error"),
            elapsed_s=elapsed_s,
        )

    @staticmethod
    def failed(
        job: Job, settings: SweepSettings, error: str, *, attempts: int = 1, elapsed_s: float = 0.0
    ) -> SweepRow:
        """A job that produced no figures: its compare fields are those of a failed compare row."""
        from streamplan.app.analysis import PolicyRow

        blank = PolicyRow(policy=job.policy, error=error).to_dict()
        fields = {k: v for k, v in blank.items() if k not in AXIS_NAMES and k != "error"}
        return SweepRow(job, settings, fields, None, error, attempts, elapsed_s)


def strict(o: Any) -> Any:
    """``o`` with non-finite floats as None, so that it is strict JSON."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, Mapping):
        return {str(k): strict(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [strict(v) for v in o]
    return o


def _freeze(o: Any) -> Any:
    if isinstance(o, Mapping):
        return freeze({k: _freeze(v) for k, v in o.items()})
    if isinstance(o, list):
        return tuple(_freeze(v) for v in o)
    return o


def _thaw(o: Any) -> Any:
    if isinstance(o, Mapping):
        return {k: _thaw(v) for k, v in o.items()}
    if isinstance(o, tuple):
        return [_thaw(v) for v in o]
    return o


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted columns (``memory.worst_case_peak_bytes.upper``), for tables."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        name = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, name + "."))
        elif isinstance(v, (list, tuple)):
            import json

            out[name] = json.dumps(list(v))
        else:
            out[name] = v
    return out
