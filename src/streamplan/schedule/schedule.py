"""``StreamSchedule``: a multi-stream schedule as plain data (DESIGN §3).

The single host thread launches every op once, in ``launch_order``, onto
``streams[op]``. A ``Wait(after=u, before=v)`` means: record an event on u's
stream right after u is launched, and make v's stream wait for it before v runs.
Nothing else orders the device.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamplan.errors import FileFormatError


@dataclass(frozen=True, slots=True)
class Wait:
    """v (``before``) may not start until u (``after``) has finished on its stream."""

    after: str
    before: str


@dataclass(frozen=True)
class StreamSchedule:
    """Host launch order, the stream of each op, and the cross-stream waits."""

    launch_order: tuple[str, ...]
    streams: dict[str, int]
    waits: tuple[Wait, ...] = ()
    policy: str = "custom"
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. search_time_s, stages

    def __post_init__(self) -> None:
        if not isinstance(self.launch_order, tuple):
            object.__setattr__(self, "launch_order", tuple(self.launch_order))
        if not isinstance(self.waits, tuple):
            object.__setattr__(self, "waits", tuple(self.waits))

    @property
    def num_streams(self) -> int:
        """Number of distinct streams used."""
        return len(set(self.streams.values()))

    @property
    def num_events(self) -> int:
        """Number of events recorded: one per distinct op that some wait refers to."""
        return len({w.after for w in self.waits})

    @property
    def num_waits(self) -> int:
        return len(self.waits)

    def ops_on_stream(self, stream: int) -> tuple[str, ...]:
        return tuple(op for op in self.launch_order if self.streams[op] == stream)

    def waits_before(self) -> dict[str, tuple[str, ...]]:
        """For each op, the ops whose events it waits for."""
        out: dict[str, list[str]] = {}
        for w in self.waits:
            out.setdefault(w.before, []).append(w.after)
        return {k: tuple(v) for k, v in out.items()}

    def replace(self, **changes: Any) -> StreamSchedule:
        import dataclasses

        return dataclasses.replace(self, **changes)

    # -- JSON ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "streamplan.schedule",
            "version": 1,
            "policy": self.policy,
            "launch_order": list(self.launch_order),
            "streams": dict(self.streams),
            "waits": [{"after": w.after, "before": w.before} for w in self.waits],
            "meta": self.meta,
        }

    @staticmethod
    def from_dict(data: Any, *, source: str = "<dict>") -> StreamSchedule:
        try:
            if not isinstance(data, dict):
                raise TypeError("top level is not an object")
            return StreamSchedule(
                launch_order=tuple(str(x) for x in data["launch_order"]),
                streams={str(k): int(v) for k, v in data["streams"].items()},
                waits=tuple(Wait(str(w["after"]), str(w["before"])) for w in data.get("waits", ())),
                policy=str(data.get("policy", "custom")),
                meta=dict(data.get("meta", {})),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise FileFormatError(
                f"malformed schedule JSON ({type(e).__name__}: {e})",
                where=source,
                hint='a schedule has "launch_order", "streams" and "waits" (see `streamplan schedule -o`)',
            ) from None

    def dumps(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.dumps())

    @staticmethod
    def load(path: str | Path) -> StreamSchedule:
        from streamplan.jsonfile import read_json

        return StreamSchedule.from_dict(read_json(path), source=str(path))

    def __str__(self) -> str:
        """One line per launch: ``op @sN`` with the events it waits for."""
        index = {op: i for i, op in enumerate(self.launch_order)}
        events: dict[str, int] = {}
        for w in sorted(self.waits, key=lambda w: index.get(w.after, 0)):
            events.setdefault(w.after, len(events))
        waits = self.waits_before()
        lines = [f"schedule {self.policy}: {self.num_streams} streams, {self.num_events} events"]
        for op in self.launch_order:
            ws = "".join(f" wait(e{events[u]})" for u in waits.get(op, ()))
            rec = f" record(e{events[op]})" if op in events else ""
            lines.append(f"  @s{self.streams[op]}{ws} {op}{rec}")
        return "\n".join(lines)
