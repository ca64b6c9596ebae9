"""A view launches no kernel, but on the CPU runtime the interpreter still works for it: a
calibrated CPU profile charges each view its measured host time on its stream, holding the
interpreter lock; every other profile keeps views free."""

from __future__ import annotations

import pytest
import torch

from streamplan.cost import AnalyticCostModel, get_device, simulate
from streamplan.cost.calibration import Calibration
from streamplan.cost.op_classes import is_view_op
from streamplan.frontends.builder import GraphBuilder
from streamplan.schedule import make_schedule


def _views(n: int = 6):
    b = GraphBuilder("views")
    x = b.input("x", (3, 4))
    for i in range(n):
        x = b.transpose(x, name=f"t{i}")
    return b.build([b.relu(x, name="out")])


def test_a_built_transpose_is_a_view_and_runs_like_eager():
    from streamplan.runtime import run

    g = _views(3)
    t = g.node("t0")
    assert is_view_op(g, t) and g.values["t0"].storage == "x" and (t.flops, t.bytes_read) == (0, 0)
    assert g.values["t2"].shape == (4, 3)
    x = torch.randn(3, 4)
    (out,) = run(g, make_schedule(g, "sequential"), [x]).outputs
    assert torch.equal(out, torch.relu(x.t()))


@pytest.mark.parametrize("view_ms", [0.0, 0.04])
def test_a_calibrated_cpu_profile_charges_views_their_host_time(view_ms):
    g = _views(6)
    cpu = get_device("cpu").replace(launch_overhead_ms=0.0)  # as calibrated: host work is in the op's time
    model = AnalyticCostModel(cpu.replace(calibration=Calibration(fixed_holds_lock=True, view_ms=view_ms)))
    t = g.node("t0")
    assert model.op_time_ms(g, t) == view_ms
    total, occupancy, launch, demand = model.op_facts(g, t)
    assert (total, occupancy, launch) == (view_ms, 0.0, 0.0)
    assert demand.lock == (1.0 if view_ms else 0.0) and demand.sm == 0.0
    plain = simulate(
        g, make_schedule(g, "sequential"), AnalyticCostModel(cpu.replace(calibration=Calibration()))
    )
    costed = simulate(g, make_schedule(g, "sequential"), model)
    assert costed.makespan_ms == pytest.approx(plain.makespan_ms + 6 * view_ms)


def test_the_view_time_survives_a_profile_file_and_built_in_profiles_keep_views_free():
    cal = Calibration(fixed_holds_lock=True, view_ms=0.031)
    assert Calibration.from_dict(cal.to_dict()).view_ms == 0.031
    assert Calibration.from_dict({k: v for k, v in cal.to_dict().items() if k != "view_ms"}).view_ms == 0.0
    g = _views(2)
    for name in ("cpu", "v100", "h100"):
        assert AnalyticCostModel(name).op_time_ms(g, g.node("t0")) == 0.0
