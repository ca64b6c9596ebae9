"""``StreamSchedule``: a multi-stream schedule as plain, immutable data.

The single host thread launches every op once, in ``launch_order``, onto
``streams[op]``. A ``Wait(after=u, before=v)`` means: record an event on u's
stream right after u is launched, and make v's stream wait for it before v runs.
A host wait (``host_waits``, the same pair) makes the *host* block on u's event
before it launches v: every op launched from v on starts after u has finished, and
the host cannot run further ahead of the device (how FSDP's limit on all-gathers in
flight works). Nothing else orders the device (see ``docs/schedules.md``).

``record_stream`` says how the program frees a tensor used on streams other than the
one it was allocated on: with ``record_stream`` (True, PyTorch's default) the caching
allocator holds the block until the using streams' work queued so far is done; without
(False) the program orders the reuse itself with event waits, and the block is reusable
at once (the verifier checks that the waits make that safe).

``structure_problems`` is the one structural check of a schedule against a graph
(every op launched once, on a stream, waits naming earlier launches); the
simulator, the memory analyses and the runtime call ``check_structure``. Whether
the waits order every dependency is the verifier's question
(``streamplan.schedule.verify``).
"""

from __future__ import annotations

import bisect
import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from streamplan.errors import FileFormatError, ScheduleError
from streamplan.ir.frozen import FrozenDict, freeze
from streamplan.ir.graph import Graph

SCHEMA = "streamplan.schedule"


class Fusion(StrEnum):
    """How operator fusion and scheduling combine (``docs/fusion.md``): ``none`` schedules the
    ops as captured; ``first`` fuses them into kernels, then schedules the kernels;
    ``stream-aware`` schedules, then fuses only along each stream's own chains."""

    NONE = "none"
    FIRST = "first"
    STREAM_AWARE = "stream-aware"

    @classmethod
    def parse(cls, value: str | Fusion) -> Fusion:
        """``value`` as a ``Fusion`` (``ScheduleError`` naming the modes when it is none of them)."""
        try:
            return cls(value)
        except ValueError:
            raise ScheduleError(
                f"unknown fusion mode {value!r}", hint=f"use one of {', '.join(m.value for m in cls)}"
            ) from None


