"""The schedule verifier catches every kind of invalid schedule and names the offending pair."""

import pytest

from helpers.dags import diamond
from streamplan.errors import ScheduleError
from streamplan.models import load_model
from streamplan.schedule import StreamSchedule, Wait, make_schedule, schedule_problems, verify_schedule


def _asap_example2():
    g = load_model("seed-example2")
    return g, make_schedule(g, "asap")


def test_valid_schedule_passes():
    g, s = _asap_example2()
    assert schedule_problems(g, s) == []
    verify_schedule(g, s)


def test_removed_needed_wait_is_caught_and_names_the_pair():
    g, s = _asap_example2()
    assert s.waits
    for w in s.waits:
        broken = s.replace(waits=tuple(x for x in s.waits if x != w))
        problems = schedule_problems(g, broken)
        assert problems
        assert any(f"{w.after} -> {w.before} are not ordered" in p for p in problems), problems
        with pytest.raises(ScheduleError, match="add a wait"):
            verify_schedule(g, broken)


def test_launch_order_breaking_a_dependency_on_one_stream():
    g = diamond()
    order = ("n0", "n2", "n1", "n3")  # fine
    s = StreamSchedule(order, dict.fromkeys(order, 0))
    assert schedule_problems(g, s) == []
    bad = StreamSchedule(("n0", "n3", "n1", "n2"), dict.fromkeys(order, 0))
    problems = schedule_problems(g, bad)
    assert any("n1 -> n3 are not ordered" in p for p in problems)
    assert any("n2 -> n3 are not ordered" in p for p in problems)


def test_missing_duplicate_and_foreign_ops():
    g = diamond()
    s = StreamSchedule(("n0", "n1", "n3"), {"n0": 0, "n1": 0, "n3": 0})
    assert any("never launched: n2" in p for p in schedule_problems(g, s))
    dup = StreamSchedule(("n0", "n1", "n1", "n2", "n3"), dict.fromkeys(("n0", "n1", "n2", "n3"), 0))
    assert any("n1 is launched more than once" in p for p in schedule_problems(g, dup))
    foreign = StreamSchedule(("n0", "n1", "n2", "n3", "zz"), dict.fromkeys(("n0", "n1", "n2", "n3", "zz"), 0))
    assert any("zz is launched but is not an op" in p for p in schedule_problems(g, foreign))


def test_bad_stream_ids():
    g = diamond()
    order = ("n0", "n1", "n2", "n3")
    s = StreamSchedule(order, {"n0": 0, "n1": -1, "n2": 0, "n3": 0})
    assert any("streams are ints >= 0" in p for p in schedule_problems(g, s))
    s = StreamSchedule(order, {"n0": 0, "n1": 0, "n2": 0})
    assert any("n3 has no stream" in p for p in schedule_problems(g, s))


def test_wait_on_later_launched_op_is_a_deadlock():
    g = diamond()
    order = ("n0", "n1", "n2", "n3")
    streams = {"n0": 0, "n1": 0, "n2": 1, "n3": 0}
    ok = StreamSchedule(order, streams, (Wait("n0", "n2"), Wait("n2", "n3")))
    assert schedule_problems(g, ok) == []
    bad = StreamSchedule(order, streams, (Wait("n0", "n2"), Wait("n2", "n3"), Wait("n3", "n1")))
    assert any("launched later" in p and "deadlock" in p for p in schedule_problems(g, bad))
    unknown = StreamSchedule(order, streams, (Wait("n0", "n2"), Wait("n2", "n3"), Wait("q", "n1")))
    assert any("refers to q" in p for p in schedule_problems(g, unknown))


def test_transitive_waits_order_dependencies():
    # n0 on s0, n1 on s1 waits n0, n2 on s2 waits n1: n0 -> n2 holds through the chain.
    from helpers.dags import dag

    g = dag({1: [0], 2: [0, 1]}, 3)
    order = ("n0", "n1", "n2")
    s = StreamSchedule(order, {"n0": 0, "n1": 1, "n2": 2}, (Wait("n0", "n1"), Wait("n1", "n2")))
    assert schedule_problems(g, s) == []
    s2 = StreamSchedule(order, {"n0": 0, "n1": 1, "n2": 2}, (Wait("n1", "n2"),))
    assert any("n0 -> n1 are not ordered" in p for p in schedule_problems(g, s2))
