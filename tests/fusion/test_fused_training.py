"""Training steps fused: roles and phase boundaries follow the kernels, and the fused step
still equals eager (a regression: every fused training row once failed on a role left
on a storage that fusion had taken inside a kernel)."""

from __future__ import annotations

import pytest

from streamplan.app.analysis import compare_policies
from streamplan.fusion import fuse
from streamplan.ir.training import training_step
from streamplan.models import load_model
from streamplan.runtime import run_and_compare
from streamplan.schedule.context import ScheduleContext


@pytest.fixture(scope="module")
def step():
    return load_model("random:20:1", train=True, optimizer="sgd")


def test_fused_step_keeps_roles_on_existing_storages_and_boundaries_on_kernels(step):
    fused = fuse(step).graph
    assert fused.roles and set(fused.roles) <= {v.storage for v in fused.values.values()}
    facts = training_step(fused)
    ids = {n.id for n in fused.nodes}
    assert facts.first_backward_op in ids and facts.first_optimizer_op in ids
    assert len(fused.nodes) < len(step.nodes)


@pytest.mark.parametrize("mode", ["first", "stream-aware"])
def test_compare_of_a_fused_training_step_has_no_error_rows(step, mode):
    rows = compare_policies(step, ["sequential", "asap"], ScheduleContext(), fusions=[mode])
    assert all(r.error is None for r in rows), [r.error for r in rows]
    assert all(r.fused and r.breakdown is not None for r in rows)


@pytest.mark.parametrize("mode", ["first", "stream-aware"])
def test_fused_training_step_equals_eager(mode):
    r = run_and_compare(
        "random:12:2", "asap", train=True, optimizer="sgd", chaos=True, ctx=ScheduleContext(fusion=mode)
    )
    assert r.matches_eager, r.max_abs_error