@dataclass(frozen=True)
class FusionRecord:
    """How a schedule's kernels were made from the model's ops: the fusion ``mode`` and what
    rebuilds the kernels from the model alone (``streamplan.fusion.transform.refuse``).

    ``groups`` maps each fused kernel's id to the ops it runs (in order); ``folds`` the
    (convolution, batch-norm) pair a kernel folds; ``duplicates`` each op dropped as a repeat
    of an earlier identical op; ``concats_in_place`` the concatenations written in place;
    ``rules`` the fusion rules (``FusionRules.to_dict``).
    """

    mode: Fusion
    groups: Mapping[str, tuple[str, ...]]
    rules: Mapping[str, Any] = field(default_factory=FrozenDict)
    folds: Mapping[str, tuple[str, str]] = field(default_factory=FrozenDict)
    duplicates: Mapping[str, str] = field(default_factory=FrozenDict)
    concats_in_place: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "mode", Fusion.parse(self.mode))
        set_(self, "groups", FrozenDict({str(k): tuple(map(str, v)) for k, v in self.groups.items()}))
        set_(self, "rules", freeze(dict(self.rules)))
        set_(self, "folds", FrozenDict({str(k): (str(v[0]), str(v[1])) for k, v in self.folds.items()}))
        set_(self, "duplicates", FrozenDict({str(k): str(v) for k, v in self.duplicates.items()}))
        set_(self, "concats_in_place", tuple(map(str, self.concats_in_place)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode.value,
            "rules": _thaw(self.rules),
            "duplicates": dict(self.duplicates),
            "groups": {k: list(v) for k, v in self.groups.items()},
            "folds": {k: list(v) for k, v in self.folds.items()},
            "concats_in_place": list(self.concats_in_place),
        }

    @staticmethod
    def from_dict(data: Any, *, source: str = "<dict>") -> FusionRecord:
        """A record as ``to_dict`` wrote it (``ScheduleError`` naming ``source`` when malformed)."""
        try:
            if not isinstance(data, Mapping):
                raise TypeError("the record is not an object")
            return FusionRecord(
                mode=data["mode"],
                groups=dict(data["groups"]),
                rules=dict(data["rules"]),
                folds=dict(data.get("folds", {})),
                duplicates=dict(data.get("duplicates", {})),
                concats_in_place=tuple(data.get("concats_in_place", ())),
            )
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise ScheduleError(f"malformed fusion record ({type(e).__name__}: {e})", where=source) from None


def _thaw(x: Any) -> Any:
    """Plain dicts and lists for JSON (a frozen mapping's values may be frozen too)."""
    if isinstance(x, Mapping):
        return {k: _thaw(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return [_thaw(v) for v in x]
    return x


@dataclass(frozen=True, slots=True)
class Wait:
    """v (``before``) may not start until u (``after``) has finished on its stream."""

    after: str
    before: str


@dataclass(frozen=True)
class StreamSchedule:
    """Host launch order, the stream of each op, the cross-stream waits and the host waits.

    ``fusion`` says which kernels the schedule runs: None for the model's ops as captured,
    else the record that rebuilds its fused kernels from the model (``FusionRecord``); it is
    part of what the schedule is, so it takes part in equality and hashing. ``streams`` and
    ``meta`` are read-only mappings; edits return a new schedule (``replace``). Equality and
    hashing ignore ``meta`` (how it was found is not what it is).
    """

    launch_order: tuple[str, ...]
    streams: Mapping[str, int]
    waits: tuple[Wait, ...] = ()
    policy: str = "custom"
    meta: Mapping[str, Any] = field(default_factory=FrozenDict, compare=False)  # search_time_s, stages...
    host_waits: tuple[Wait, ...] = ()  # the host blocks on ``after``'s event before launching ``before``
    record_stream: bool = True  # cross-stream frees are held until the using streams are done
    fusion: FusionRecord | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.launch_order, tuple):
            object.__setattr__(self, "launch_order", tuple(self.launch_order))
        if not isinstance(self.waits, tuple):
            object.__setattr__(self, "waits", tuple(self.waits))
        if not isinstance(self.host_waits, tuple):
            object.__setattr__(self, "host_waits", tuple(self.host_waits))
        object.__setattr__(self, "record_stream", bool(self.record_stream))
        object.__setattr__(self, "streams", freeze(self.streams))
        object.__setattr__(self, "meta", freeze(self.meta))

    def __hash__(self) -> int:
        streams = tuple(self.streams.get(op) for op in self.launch_order)
        return hash(
            (self.launch_order, streams, self.waits, self.host_waits, self.record_stream, self.fusion)
        )

    @property
    def fusion_mode(self) -> Fusion:
        """How the schedule's kernels were fused (``Fusion.NONE``: it runs the ops as captured)."""
        return Fusion.NONE if self.fusion is None else self.fusion.mode

    @property
    def num_streams(self) -> int:
        """Number of distinct streams used."""
        return len(set(self.streams.values()))

    @property
    def num_events(self) -> int:
        """Number of events recorded: one per distinct op that some wait (or host wait) refers to."""
        return len({w.after for w in (*self.waits, *self.host_waits)})

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

    def host_waits_before(self) -> dict[str, tuple[str, ...]]:
        """For each op, the ops whose events the host waits for before launching it."""
        out: dict[str, list[str]] = {}
        for w in self.host_waits:
            out.setdefault(w.before, []).append(w.after)
        return {k: tuple(v) for k, v in out.items()}

    def ordering_waits(self) -> tuple[Wait, ...]:
        """The device waits with every host wait written as device waits that order the same.

        A host wait for u before launching v orders u before every op launched from v on;
        the first such op of each stream waiting for u says exactly that (later ops of the
        stream follow it). Happens-before of the result equals that of this schedule, so
        analyses that only need the order (liveness, the verifier, the CPU runtime) use it.
        """
        if not self.host_waits:
            return self.waits
        index = {op: i for i, op in enumerate(self.launch_order)}
        by_stream: dict[int, list[int]] = {}
        for i, op in enumerate(self.launch_order):
            by_stream.setdefault(self.streams[op], []).append(i)
        extra: dict[Wait, None] = {}
        for w in self.host_waits:
            if w.after not in index or w.before not in index:
                continue  # structure_problems reports it
            at, u_stream, u_at = index[w.before], self.streams[w.after], index[w.after]
            for stream, positions in by_stream.items():
                k = bisect.bisect_left(positions, at)
                if k == len(positions):
                    continue
                first = positions[k]
                if stream == u_stream and u_at < first:
                    continue  # stream order already puts it after u
                extra[Wait(w.after, self.launch_order[first])] = None
        return tuple(dict.fromkeys((*self.waits, *extra)))

    def replace(self, **changes: Any) -> StreamSchedule:
        return dataclasses.replace(self, **changes)

    def with_meta(self, **entries: Any) -> StreamSchedule:
        """A copy with ``meta`` entries added or replaced."""
        return self.replace(meta={**self.meta, **entries})

    # -- JSON ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "schema": SCHEMA,
            "version": 1,
            "policy": self.policy,
            "launch_order": list(self.launch_order),
            "streams": dict(self.streams),
            "waits": [{"after": w.after, "before": w.before} for w in self.waits],
            # written only when used, so that files of schedules without them stay as they were
            **(
                {"host_waits": [{"after": w.after, "before": w.before} for w in self.host_waits]}
                if self.host_waits
                else {}
            ),
            **({} if self.record_stream else {"record_stream": False}),
        }
        if self.fusion is not None:
            d["fusion"] = self.fusion.to_dict()
        d["meta"] = dict(self.meta)
        return d

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
            record = data.get("fusion")
            if record is None and isinstance(meta.get("fusion"), dict):  # saved before the typed field
                meta = {k: v for k, v in meta.items() if k != "fusion"}
                record = data["meta"]["fusion"]
            return StreamSchedule(
                launch_order=tuple(_text(x) for x in _items(data["launch_order"], "launch_order")),
                streams={_text(k): _stream(v) for k, v in streams.items()},
                waits=tuple(
                    Wait(_text(w["after"]), _text(w["before"]))
                    for w in _items(data.get("waits", ()), "waits")
                ),
                policy=_text(data.get("policy", "custom")),
                meta=meta,
                host_waits=tuple(
                    Wait(_text(w["after"]), _text(w["before"]))
                    for w in _items(data.get("host_waits", ()), "host_waits")
                ),
                record_stream=_flag(data.get("record_stream", True), "record_stream"),
                fusion=None if record is None else FusionRecord.from_dict(record, source=source),
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
        """One line per launch: ``op @sN`` with the events it waits for (``host-wait``: the host
        blocks on the event before launching it)."""
        index = {op: i for i, op in enumerate(self.launch_order)}
        events: dict[str, int] = {}
        for w in sorted((*self.waits, *self.host_waits), key=lambda w: index.get(w.after, 0)):
            events.setdefault(w.after, len(events))
        waits, host = self.waits_before(), self.host_waits_before()
        head = f"schedule {self.policy}: {self.num_streams} streams, {len(events)} events"
        if self.host_waits:
            head += f", {len(self.host_waits)} host waits"
        if not self.record_stream:
            head += ", cross-stream frees ordered by waits (no record_stream)"
        lines = [head]
        for op in self.launch_order:
            hw = "".join(f" host-wait(e{events[u]})" for u in host.get(op, ()))
            ws = "".join(f" wait(e{events[u]})" for u in waits.get(op, ()))
            rec = f" record(e{events[op]})" if op in events else ""
            lines.append(
                f" {hw} @s{self.streams[op]}{ws} {op}{rec}" if hw else f"  @s{self.streams[op]}{ws} {op}{rec}"
            )
        return "\n".join(lines)


def _items(x: Any, name: str) -> list[Any]:
    if not isinstance(x, (list, tuple)):
        raise TypeError(f'"{name}" is not a list')
    return list(x)


def _text(x: Any) -> str:
    if not isinstance(x, str):
        raise TypeError(f"expected a string, got {type(x).__name__} {x!r:.40}")
    return x


def _flag(x: Any, name: str) -> bool:
    if not isinstance(x, bool):
        raise TypeError(f'"{name}" is true or false, got {x!r:.40}')
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
    for w in schedule.host_waits:
        unknown = [end for end in (w.after, w.before) if end not in index]
        if unknown:
            problems.append(
                f"host wait {w.after} -> {w.before} refers to {unknown[0]}, which is not launched"
            )
        elif index[w.after] >= index[w.before]:
            problems.append(
                f"the host waits for {w.after} before launching {w.before}, but launches {w.after} "
                "only later: it would wait forever (deadlock)"
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
