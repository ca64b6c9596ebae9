"""RAF's own rematerialization case: a conv + max-pool model on 4 MiB tensors peaks at 24.0088 MiB
(input and weight counted); rematerialization fits it under 20.0088 MiB and refuses 4 bytes less."""

from __future__ import annotations

import pytest

from helpers.remat import RAF_PEAK_BYTES, RAF_REMAT_BYTES, raf_conv_pool
from streamplan.app import plan_remat
from streamplan.errors import BudgetError
from streamplan.ir.includes import EVERYTHING
from streamplan.runtime import run
from streamplan.schedule import make_schedule


def test_the_case_peaks_at_24_0088_mib():
    assert f"{RAF_PEAK_BYTES / (1 << 20):.4f}" == "24.0088"
    assert f"{RAF_REMAT_BYTES / (1 << 20):.4f}" == "20.0088"


@pytest.mark.parametrize("solver", ["greedy", "scalable", "exact"])
def test_fits_under_20_0088_mib_and_refuses_four_bytes_less(solver):
    g = raf_conv_pool()
    plan = plan_remat(g, RAF_REMAT_BYTES, policy="sequential", solver=solver, includes=EVERYTHING)
    assert plan.baseline_worst_case_peak_bytes == RAF_PEAK_BYTES
    assert plan.worst_case_peak_bytes == RAF_REMAT_BYTES and plan.worst_case.exact
    assert 1 <= plan.recomputed_ops <= 2  # RAF recomputes the conv and a pool; one conv suffices
    with pytest.raises(BudgetError) as e:
        plan_remat(g, RAF_REMAT_BYTES - 4, policy="sequential", solver=solver, includes=EVERYTHING)
    text = e.value.short()
    assert "smallest worst-case peak found is 20.0088 MiB" in text
    assert "no plan can go below 20.0088 MiB" in text and "op a6" in text


def test_the_rematerialized_case_computes_the_same_result():
    g = raf_conv_pool()
    plan = plan_remat(g, RAF_REMAT_BYTES, policy="sequential", solver="scalable", includes=EVERYTHING)
    a = run(g, make_schedule(g, "sequential")).outputs
    b = run(plan.graph, plan.schedule).outputs
    assert len(a) == len(b) == 1 and a[0].equal(b[0])
