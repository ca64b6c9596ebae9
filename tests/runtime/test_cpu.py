"""CPU executor: every policy matches the graph-order reference, with and without chaos."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from helpers.dags import random_dags
from helpers.runtime import assert_matches_reference
from streamplan.errors import ExecutionError
from streamplan.frontends.builder import GraphBuilder
from streamplan.ir.schedule import StreamSchedule, Wait
from streamplan.models import load_model
from streamplan.runtime import run
from streamplan.schedule import make_schedule
from streamplan.schedule.context import ScheduleContext
from streamplan.schedule.events import with_derived_waits
from streamplan.schedule.registry import POLICIES
from streamplan.schedule.verify import verify_schedule

# budget returns one of the other policies' schedules (or the same streams launched in another
# order) and runs every one of them, ios included: tests/budget runs its schedules for real
RUN_POLICIES = [p for p in POLICIES if p != "budget"]

SMALL = ("seed-example1", "seed-example2", "seed-concat", "random:60")


@pytest.mark.parametrize("spec", SMALL)
@pytest.mark.parametrize("policy", RUN_POLICIES)
def test_small_graphs_every_policy(spec: str, policy: str) -> None:
    if policy == "ios" and spec == "random:60":
        spec = "random:24"  # the IOS search alone takes ~15 s on random:60
    graph = load_model(spec)
    schedule = make_schedule(graph, policy, ScheduleContext(max_streams=4))
    verify_schedule(graph, schedule)
    assert_matches_reference(graph, schedule)
    assert_matches_reference(graph, schedule, chaos=True, seed=3)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_dags(min_nodes=2, max_nodes=8))
def test_random_dags_under_chaos(graph) -> None:
    for policy in ("wavefront", "asap", "nimble"):
        schedule = make_schedule(graph, policy, ScheduleContext(max_streams=3))
        assert_matches_reference(graph, schedule, chaos=True, seed=len(graph))


def test_peak_matches_sequential_memory_model() -> None:
    from streamplan.memory.host_order import host_order_peak_bytes

    for spec in ("seed-example1", "seed-example2", "seed-concat", "random:60"):
        graph = load_model(spec)
        schedule = make_schedule(graph, "sequential")
        measured = run(graph, schedule).measured_peak_bytes
        assert measured == host_order_peak_bytes(graph, schedule), spec
    assert (
        run(
            load_model("seed-example2"), make_schedule(load_model("seed-example2"), "sequential")
        ).measured_peak_bytes
        == 3 << 20
    )


def test_result_figures() -> None:
    graph = load_model("seed-example2")
    result = run(graph, make_schedule(graph, "asap"), repeat=3, warmup=1)
    assert len(result.times_ms) == 3 and result.measured_ms > 0
    assert result.num_streams == 2 and result.device == "cpu"
    assert result.to_dict()["measured_peak_bytes"] == result.measured_peak_bytes
    assert result.max_memory_allocated_bytes is None


def _slow_chain_then_reader() -> tuple:
    """s0: a0 -> ... -> a9 (2 MiB atans, tens of ms in all); s1: r reads a9. The wait is needed.

    The chain is long so that r's thread reaches r first even on a loaded CI machine."""
    b = GraphBuilder("race")
    x = b.input("x", (512, 1024))
    prev = x
    for i in range(10):
        prev = b.unary("atan", prev, name=f"a{i}")
    b.unary("neg", prev, name="r")
    graph = b.build(["r"])
    order = graph.node_ids
    streams = {op: 0 for op in order}
    streams["r"] = 1
    return graph, with_derived_waits(graph, order, streams, "two")


def test_removed_wait_is_caught_by_chaos() -> None:
    graph, schedule = _slow_chain_then_reader()
    assert schedule.waits == (Wait("a9", "r"),)
    verify_schedule(graph, schedule)
    broken = schedule.replace(waits=())
    caught = 0
    for seed in range(4):
        try:
            run(graph, broken, chaos=True, chaos_seed=seed)
        except ExecutionError as e:
            assert "%r ran before its input %a9 was produced: a wait is missing" in str(e)
            caught += 1
    assert caught >= 2
    for seed in range(4):  # the verified schedule stays correct under the same chaos
        assert_matches_reference(graph, schedule, chaos=True, seed=seed)


def test_op_failure_names_the_node() -> None:
    b = GraphBuilder("bad")
    x = b.input("x", (4, 8))
    w = b.param("w", (8, 3))
    b.matmul(x, w, name="mm")
    graph = b.build(["mm"])
    schedule = make_schedule(graph, "sequential")
    with pytest.raises(ExecutionError, match=r"while executing %mm \(aten\.mm\.default\)"):
        run(graph, schedule, params={"w": __import__("torch").zeros(5, 3)})


def test_schedule_for_another_graph_is_refused() -> None:
    graph = load_model("seed-example1")
    other = StreamSchedule(("a", "b"), {"a": 0, "b": 0})
    with pytest.raises(ValueError, match="never launched"):
        run(graph, other)


def test_wait_on_a_later_op_is_refused() -> None:
    graph, schedule = _slow_chain_then_reader()
    bad = schedule.replace(waits=(Wait("r", "a0"),))
    with pytest.raises(ValueError, match="launched later.*deadlock"):
        run(graph, bad)
