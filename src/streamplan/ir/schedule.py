"""``StreamSchedule``: a multi-stream schedule as plain, immutable data.

The single host thread launches every op once, in ``launch_order``, onto
``streams[op]``. A ``Wait(after=u, before=v)`` means: record an event on u's
stream right after u is launched, and make v's stream wait for it before v runs.
Nothing else orders the device (see ``docs/schedules.md``).

``structure_problems`` is the one structural check of a schedule against a graph
(every op launched once, on a stream, waits naming earlier launches); the
simulator, the memory analyses and the runtime call ``check_structure``. Whether
the waits order every dependency is the verifier's question
(``streamplan.schedule.verify``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamplan.errors import FileFormatError, ScheduleError
from streamplan.ir.frozen import FrozenDict, freeze
from streamplan.ir.graph import Graph

SCHEMA = "streamplan.schedule"


@dataclass(frozen=True, slots=True)
class Wait:
    """v (``before``) may not start until u (``after``) has finished on its stream."""

    after: str
    before: str


@dataclass(frozen=True)
class StreamSchedule:
    """Host launch order, the stream of each op, and the cross-stream waits.

    ``streams`` and ``meta`` are read-only mappings; edits return a new schedule
    (``replace``). Equality and hashing ignore ``meta`` (how it was found is not what it is).
    """

    launch_order: tuple[str, ...]
    streams: Mapping[str, int]
    waits: tuple[Wait, ...] = ()
    policy: str = "custom"
    meta: Mapping[str, Any] = field(default_factory=FrozenDict, compare=False)  # search_time_s, stages...

    def __post_init__(self) -> None:
        if not isinstance(self.launch_order, tuple):
            object.__setattr__(self, "launch_order", tuple(self.launch_order))
        if not isinstance(self.waits, tuple):
            object.__setattr__(self, "waits", tuple(self.waits))
        object.__setattr__(self, "streams", freeze(self.streams))
        object.__setattr__(self, "meta", freeze(self.meta))

    def __hash__(self) -> int:
        return hash((self.launch_order, tuple(self.streams.get(op) for op in self.launch_order), self.waits))

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
        return dataclasses.replace(self, **changes)

    def with_meta(self, **entries: Any) -> StreamSchedule:
        """A copy with ``meta`` entries added or replaced."""
        return self.replace(meta={**self.meta, **entries})

    # -- JSON ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "version": 1,
            "policy": self.policy,
            "launch_order": list(self.launch_order),
            "streams": dict(self.streams),
            "waits": [{"after": w.after, "before": w.before} for w in self.waits],
            "meta": dict(self.meta),
        }

    @staticmethod
    def from_dict(data: Any, *, source: str = "<dict>") -> StreamSchedule:
        """A schedule from its JSON form; ``schema`` may be left out (a hand-written schedule),
        but a file marked as something else (a graph) is refused as what it is."""
        _check_schema(data, source)
        try:
            if not isinstance(data, dict):
                raise TypeError("top level is not an object")
            streams = data["streams"]
            if not isinstance(streams, dict):
                raise TypeError('"streams" is not an object')
            meta = data.get("meta", {})
            if not isinstance(meta, dict):
                raise TypeError('"meta" is not an object')
            return StreamSchedule(
                launch_order=tuple(_text(x) for x in _items(data["launch_order"], "launch_order")),
                streams={_text(k): _stream(v) for k, v in streams.items()},
                waits=tuple(
                    Wait(_text(w["after"]), _text(w["before"]))
                    for w in _items(data.get("waits", ()), "waits")
                ),
                policy=_text(data.get("policy", "custom")),
                meta=meta,
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
        from streamplan.files import read_json

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


def _items(x: Any, name: str) -> list[Any]:
    if not isinstance(x, (list, tuple)):
        raise TypeError(f'"{name}" is not a list')
    return list(x)


def _text(x: Any) -> str:
    if not isinstance(x, str):
        raise TypeError(f"expected a string, got {type(x).__name__} {x!r:.40}")
    return x


def _stream(x: Any) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or x < 0:
        raise ValueError(f"a stream is an int >= 0, got {x!r:.40}")
    return x


# -- the one structural check ------------------------------------------------
MAX_REPORTED = 20


def structure_problems(graph: Graph, schedule: StreamSchedule) -> list[str]:
    """Everything structurally wrong with ``schedule`` for ``graph`` (empty when sound).

    Sound means: every graph op is launched exactly once and nothing else is; every
    launched op has a stream (an int >= 0); every wait names two launched ops and
    waits for one launched earlier (an event not yet recorded never fires: deadlock).
    """
    problems: list[str] = []
    index: dict[str, int] = {}
    for i, op in enumerate(schedule.launch_order):
        if not graph.has_node(op):
            problems.append(f"{op} is launched but is not an op of graph {graph.name}")
        elif op in index:
            problems.append(f"{op} is launched more than once")
        index.setdefault(op, i)
    missing = [op for op in graph.node_ids if op not in index]
    if missing:
        head = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
        problems.append(f"{len(missing)} op(s) never launched: {head}")
    for op in graph.node_ids:
        if op in index and op not in schedule.streams:
            problems.append(f"{op} has no stream")
    for op, s in schedule.streams.items():
        if not isinstance(s, int) or isinstance(s, bool) or s < 0:
            problems.append(f"{op} is on stream {s!r}; streams are ints >= 0")
        elif op not in index:
            problems.append(f"{op} has a stream but is never launched")
    for w in schedule.waits:
        unknown = [end for end in (w.after, w.before) if end not in index]
        if unknown:
            problems.append(f"wait {w.after} -> {w.before} refers to {unknown[0]}, which is not launched")
        elif index[w.after] >= index[w.before]:
            problems.append(
                f"{w.before} waits for {w.after}, which is launched later: its event is not "
                f"recorded yet when {w.before} is launched (deadlock)"
            )
    return problems


def check_structure(graph: Graph, schedule: StreamSchedule) -> None:
    """Raise ``ScheduleError`` when ``structure_problems`` finds anything."""
    problems = structure_problems(graph, schedule)
    if problems:
        raise schedule_error(problems, graph, schedule)


def schedule_error(problems: list[str], graph: Graph, schedule: StreamSchedule) -> ScheduleError:
    """One error for a list of problems, the first ``MAX_REPORTED`` of them spelled out."""
    shown = problems[:MAX_REPORTED]
    more = f" (and {len(problems) - len(shown)} more)" if len(problems) > len(shown) else ""
    return ScheduleError(
        "; ".join(shown) + more,
        where=f"schedule {schedule.policy} of {graph.name}",
        hint="regenerate it with `streamplan schedule`, or add the missing waits",
    )


def _check_schema(data: Any, source: str) -> None:
    if not isinstance(data, dict) or "schema" not in data:
        return
    schema, version = data.get("schema"), data.get("version", 1)
    if schema == "streamplan.graph":
        raise FileFormatError(
            "this is a graph file, not a schedule",
            where=source,
            hint="give the graph as the model, and a schedule made by `streamplan schedule MODEL -o FILE`",
        )
    if schema != SCHEMA:
        raise FileFormatError(
            f'not a streamplan schedule: its "schema" is {schema!r}, not "{SCHEMA}"',
            where=source,
            hint="save schedules with `streamplan schedule MODEL -o FILE`",
        )
    if version != 1:
        raise FileFormatError(
            f"schedule schema version {version!r} is not supported (this streamplan reads 1)", where=source
        )
