"""The CUDA host loop's launches, checked by an independent replay of CUDA's ordering rules.

Every zoo model (on the ``meta`` device: shapes only) under every policy gives a sound
launch log; and each way of breaking one (a wait, a ``record_stream``, the fork, a join) is
caught. The zoo graphs are the runtime tests' captures (shrunk inputs, every op and branch
kept) with their schedules: soundness is about the order of launches, events and
``record_stream`` calls, which the tensor sizes do not enter, and the captures and schedules
are then made once per run for this file, tests/runtime/test_zoo.py and the codegen tests.
"""

from __future__ import annotations

import functools

import pytest

from helpers.launch_log import check_launch_log
from helpers.matrix import pairs
from helpers.models import RUNNABLE_MODELS, small_model
from helpers.shared import stored_schedule
from streamplan.ir.schedule import StreamSchedule
from streamplan.models import load_model
from streamplan.runtime.backend_api import FakeBackend
from streamplan.runtime.cuda import StreamExecutor
from streamplan.runtime.interpret import initial_env
from streamplan.schedule import make_schedule
from streamplan.schedule.context import ScheduleContext
from streamplan.schedule.registry import POLICIES
from streamplan.schedule.verify import verify_schedule

# budget returns one of the other policies' schedules (or the same streams launched in another
# order) and runs every one of them, ios included: tests/budget runs its schedules for real
RUN_POLICIES = [p for p in POLICIES if p != "budget"]
CTX = ScheduleContext(max_streams=4, time_limit_s=2.0)  # tests/runtime/test_zoo.py's


def _calls(graph, schedule: StreamSchedule) -> list[tuple]:
    backend = FakeBackend(device="meta")
    StreamExecutor(graph, schedule, backend).launch(initial_env(graph, None, None, device="meta"))
    return backend.calls


# each zoo model under three policies, each policy on three or four zoo models (helpers.matrix:
# the waits, forks, joins and hand-overs follow the schedule's shape and the graph's branches,
# not the pairing; STREAMPLAN_FULL_MATRIX=1 runs every pair)
@pytest.mark.parametrize("model,policy", pairs(RUNNABLE_MODELS, RUN_POLICIES, per_model=3))
@pytest.mark.slow
def test_zoo_launch_logs_are_sound(model: str, policy: str) -> None:
    graph = small_model(model)[2]
    schedule = stored_schedule(graph, policy, CTX)
    verify_schedule(graph, schedule)
    assert check_launch_log(graph, _calls(graph, schedule)) == []


@functools.cache
def _two_stream_case():
    graph = load_model("random:200")
    schedule = make_schedule(graph, "asap", ScheduleContext(max_streams=4))
    assert schedule.num_streams > 1 and schedule.waits
    return graph, schedule


def test_every_removed_wait_that_matters_is_caught() -> None:
    graph, schedule = _two_stream_case()
    caught = 0
    for k in range(len(schedule.waits)):
        broken = schedule.replace(waits=schedule.waits[:k] + schedule.waits[k + 1 :])
        problems = check_launch_log(graph, _calls(graph, broken))
        w = schedule.waits[k]
        # the pruned waits are all needed: dropping one leaves some op unordered after w.after
        assert problems, f"dropping {w} went unnoticed"
        assert any(w.after in p for p in problems), problems
        caught += 1
    assert caught >= 10


def _drop(calls: list[tuple], match) -> list[tuple]:
    kept = [c for c in calls if not match(c)]
    assert len(kept) < len(calls), "nothing matched"
    return kept


def test_missing_record_stream_is_caught() -> None:
    graph, schedule = _two_stream_case()
    calls = _calls(graph, schedule)
    first = next(c for c in calls if c[0] == "record_stream" and c[1] != "default")
    problems = check_launch_log(graph, _drop(calls, lambda c: c == first))
    assert any("no record_stream first" in p and first[2] in p for p in problems), problems


def test_missing_output_handover_is_caught() -> None:
    graph, schedule = _two_stream_case()
    calls = _drop(_calls(graph, schedule), lambda c: c[0] == "record_stream" and c[1] == "default")
    assert any("not recorded on the caller's stream" in p for p in check_launch_log(graph, calls))


def test_missing_fork_is_caught() -> None:
    graph, schedule = _two_stream_case()
    calls = _calls(graph, schedule)
    fork = next(c for c in calls if c[0] == "record_event" and c[3] == "fork")
    first = next(c for c in calls if c[0] == "launch")  # a stream whose first op waits for nothing else
    calls = _drop(calls, lambda c: c[0] == "wait_event" and c[2] == fork[2] and c[1] == first[1])
    assert any("no fork" in p for p in check_launch_log(graph, calls))


def test_missing_join_is_caught() -> None:
    graph, schedule = _two_stream_case()
    calls = _drop(_calls(graph, schedule), lambda c: c[0] == "wait_event" and c[3] == "join s1")
    problems = check_launch_log(graph, calls)
    assert problems == ["stream s1 is not joined back to the caller's stream at the end"]


def test_launch_out_of_graph_order_on_one_stream_is_caught() -> None:
    """Swapping a producer behind its consumer on the same stream breaks the data check."""
    graph = load_model("seed-example1")
    calls = [("launch", "s0", n.id) for n in reversed(graph.nodes)]
    problems = check_launch_log(graph, calls)
    assert any("may start before its producer" in p for p in problems)
