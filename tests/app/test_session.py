"""The session API: one ``Settings`` value, one ``Session`` with the verbs, ``streamplan.analyze``."""

import pytest

import streamplan
from streamplan.errors import BudgetError, ModelSpecError, ScheduleError
from streamplan.ir.includes import Includes
from streamplan.ir.schedule import Fusion
from streamplan.schedule.settings import Settings

MIB = 1 << 20


def test_settings_are_hashable_values():
    a = Settings(device="h100", fusion="first", budget="12MiB", policy_options={"ios": {"r": 2}})
    b = Settings(device="h100", fusion=Fusion.FIRST, budget=12 * MIB, policy_options={"ios": {"r": 2}})
    assert a == b and hash(a) == hash(b)
    assert a != a.replace(seed=1)
    assert {a: 1}[b] == 1
    assert a.fusion is Fusion.FIRST and a.budget.limit_bytes == 12 * MIB


@pytest.mark.parametrize(
    "fields, error",
    [
        ({"fusion": "sideways"}, ScheduleError),
        ({"budget": "lots"}, BudgetError),
        ({"max_streams": 0}, ScheduleError),
        ({"policy_options": {"ios": {"q": 1}}}, ScheduleError),
        ({"policy_options": {"nope": {}}}, ScheduleError),
        ({"includes": True}, ScheduleError),
    ],
)
def test_bad_settings_are_user_errors(fields, error):
    with pytest.raises(error):
        Settings(**fields)


def test_the_context_carries_the_settings():
    s = Settings(device="h100", max_streams=3, fusion="first", budget="1.2x", includes=Includes(params=True))
    ctx = s.context("ios")
    assert ctx.max_streams == 3 and ctx.fusion == "first" and ctx.cost.device_name == "h100"
    assert ctx.budget.factor == 1.2 and ctx.budget.includes.params


def test_the_seed_question_in_a_few_lines():
    session = streamplan.analyze("seed-example2")
    cmp = session.compare(["sequential", "asap"], memory=True)
    assert cmp.row("sequential").memory.worst_case.upper_bytes == 3 * MIB
    assert cmp.row("asap").memory.worst_case.upper_bytes == 4 * MIB
    assert session.memory("asap").report.worst_case.upper_bytes == 4 * MIB
    assert session.schedule("asap") is session.schedule("asap")  # cached
    assert "asap" in str(cmp)


def test_with_settings_shares_the_graph_and_applies_fusion():
    session = streamplan.analyze("seed-concat")
    fused = session.with_settings(fusion="first")
    assert fused.graph is session.graph
    assert fused.schedule("asap").fusion_mode == "first"
    assert session.schedule("asap").fusion_mode == "none"


def test_a_graph_takes_no_capture_arguments():
    g = streamplan.load_model("seed-example2")
    with pytest.raises(ModelSpecError):
        streamplan.analyze(g, train=True)
    with pytest.raises(ModelSpecError, match="no model to run"):
        streamplan.analyze(g).run("asap")
