"""``Session.fit``: the default execution's device peak by role adds up to the caching allocator's
reserved peak, the verdict follows the usable memory, and when a step does not fit the changes
are judged on the same device, listed fastest first, each search bounded in time."""

from __future__ import annotations

import json
import time

import pytest

import streamplan
from streamplan.app.bounded import run_bounded
from streamplan.app.fit_changes import micro_batch_change
from streamplan.app.fit_memory import ROLES
from streamplan.cost.devices import get_device
from streamplan.errors import BudgetError, ModelSpecError
from streamplan.ir.includes import EVERYTHING
from streamplan.memory.allocators import replay
from streamplan.memory.breakdown import memory_breakdown

MIB = 1 << 20


@pytest.fixture(scope="module")
def step():
    return streamplan.analyze("random:40", train=True, optimizer="adam", batch=8, device="h100")


def test_peak_by_role_adds_up_to_the_reserved_peak(step):
    answer = step.fit()
    roles = dict(answer.peak.by_role())
    assert set(roles) == set(ROLES)
    assert sum(roles.values()) == answer.reserved_peak_bytes
    # the tensor part is the host-order peak's composition, residents included
    run = step.schedule("sequential")
    host = memory_breakdown(step.graph, run.schedule).peak("host-order")
    assert answer.peak.tensor_peak_bytes == host.total_bytes
    # and the total is the torch-cuda replay's max_memory_reserved
    report = replay(
        step.graph,
        run.schedule,
        "torch-cuda",
        timeline=run.timeline,
        includes=EVERYTHING,
    )
    assert answer.reserved_peak_bytes >= report.reserved_peak_bytes


def test_fits_on_a_large_device_with_the_profiles_usable_memory(step):
    answer = step.fit()
    h100 = get_device("h100")
    assert answer.fits and answer.oom is None and answer.changes == ()
    assert answer.usable_bytes == h100.usable_memory_bytes < h100.memory_bytes
    assert answer.step_ms > 0 and answer.batch == 8
    d = json.loads(json.dumps(answer.to_dict()))
    assert d["fits"] is True and d["policy"] == "sequential"
    assert "fits" in str(answer) and "peak by role" in str(answer)


def test_too_small_a_device_says_where_pytorch_runs_out_and_what_helps(step):
    answer0 = step.fit()
    small = step.with_settings(device_memory_bytes=int(answer0.reserved_peak_bytes * 0.6), time_limit_s=20)
    answer = small.fit()
    assert not answer.fits and answer.oom is not None
    assert answer.oom.capacity_bytes == small.settings.device_memory_bytes
    kinds = [c.kind for c in answer.changes]
    assert sorted(kinds) == ["budget", "memory-order", "micro-batch", "remat"]
    fitting = [c for c in answer.changes if c.fits]
    assert fitting, [c.line() for c in answer.changes]
    # fitting changes first, fastest first for the requested batch
    times = [c.batch_ms for c in answer.changes if c.fits]
    assert times == sorted(times) and answer.changes[: len(fitting)] == tuple(fitting)
    for c in fitting:
        assert c.reserved_peak_bytes <= small.settings.device_memory_bytes or c.kind != "micro-batch"
    batch = next(c for c in answer.changes if c.kind == "micro-batch")
    assert batch.fits and batch.batch_ms >= batch.step_ms  # several micro-steps make one batch


def test_parameters_and_state_beyond_the_device_need_no_search(step):
    tiny = step.with_settings(device_memory_bytes=MIB)
    start = time.perf_counter()
    answer = tiny.fit()
    assert time.perf_counter() - start < 10
    assert not answer.fits and answer.oom is not None and answer.oom.op is None  # before the first op
    assert all(c.fits is False and "alone exceed" in c.detail for c in answer.changes)
    assert "no change helps" in str(answer)


def test_a_profile_without_memory_is_refused(step):
    with pytest.raises(ModelSpecError, match="no device memory"):
        step.with_settings(device="cpu").fit()


def test_micro_batch_search_finds_the_largest_that_fits():
    calls = []

    def evaluate(b):  # an affine peak: 10 + 3 per sample, capacity 40 -> batch 10 fits, 11 does not
        calls.append(b)
        reserved = (10 + 3 * b) * MIB
        return reserved, reserved <= 40 * MIB, float(b)

    c = micro_batch_change(
        64, evaluate, time_limit_s=60, baseline_reserved_bytes=(10 + 3 * 64) * MIB, capacity_bytes=40 * MIB
    )
    assert c.fits and "micro-batch 10," in c.summary and c.step_ms == 10.0
    assert c.batch_ms == 7 * 10.0  # ceil(64 / 10) micro-steps
    assert len(calls) <= 4 and not c.cut_short


def test_micro_batch_search_says_when_batch_one_does_not_fit_or_time_ran_out():
    none = micro_batch_change(
        8,
        lambda b: (100 * MIB, False, 1.0),
        time_limit_s=60,
        baseline_reserved_bytes=200 * MIB,
        capacity_bytes=50 * MIB,
    )
    assert none.fits is False and "batch 1 does not fit" in none.detail

    def slow(b):
        time.sleep(0.2)
        return (10 + b) * MIB, 10 + b <= 60, 1.0

    cut = micro_batch_change(
        1000, slow, time_limit_s=0.1, baseline_reserved_bytes=1010 * MIB, capacity_bytes=60 * MIB
    )
    assert cut.fits and cut.cut_short and "may fit too" in cut.detail


def test_bounded_work_is_cut_short_and_errors_come_back():
    assert run_bounded(lambda: 42, 5).result == 42
    slow = run_bounded(lambda: time.sleep(30), 0.5)
    assert slow.cut_short and slow.result is None and slow.elapsed_s < 10

    def refuse():
        raise BudgetError("too small", hint="raise it")

    failed = run_bounded(refuse, 5)
    assert failed.result is None and failed.error == "too small (raise it)" and not failed.cut_short


def test_an_inference_graph_fits_too():
    answer = streamplan.analyze("random:30", device="l4").fit()
    assert answer.fits and answer.training is None
    assert dict(answer.peak.by_role())["optimizer_state"] == 0
    assert "inference" in str(answer)
