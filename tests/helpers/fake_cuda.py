"""A stand-in for the parts of ``torch.cuda`` the CUDA executor calls, for CPU-only machines.

``install(monkeypatch)`` replaces ``torch.cuda.Stream``/``Event``/``CUDAGraph`` and the
calls around them with fakes that run everything at once on the CPU but enforce the
rules a real GPU would: an event must be recorded before a stream waits on it; no host
synchronisation, cache emptying or peak-stat reset while a CUDA graph is capturing;
and a capture may only end once every stream that joined it (by waiting on an event of
a capturing stream) has been joined back into the capture stream after its last work.
``measure_cuda`` then runs end to end: warm-up, capture and replay, event timing, the
memory statistics it reads.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from typing import Any

import torch

_ids = itertools.count()


class FakeStream:
    def __init__(self, name: str | None = None) -> None:
        self.name = name or f"stream{next(_ids)}"
        self.work = 0  # operations issued on it so far
        self.capturing = False
        self.joined_work: dict[str, int] = {}  # stream name -> its work count this stream has waited for

    def wait_event(self, event: FakeEvent) -> None:
        _STATE.check_event(event)
        self.work += 1
        seen = self.joined_work.get(event.stream.name, 0)
        self.joined_work[event.stream.name] = max(seen, event.work)
        if event.stream.capturing and not self.capturing:
            self.capturing = True
            _STATE.capture_streams.append(self)

    def wait_stream(self, other: FakeStream) -> None:
        ev = FakeEvent()
        ev.record(other)
        self.wait_event(ev)


class FakeEvent:
    def __init__(self, enable_timing: bool = False, **_: Any) -> None:
        self.enable_timing = enable_timing
        self.stream: FakeStream | None = None
        self.work = 0
        self.t = 0.0

    def record(self, stream: FakeStream | None = None) -> None:
        stream = stream or _STATE.current
        if self.enable_timing and _STATE.capturing:
            raise RuntimeError("timing events cannot be recorded during capture")
        stream.work += 1
        self.stream, self.work, self.t = stream, stream.work, time.perf_counter()

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.enable_timing and end.enable_timing, "elapsed_time needs timing events"
        return (end.t - self.t) * 1e3


class FakeGraph:
    def __init__(self) -> None:
        self.captured = False
        self.replays = 0

    def replay(self) -> None:
        assert self.captured, "replay before capture"
        self.replays += 1


class _State:
    def __init__(self) -> None:
        self.default = FakeStream("default")
        self.current = self.default
        self.capturing = False
        self.capture_streams: list[FakeStream] = []
        self.calls: list[str] = []

    def check_event(self, event: FakeEvent) -> None:
        if event.stream is None:
            raise RuntimeError("waiting on an event that was never recorded")

    def no_capture(self, what: str) -> None:
        self.calls.append(what)
        if self.capturing:
            raise RuntimeError(f"{what} is not allowed while a CUDA graph is capturing")


_STATE = _State()


@contextlib.contextmanager
def _use_stream(stream: FakeStream):
    prev, _STATE.current = _STATE.current, stream
    try:
        yield stream
    finally:
        _STATE.current = prev


@contextlib.contextmanager
def _capture(graph: FakeGraph, **_: Any):
    capture = FakeStream("capture")
    capture.capturing = True
    _STATE.capturing, _STATE.capture_streams = True, [capture]
    try:
        with _use_stream(capture):
            yield
        for s in _STATE.capture_streams[1:]:
            if capture.joined_work.get(s.name, 0) < s.work:
                raise RuntimeError(f"capture ended with {s.name} not joined back (unjoined work)")
    finally:
        for s in _STATE.capture_streams:
            s.capturing = False
        _STATE.capturing, _STATE.capture_streams = False, []
    graph.captured = True


def _record_stream(tensor: torch.Tensor, stream: Any) -> None:
    assert isinstance(stream, FakeStream), f"record_stream given {type(stream).__name__}"


def install(monkeypatch: Any) -> _State:
    """Patch ``torch.cuda`` for one test; returns the fake's state (``calls``, streams)."""
    global _STATE
    _STATE = _State()
    cuda = torch.cuda
    monkeypatch.setattr(cuda, "is_available", lambda: True)
    monkeypatch.setattr(cuda, "Stream", FakeStream)
    monkeypatch.setattr(cuda, "Event", FakeEvent)
    monkeypatch.setattr(cuda, "CUDAGraph", FakeGraph)
    monkeypatch.setattr(cuda, "graph", _capture)
    monkeypatch.setattr(cuda, "stream", _use_stream)
    monkeypatch.setattr(cuda, "current_stream", lambda: _STATE.current)
    monkeypatch.setattr(cuda, "synchronize", lambda: _STATE.no_capture("synchronize"))
    monkeypatch.setattr(cuda, "empty_cache", lambda: _STATE.no_capture("empty_cache"))
    monkeypatch.setattr(cuda, "reset_peak_memory_stats", lambda: _STATE.no_capture("reset_peak_memory_stats"))
    monkeypatch.setattr(cuda, "memory_allocated", lambda: 0)
    monkeypatch.setattr(cuda, "max_memory_allocated", lambda: 0)
    monkeypatch.setattr(cuda, "max_memory_reserved", lambda: 0)
    monkeypatch.setattr(
        cuda, "_sleep", lambda cycles: _STATE.current.__setattr__("work", _STATE.current.work + 1)
    )
    monkeypatch.setattr(
        torch._C, "_cuda_clearCublasWorkspaces", lambda: _STATE.no_capture("clear_cublas"), raising=False
    )
    monkeypatch.setattr(torch.Tensor, "record_stream", _record_stream)
    return _STATE
