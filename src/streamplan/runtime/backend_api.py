"""The stream/event interface the CUDA host loop talks to, its torch implementation and a fake.

``cuda.py`` drives a ``StreamBackend`` only, so its bookkeeping (which events are
recorded and waited, in which order, which tensors get ``record_stream``) is
tested on the CPU with ``FakeBackend``, which runs ops immediately on the CPU and
logs every call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol


class StreamBackend(Protocol):
    """What the host loop needs from a device with streams and events."""

    device: str

    def current_stream(self) -> Any:
        """The stream the caller is on (inputs were made there; results are joined back to it)."""

    def create_stream(self, index: int) -> Any:
        """A new non-default stream for schedule stream ``index``."""

    def use_stream(self, stream: Any) -> AbstractContextManager[Any]:
        """Make ``stream`` current for the ops launched inside the block."""

    def record_event(self, stream: Any, label: str = "") -> Any:
        """Record (and return) an event on ``stream`` after everything launched so far."""

    def wait_event(self, stream: Any, event: Any) -> None:
        """Make ``stream`` wait for ``event`` before running what is launched next."""

    def record_stream(self, tensor: Any, stream: Any, label: str = "") -> None:
        """Tell the allocator ``tensor`` is used on ``stream`` (its free waits for that stream)."""

    def synchronize(self) -> None:
        """Block the host until all work is done."""

    def synchronize_event(self, event: Any) -> None:
        """Block the host until ``event`` has completed (a schedule's host wait)."""

    def delay(self, stream: Any, seconds: float, label: str = "") -> None:
        """Keep ``stream`` busy for about ``seconds`` before its next op (chaos mode)."""


SLEEP_CYCLES_PER_S = 1.5e9  # torch.cuda._sleep spins for GPU clock cycles; ~1.5 GHz


class TorchCudaBackend:
    """``torch.cuda`` streams and events."""

    device = "cuda"

    def __init__(self) -> None:
        import torch

        self._torch = torch

    def current_stream(self) -> Any:
        return self._torch.cuda.current_stream()

    def create_stream(self, index: int) -> Any:
        return self._torch.cuda.Stream()

    def use_stream(self, stream: Any) -> AbstractContextManager[Any]:
        return self._torch.cuda.stream(stream)

    def record_event(self, stream: Any, label: str = "") -> Any:
        ev = self._torch.cuda.Event()
        ev.record(stream)
        return ev

    def wait_event(self, stream: Any, event: Any) -> None:
        stream.wait_event(event)

    def record_stream(self, tensor: Any, stream: Any, label: str = "") -> None:
        tensor.record_stream(stream)

    def synchronize(self) -> None:
        self._torch.cuda.synchronize()

    def synchronize_event(self, event: Any) -> None:
        event.synchronize()

    def delay(self, stream: Any, seconds: float, label: str = "") -> None:
        with self._torch.cuda.stream(stream):
            self._torch.cuda._sleep(int(seconds * SLEEP_CYCLES_PER_S))


@dataclass(frozen=True, slots=True)
class FakeStream:
    name: str


@dataclass(frozen=True, slots=True)
class FakeEvent:
    id: int
    stream: str
    label: str


class FakeBackend:
    """Runs everything at once on ``device`` and logs each call as a tuple in ``calls``.

    ``device="meta"`` runs shapes only: enough to check the bookkeeping of big graphs.

    Log entries: ``("create_stream", name)``, ``("launch", stream, label)`` (the host
    loop logs launches through ``note_launch``), ``("record_event", stream, event_id,
    label)``, ``("wait_event", stream, event_id, label)``, ``("record_stream", stream,
    label)``, ``("delay", stream, label)``, ``("synchronize",)``, ``("synchronize_event",
    event_id, label)`` (a host wait).
    """

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self.calls: list[tuple[Any, ...]] = []
        self._current = FakeStream("default")
        self._next_event = 0

    def current_stream(self) -> FakeStream:
        return self._current

    def create_stream(self, index: int) -> FakeStream:
        s = FakeStream(f"s{index}")
        self.calls.append(("create_stream", s.name))
        return s

    @contextlib.contextmanager
    def use_stream(self, stream: FakeStream) -> Iterator[FakeStream]:
        prev, self._current = self._current, stream
        try:
            yield stream
        finally:
            self._current = prev

    def note_launch(self, stream: FakeStream, label: str) -> None:
        self.calls.append(("launch", stream.name, label))

    def record_event(self, stream: FakeStream, label: str = "") -> FakeEvent:
        ev = FakeEvent(self._next_event, stream.name, label)
        self._next_event += 1
        self.calls.append(("record_event", stream.name, ev.id, label))
        return ev

    def wait_event(self, stream: FakeStream, event: FakeEvent) -> None:
        self.calls.append(("wait_event", stream.name, event.id, event.label))

    def record_stream(self, tensor: Any, stream: FakeStream, label: str = "") -> None:
        self.calls.append(("record_stream", stream.name, label))

    def synchronize(self) -> None:
        self.calls.append(("synchronize",))

    def synchronize_event(self, event: FakeEvent) -> None:
        self.calls.append(("synchronize_event", event.id, event.label))

    def delay(self, stream: FakeStream, seconds: float, label: str = "") -> None:
        self.calls.append(("delay", stream.name, label))
