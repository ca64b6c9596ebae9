"""``ParallelPlan``: how a training step is split over ranks, as one frozen, hashable value.

The grammar (``--parallel`` on the command line, ``parallel=`` in ``streamplan.analyze``) is
a comma-separated list of ``key=value`` items, the strategy first::

    fsdp=8                      # FSDP (ZeRO-3) over 8 ranks, default knobs
    fsdp=8,prefetch=2,in_flight=none,reshard=false,record_stream=false
    ddp=8,bucket=25MiB          # DDP over 8 ranks, 25 MiB gradient buckets

Strategies: ``fsdp=N`` (parameters, gradients and optimizer state sharded per wrapping
unit) or ``ddp=N`` (replicated parameters, gradient buckets all-reduced). ``tp=N`` is
recognised and refused (tensor parallelism is not modelled yet).

Knobs (all optional):

- ``prefetch=K``: how many units ahead all-gathers are launched, forward and backward
  (``forward_prefetch=K`` and ``backward_prefetch=K`` set one each; default 1);
- ``in_flight=K`` or ``none``: the most all-gathers whose output is not yet freed before
  the host waits (FSDP1's ``limit_all_gathers``; default 2; ``none``: the host never waits);
- ``reshard=true|false``: free a unit's gathered parameters after its forward and gather
  them again for its backward (default true; false keeps them from forward to backward);
- ``record_stream=true|false``: free cross-stream tensors with ``record_stream`` (default
  true) or order their reuse with event waits (false: FSDP2's way);
- ``bucket=SIZE``: DDP's gradient bucket size (``streamplan.units`` grammar; default 25MiB);
- ``units=auto|children``: FSDP's wrapping units (``parallel.units``).

``--batch`` is each rank's batch: the global batch is ``batch * ranks``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from streamplan.errors import ModelSpecError
from streamplan.units import parse_bytes

STRATEGIES = ("fsdp", "ddp")
UNIT_RULES = ("auto", "children")
DEFAULT_BUCKET_BYTES = 25 << 20
MAX_RANKS = 1 << 16
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")
GRAMMAR_HINT = (
    "write the strategy first, then knobs: fsdp=8 | ddp=8 | fsdp=8,prefetch=2,in_flight=none,"
    "reshard=false,record_stream=false | ddp=8,bucket=25MiB"
)


@dataclass(frozen=True)
class ParallelPlan:
    """One rank's share of a training step (see the module docstring for every field)."""

    strategy: str
    ranks: int
    forward_prefetch: int = 1
    backward_prefetch: int = 1
    in_flight: int | None = 2
    reshard_after_forward: bool = True
    record_stream: bool = True
    bucket_bytes: int = DEFAULT_BUCKET_BYTES
    units: str = "auto"

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ModelSpecError(f"unknown parallel strategy {self.strategy!r}", hint=GRAMMAR_HINT)
        for name in ("ranks", "forward_prefetch", "backward_prefetch", "bucket_bytes"):
            x = getattr(self, name)
            low = 1 if name in ("ranks", "bucket_bytes") else 0
            if isinstance(x, bool) or not isinstance(x, int) or x < low:
                raise ModelSpecError(f"parallel {name} must be an int >= {low}, got {x!r}", hint=GRAMMAR_HINT)
        if self.ranks > MAX_RANKS:
            raise ModelSpecError(f"{self.ranks} ranks is more than {MAX_RANKS}", hint=GRAMMAR_HINT)
        x = self.in_flight
        if x is not None and (isinstance(x, bool) or not isinstance(x, int) or x < 1):
            raise ModelSpecError(f"in_flight must be an int >= 1 or none, got {x!r}", hint=GRAMMAR_HINT)
        if self.units not in UNIT_RULES:
            raise ModelSpecError(
                f"unknown wrapping rule units={self.units}", hint=f"use {', '.join(UNIT_RULES)}"
            )

    @staticmethod
    def parse(text: str | ParallelPlan) -> ParallelPlan:
        """The plan ``text`` says (``ModelSpecError`` naming the bad item otherwise)."""
        if isinstance(text, ParallelPlan):
            return text
        if not isinstance(text, str) or not text.strip():
            raise ModelSpecError(f"empty parallel plan {text!r}", hint=GRAMMAR_HINT)
        items = [item.strip() for item in text.split(",") if item.strip()]
        pairs = []
        for item in items:
            key, eq, value = item.partition("=")
            if not eq or not value.strip():
                raise ModelSpecError(f"parallel plan item {item!r} is not key=value", hint=GRAMMAR_HINT)
            pairs.append((key.strip().lower().replace("-", "_"), value.strip()))
        first, ranks = pairs[0]
        if first == "tp" or any(k == "tp" for k, _ in pairs):
            raise ModelSpecError(
                "tensor parallelism (tp=N) is not modelled yet",
                where=text,
                hint="use fsdp=N or ddp=N (data parallelism)",
            )
        if first not in STRATEGIES:
            raise ModelSpecError(
                f"a parallel plan starts with fsdp=N or ddp=N, not {first}=", hint=GRAMMAR_HINT
            )
        fields: dict[str, Any] = {"strategy": first, "ranks": _int(ranks, first, text)}
        for key, value in pairs[1:]:
            if key in STRATEGIES:
                raise ModelSpecError(
                    f"a plan has one strategy, got {first} and {key}", where=text, hint=GRAMMAR_HINT
                )
            if key == "prefetch":
                fields["forward_prefetch"] = fields["backward_prefetch"] = _int(value, key, text)
            elif key in ("forward_prefetch", "fwd_prefetch"):
                fields["forward_prefetch"] = _int(value, key, text)
            elif key in ("backward_prefetch", "bwd_prefetch"):
                fields["backward_prefetch"] = _int(value, key, text)
            elif key == "in_flight":
                unbounded = value.lower() in ("none", "unbounded", "inf")
                fields["in_flight"] = None if unbounded else _int(value, key, text)
            elif key in ("reshard", "reshard_after_forward"):
                fields["reshard_after_forward"] = _flag(value, key, text)
            elif key == "record_stream":
                fields["record_stream"] = _flag(value, key, text)
            elif key in ("bucket", "bucket_size"):
                fields["bucket_bytes"] = parse_bytes(value, what="bucket size")
            elif key == "units":
                fields["units"] = value.lower()
            else:
                raise ModelSpecError(f"unknown parallel plan knob {key!r}", where=text, hint=GRAMMAR_HINT)
        return ParallelPlan(**fields)

    def replace(self, **changes: Any) -> ParallelPlan:
        return dataclasses.replace(self, **changes)

    def describe(self) -> str:
        """The plan in its grammar, every knob spelled out (``parse(describe())`` gives it back)."""
        head = f"{self.strategy}={self.ranks}"
        if self.strategy == "ddp":
            return f"{head},bucket={self.bucket_bytes},record_stream={str(self.record_stream).lower()}"
        return (
            f"{head},forward_prefetch={self.forward_prefetch},backward_prefetch={self.backward_prefetch},"
            f"in_flight={'none' if self.in_flight is None else self.in_flight},"
            f"reshard={str(self.reshard_after_forward).lower()},record_stream={str(self.record_stream).lower()},"
            f"units={self.units}"
        )

    def knobs(self) -> str:
        """The knobs alone, compactly (``prefetch=1 in_flight=2 reshard record_stream``)."""
        if self.strategy == "ddp":
            return f"bucket={self.bucket_bytes >> 20}MiB" + (
                "" if self.record_stream else " no-record_stream"
            )
        fwd, bwd = self.forward_prefetch, self.backward_prefetch
        prefetch = f"prefetch={fwd}" if fwd == bwd else f"forward_prefetch={fwd} backward_prefetch={bwd}"
        return " ".join(
            (
                prefetch,
                f"in_flight={'none' if self.in_flight is None else self.in_flight}",
                "reshard" if self.reshard_after_forward else "no-reshard",
                "record_stream" if self.record_stream else "no-record_stream",
            )
        )

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @staticmethod
    def from_dict(data: Any) -> ParallelPlan:
        try:
            return ParallelPlan(
                **{f.name: data[f.name] for f in dataclasses.fields(ParallelPlan) if f.name in data}
            )
        except (TypeError, KeyError) as e:
            raise ModelSpecError(f"malformed parallel plan {data!r:.80} ({e})") from None

    def __str__(self) -> str:
        return self.describe()


def _int(value: str, key: str, text: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ModelSpecError(
            f"{key}={value}: {key} is a whole number", where=text, hint=GRAMMAR_HINT
        ) from None


def _flag(value: str, key: str, text: str) -> bool:
    v = value.lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ModelSpecError(f"{key}={value}: {key} is true or false", where=text, hint=GRAMMAR_HINT)
