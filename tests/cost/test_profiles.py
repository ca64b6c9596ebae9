"""Device profiles are immutable, hashable values; profile files work wherever a profile name does."""

from __future__ import annotations

import json

import pytest

from helpers.dags import diamond
from streamplan.cost import (
    DEVICES,
    AnalyticCostModel,
    Calibration,
    GemmCurve,
    Supply,
    TimeCurve,
    get_device,
    load_profile,
    profile_to_json,
    resolve_cost,
    simulate,
)
from streamplan.cost.profile import DeviceProfile
from streamplan.errors import FileFormatError, ModelSpecError
from streamplan.schedule.events import with_derived_waits


def calibrated(**changes) -> DeviceProfile:
    cal = Calibration(
        curves=(TimeCurve("relu", "bytes", ((1e3, 0.001), (1e6, 0.05))),),
        gemm_curves=(GemmCurve("gemm", 5e10, 8.0, 4.0, 16.0),),
        contention=Supply(sm=0.8, dram=1.5, interference=0.2),
        stream_bandwidth_bytes_per_s=2e10,
        fixed_holds_lock=True,
        latency_error=0.08,
        speedup_error=0.05,
        sources=(("kernel_fixed_ms", "a chain of tiny ops"),),
    )
    return get_device("cpu").replace(name="mine", calibration=cal, **changes)


def test_profiles_are_hashable_values_with_read_only_parts():
    v100 = get_device("v100")
    assert hash(v100) == hash(get_device("V100")) and v100 == get_device("v100")
    assert {v100: 1}[get_device("v100")] == 1
    with pytest.raises(TypeError):
        v100.peak_flops["fp32"] = 1.0  # type: ignore[index]
    with pytest.raises(TypeError):
        DEVICES["v100"] = get_device("cpu")  # type: ignore[index]
    assert v100.replace(peak_flops={"fp32": 1.0}) != v100  # the peaks take part in equality
    assert hash(calibrated()) == hash(calibrated())


def test_a_profile_round_trips_through_its_file(tmp_path):
    p = calibrated()
    path = tmp_path / "mine.json"
    path.write_text(profile_to_json(p))
    assert load_profile(path) == p
    assert get_device(str(path)) == p
    assert AnalyticCostModel(str(path)).device == p
    assert resolve_cost(str(path)).device_name == "mine"


def test_a_profile_file_changes_op_times_but_no_memory_figure(tmp_path):
    from streamplan.memory.report import analyze_memory

    g = diamond()
    path = tmp_path / "slow.json"
    path.write_text(profile_to_json(calibrated(kernel_fixed_ms=5.0)))
    sched = with_derived_waits(g, g.node_ids, {"n0": 0, "n1": 0, "n2": 1, "n3": 0}, "test")
    fast, slow = simulate(g, sched, "cpu"), simulate(g, sched, str(path))
    assert slow.makespan_ms > fast.makespan_ms
    a = analyze_memory(g, sched, timeline=fast).to_dict()
    b = analyze_memory(g, sched, timeline=slow).to_dict()
    for key in ("host_order_peak_bytes", "worst_case_peak_bytes", "arena_bytes", "arena_lower_bound_bytes"):
        assert a[key] == b[key], key


def test_missing_and_malformed_profile_files_are_clear_errors(tmp_path):
    with pytest.raises(ModelSpecError, match="no device profile file"):
        get_device(str(tmp_path / "nope.json"))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "streamplan.device", "version": 1, "profile": {"name": "x"}}))
    with pytest.raises(FileFormatError, match="malformed device profile"):
        get_device(str(bad))
    data = json.loads(profile_to_json(calibrated()))
    data["profile"]["kernel_fixed_ms"] = -1
    bad.write_text(json.dumps(data))
    with pytest.raises(FileFormatError, match="kernel_fixed_ms"):
        get_device(str(bad))
    data = json.loads(profile_to_json(calibrated()))
    data["profile"]["calibration"]["curves"][0]["points"] = [[1, 0]]
    bad.write_text(json.dumps(data))
    with pytest.raises(FileFormatError, match="time > 0"):
        get_device(str(bad))
    other = tmp_path / "other.json"
    other.write_text("{}")
    with pytest.raises(FileFormatError, match="not a device profile"):
        get_device(str(other))
    with pytest.raises(ModelSpecError, match="profile file"):
        get_device("tpu9")


def test_an_edited_profile_file_is_read_again(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(profile_to_json(calibrated()))
    assert get_device(str(path)).kernel_fixed_ms == calibrated().kernel_fixed_ms
    path.write_text(profile_to_json(calibrated(kernel_fixed_ms=0.5)) + "\n")
    assert get_device(str(path)).kernel_fixed_ms == 0.5


def test_time_curves_interpolate_log_log_and_keep_the_end_rates():
    c = TimeCurve("relu", "bytes", ((1e3, 0.001), (1e5, 0.1)))
    assert c.time_ms(1e4) == pytest.approx(0.01)  # a power law between the points
    assert c.time_ms(1e6) == pytest.approx(1.0)  # beyond the last point: its rate
    assert c.time_ms(100) == pytest.approx(0.0001)
    g = GemmCurve("gemm", 1e12, 10.0, 0.0, 0.0)
    assert g.time_ms(2e9, (10, 100, 100)) == pytest.approx(4.0)  # half the rows' saturation: half the rate


def test_measured_curves_cost_ops_of_their_kind_and_lock_share_on_the_cpu_runtime():
    from streamplan.frontends.builder import GraphBuilder

    b = GraphBuilder("k")
    x = b.input("x", (1000,))
    y = b.relu(x, name="r")
    z = b.unary("tanh", y, name="t")  # no curve for tanh nor its family: the roofline
    g = b.build([z])
    model = AnalyticCostModel(calibrated())
    relu = g.node("r")
    assert model.op_time_ms(g, relu) == pytest.approx(
        model.fixed_ms + 0.001 * (8000 / 1e3) ** (math_log_slope())
    )
    d = model.demand(g, relu)
    assert 0 < d.lock < 1 and d.sm == pytest.approx(0.5)
    assert model.body_ms(g, g.node("t")) > 0


def math_log_slope() -> float:
    import math

    return math.log(0.05 / 0.001) / math.log(1e6 / 1e3)
