"""A saved schedule of a training step names the step it was made for: used with inference,
or with another optimizer update, the one line says so (not "not at batch 1")."""

from __future__ import annotations

from streamplan.ir.fingerprint import fingerprint_mismatch, graph_fingerprint
from streamplan.models import load_model
from streamplan.schedule.registry import make_schedule


def test_fingerprint_records_the_step():
    assert graph_fingerprint(load_model("random:12"))["step"] is None
    assert graph_fingerprint(load_model("random:12", train=True))["step"] == "none"
    assert graph_fingerprint(load_model("random:12", train=True, optimizer="adam"))["step"] == "adam"


def test_training_schedule_against_inference_and_another_update():
    sgd = load_model("random:12", train=True, optimizer="sgd")
    meta = make_schedule(sgd, "asap").meta
    assert fingerprint_mismatch(meta, sgd) is None
    assert fingerprint_mismatch(meta, load_model("random:12")) == (
        f"schedule was made for a training step of {sgd.name} (sgd update) at batch 1, "
        "not random:12:0 at batch 1 (inference)"
    )
    adam = load_model("random:12", train=True, optimizer="adam")
    assert fingerprint_mismatch(meta, adam) == (
        f"schedule was made for a training step of {sgd.name} (sgd update) at batch 1, "
        f"not a training step of {adam.name} (adam update) at batch 1"
    )


def test_inference_schedule_against_a_training_step():
    meta = make_schedule(load_model("random:12"), "asap").meta
    step = load_model("random:12", train=True)
    assert fingerprint_mismatch(meta, step) == (
        f"schedule was made for random:12:0 at batch 1, "
        f"not a training step of {step.name} (no optimizer update) at batch 1"
    )


def test_schedules_saved_before_the_step_was_recorded_still_compare_by_name_and_batch():
    meta = make_schedule(load_model("random:12"), "asap").meta
    old = {**meta, "graph": {k: v for k, v in meta["graph"].items() if k != "step"}}
    assert fingerprint_mismatch(old, load_model("random:12", batch=2)).endswith("not at batch 2")
