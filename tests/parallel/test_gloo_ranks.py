"""Rank programs run for real on gloo processes equal one eager step on the whole batch, and on one
stream each rank's kernels allocate exactly the predicted peak. Two ranks in the suite; four ranks,
DDP and the overlap schedule with STREAMPLAN_GLOO_EXTENDED=1 (``bench/gloo_ranks.py`` runs them all)."""

from __future__ import annotations

import os

import pytest

from helpers.parallel_models import stack_problem
from streamplan.runtime.distributed import run_ranks

EXTENDED = os.environ.get("STREAMPLAN_GLOO_EXTENDED") == "1"


@pytest.mark.slow
def test_two_fsdp_ranks_equal_eager_and_their_allocations_are_predicted():
    r = run_ranks(stack_problem(8), "fsdp=2,prefetch=2", optimizer="adam", policy="sequential")
    assert r.matches and r.compared == 22  # every weight and bias
    assert abs(r.loss - r.reference_loss) < 1e-5
    for rank in r.ranks:
        assert rank.tracked_peak_bytes == rank.predicted_peak_bytes > 0


@pytest.mark.slow
@pytest.mark.skipif(not EXTENDED, reason="STREAMPLAN_GLOO_EXTENDED=1 runs the longer gloo cases")
@pytest.mark.parametrize(
    "plan, optimizer, policy",
    [
        ("fsdp=4", "adam", "overlap"),
        ("fsdp=4,reshard=false,record_stream=false,in_flight=none", "momentum", "overlap"),
        ("ddp=4,bucket=4KiB", "sgd", "overlap"),
        ("ddp=2", "adam", "sequential"),
    ],
)
def test_more_ranks_and_strategies_equal_eager(plan, optimizer, policy):
    r = run_ranks(stack_problem(8), plan, optimizer=optimizer, policy=policy, chaos=policy == "overlap")
    assert r.matches
    if policy == "sequential":
        assert all(x.tracked_peak_bytes == x.predicted_peak_bytes for x in r.ranks)
