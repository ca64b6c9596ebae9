"""The CUDA host loop's bookkeeping, checked on the CPU through the fake backend."""

from __future__ import annotations

import pytest
import torch

from streamplan.models import load_model
from streamplan.runtime import compare_outputs
from streamplan.runtime.backend_api import FakeBackend
from streamplan.runtime.compare import _graph_order_reference
from streamplan.runtime.cuda import StreamExecutor
from streamplan.runtime.interpret import initial_env
from streamplan.runtime.measure import LiveBytes
from streamplan.schedule import make_schedule
from streamplan.schedule.context import ScheduleContext
from streamplan.schedule.events import with_derived_waits


def _launch(graph, schedule):
    backend = FakeBackend()
    executor = StreamExecutor(graph, schedule, backend)
    tracker = LiveBytes()
    outputs = executor.launch(initial_env(graph, None, None), tracker)
    return backend.calls, outputs, tracker


def test_events_recorded_and_waited_in_launch_order() -> None:
    graph = load_model("seed-example2")
    schedule = with_derived_waits(
        graph, ("a", "b", "c", "d", "e", "f"), {"a": 0, "b": 0, "d": 0, "c": 1, "e": 1, "f": 0}, "two"
    )
    calls, outputs, _ = _launch(graph, schedule)
    ok, _, _ = compare_outputs(outputs, _graph_order_reference(graph, 0))
    assert ok
    assert [c for c in calls if c[0] == "create_stream"] == [("create_stream", "s0"), ("create_stream", "s1")]
    launches = [c for c in calls if c[0] == "launch"]
    assert [c[2] for c in launches] == list(schedule.launch_order)
    assert all(c[1] == f"s{schedule.streams[c[2]]}" for c in launches)
    events = {c[3]: c for c in calls if c[0] == "record_event"}
    # fork first: every stream waits for the caller's fork event before any launch
    fork = events["fork"]
    assert fork[1] == "default"
    first_launch = calls.index(launches[0])
    assert {c[1] for c in calls[:first_launch] if c[0] == "wait_event" and c[2] == fork[2]} == {"s0", "s1"}
    for w in schedule.waits:
        rec = calls.index(events[w.after])
        after_launch = calls.index(("launch", f"s{schedule.streams[w.after]}", w.after))
        before_launch = calls.index(("launch", f"s{schedule.streams[w.before]}", w.before))
        wait = calls.index(("wait_event", f"s{schedule.streams[w.before]}", events[w.after][2], w.after))
        assert after_launch < rec < wait < before_launch
        assert events[w.after][1] == f"s{schedule.streams[w.after]}"
    # only ops someone waits for get an event (plus fork and one join per stream)
    assert set(events) == {"fork", "join s0", "join s1"} | {w.after for w in schedule.waits}
    joins = [c for c in calls if c[0] == "wait_event" and c[1] == "default"]
    assert len(joins) == 2 and calls.index(joins[0]) > calls.index(launches[-1])


def test_record_stream_for_cross_stream_tensors() -> None:
    graph = load_model("seed-example2")
    schedule = with_derived_waits(
        graph, ("a", "b", "c", "d", "e", "f"), {"a": 0, "b": 0, "d": 0, "c": 1, "e": 1, "f": 0}, "two"
    )
    calls, _, _ = _launch(graph, schedule)
    recorded = [(c[1], c[2]) for c in calls if c[0] == "record_stream"]
    # a (made on s0) is read by c on s1; e (made on s1) is read by f on s0;
    # the output f (made on s0) is handed to the caller's stream.
    assert recorded == [("s1", "a"), ("s0", "e"), ("default", "f")]
    # record_stream happens before the reading op is launched
    assert calls.index(("record_stream", "s1", "a")) < calls.index(("launch", "s1", "c"))


def test_one_stream_needs_no_record_stream_or_events() -> None:
    graph = load_model("seed-concat")
    calls, _, tracker = _launch(graph, make_schedule(graph, "sequential"))
    # only the output, made on the side stream s0, is handed over to the caller's stream
    assert [c for c in calls if c[0] == "record_stream"] == [("record_stream", "default", "concatenate")]
    assert [c[3] for c in calls if c[0] == "record_event"] == ["fork", "join s0"]
    assert tracker.peak_bytes == 4 << 20  # atan3, atan4 and the 2-unit concat


@pytest.mark.parametrize("policy", ["wavefront", "asap", "nimble"])
def test_fake_backend_outputs_match(policy: str) -> None:
    graph = load_model("random:40")
    schedule = make_schedule(graph, policy, ScheduleContext(max_streams=4))
    calls, outputs, _ = _launch(graph, schedule)
    ok, _, _ = compare_outputs(outputs, _graph_order_reference(graph, 0))
    assert ok
    n_waits = sum(
        1 for c in calls if c[0] == "wait_event" and c[3] not in ("fork",) and not c[3].startswith("join")
    )
    assert n_waits == len(schedule.waits)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("cuda_graph", [False, True])
def test_real_cuda_matches(cuda_graph: bool) -> None:
    from streamplan.runtime import run

    graph = load_model("random:40")
    schedule = make_schedule(graph, "nimble", ScheduleContext(max_streams=4))
    result = run(graph, schedule, device="cuda", repeat=3, warmup=1, cuda_graph=cuda_graph)
    ok, _, _ = compare_outputs(result.outputs, _graph_order_reference(graph, 0))
    assert ok and result.max_memory_allocated_bytes > 0


def test_chaos_delays_go_before_each_launch_on_its_stream() -> None:
    from streamplan.runtime.cpu import chaos_delays_s

    graph = load_model("seed-example1")
    schedule = make_schedule(graph, "asap")
    backend = FakeBackend()
    executor = StreamExecutor(graph, schedule, backend)
    executor.launch(initial_env(graph, None, None), delays_s=chaos_delays_s(schedule, 0))
    for op in schedule.launch_order:
        s = f"s{schedule.streams[op]}"
        assert backend.calls.index(("delay", s, op)) + 1 == backend.calls.index(("launch", s, op))
