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


@pytest.fixture(scope="module")
def seed_session():
    return streamplan.analyze("seed-example2")


def test_every_verb_returns_a_hashable_value_that_prints_and_shows(seed_session, tmp_path_factory):
    """Each result is a frozen value: equal to itself, hashable, JSON-ready, readable as text,
    and shown as HTML in a notebook (the comparison as a table, the memory curve as an image)."""
    import json

    s = seed_session
    path = tmp_path_factory.mktemp("saved") / "asap.json"
    path.write_text(s.schedule("asap").schedule.dumps())
    results = {
        "schedule": s.schedule("asap"),
        "compare": s.compare(["sequential", "asap"]),
        "memory": s.memory("asap"),
        "explain": s.explain("asap"),
        "curve": s.curve("asap"),
        "load_schedule": s.load_schedule(str(path)),
        "verify": s.verify(str(path)),
        "pareto": s.pareto(points=2),
        "remat": s.remat("0.9x"),
        "codegen": s.codegen("asap"),
        "report": s.report(["sequential", "asap"], pareto_points=0),
        "run": s.run("asap", repeat=1),
    }
    for verb, r in results.items():
        assert r == r and isinstance(hash(r), int), verb
        assert json.dumps(r.to_dict(), default=str), verb
        text = str(r)
        assert text and not text.startswith(type(r).__name__ + "("), (verb, text[:80])
        assert r._repr_html_().strip(), verb
    table = results["compare"]._repr_html_()
    assert "<table" in table and ">asap<" in table and ">4.00<" in table  # the worst case, in MiB
    image = results["curve"]._repr_html_()
    assert image.startswith("<img") and "data:image/svg+xml;base64," in image
    assert "data:image/svg+xml" in results["memory"]._repr_html_()
    front = results["pareto"]._repr_html_()
    assert "<table" in front and ">front 1<" in front and ">sequential<" in front


def test_saved_schedules_are_checked_with_notes_not_prints(seed_session, tmp_path):
    s = seed_session
    path = tmp_path / "asap.json"
    path.write_text(s.schedule("asap").schedule.dumps())
    loaded = s.load_schedule(str(path))
    assert loaded.notes == () and loaded.run.saved and loaded.run.schedule == s.schedule("asap").schedule
    assert s.verify(str(path)).valid
    other = streamplan.analyze("seed-example1")
    with pytest.raises(ScheduleError, match="made for seed-example2"):
        other.load_schedule(str(path))
    assert not other.verify(str(path)).valid
    with pytest.raises(ScheduleError, match="made with --fusion none, not first"):
        s.with_settings(fusion="first").load_schedule(str(path))
    # a comparison takes it under any fusion mode: the row runs the kernels it was made for
    cmp = s.with_settings(fusion="first").compare(["sequential"], schedules=[s.load_schedule(str(path))])
    saved = cmp.row(str(path))
    assert saved.fusion == "none" and saved.speedup == pytest.approx(
        s.schedule("sequential").makespan_ms / s.schedule("asap").makespan_ms
    )


def test_a_budget_needs_a_policy_that_reads_one(seed_session):
    s = seed_session.with_settings(budget="3MiB")
    with pytest.raises(ModelSpecError, match="only applies"):
        s.compare(["sequential", "asap"])
    assert s.compare(["sequential", "budget"]).row("budget").memory.worst_case.upper_bytes <= 3 * MIB


def test_policy_options_reach_their_policy_in_a_comparison(seed_session):
    s = seed_session.with_settings(policy_options={"ios": {"r": 1, "s": 1}})
    assert s.schedule("ios").schedule.meta["stages"] != seed_session.schedule("ios").schedule.meta["stages"]
    assert s.compare(["ios"]).row("ios").streams == s.schedule("ios").schedule.num_streams


def test_a_training_step_without_a_loss_says_so_in_its_notes(tmp_path):
    model = tmp_path / "m.py"
    model.write_text("import torch\ndef build():\n    return torch.nn.Linear(4, 4), (torch.randn(2, 4),)\n")
    s = streamplan.analyze(f"{model}:build", train=True, cache=False)
    assert any("gives no loss function" in n and "sum of the outputs" in n for n in s.notes)
    assert streamplan.analyze("random:8", train=True).notes == ()
    with pytest.raises(ModelSpecError, match="needs --train"):
        streamplan.analyze("random:8", optimizer="adam")


def test_explain_of_a_saved_fused_schedule_says_what_fusing_first_did(tmp_path):
    s = streamplan.analyze("seed-concat", fusion="first")
    path = tmp_path / "first.json"
    path.write_text(s.schedule("asap").schedule.dumps())
    from streamplan.report.views import explain_lines

    result = s.explain(s.load_schedule(str(path)))
    assert result.fusion is not None and result.fusion.stream_aware is not None
    text = "\n".join(explain_lines(result))
    assert "6 ops became 1 kernel before asap scheduled them" in text
