"""Fitting a profile to measurements: on measurements made by a known profile, the fit finds it again."""

from __future__ import annotations

import math

import pytest

from streamplan.cost import AnalyticCostModel, Calibration, GemmCurve, Supply, TimeCurve, get_device, simulate
from streamplan.cost.benchmarks import DeviceMeasurements, TimedRun
from streamplan.cost.fit import fit_profile
from streamplan.cost.fit_curves import fit_gemm, monotone, time_weights
from streamplan.cost.kinds import OpFeatures
from streamplan.frontends.builder import GraphBuilder
from streamplan.schedule.events import with_derived_waits

TINY_MS = 0.002
TRUE = get_device("cpu").replace(
    name="true",
    sms=2,
    max_op_fraction=0.5,
    launch_overhead_ms=0.0,
    kernel_fixed_ms=0.012,
    event_record_ms=0.0,
    event_wait_ms=0.0,
    event_resume_ms=0.04,
    calibration=Calibration(
        curves=(
            TimeCurve("relu", "bytes", ((1e4, 0.002), (1e6, 0.05), (1e8, 8.0))),
            TimeCurve("add", "bytes", ((1e4, 0.003), (1e6, 0.08), (1e8, 12.0))),
        ),
        gemm_curves=(GemmCurve("conv", 1.5e11, 200.0, 20.0, 40.0), GemmCurve("gemm", 8e10, 30.0, 10.0, 10.0)),
        contention=Supply(sm=0.85, dram=1.6, interference=0.3),
        stream_bandwidth_bytes_per_s=2e10,
        fixed_holds_lock=True,
    ),
)


def _op_graph():
    b = GraphBuilder("ops")
    outs = []
    for i, (c, hw, k) in enumerate([(16, 56, 3), (32, 28, 3), (64, 28, 3), (64, 14, 5), (128, 14, 3), (256, 7, 3),
                                    (32, 56, 3), (128, 28, 3), (16, 14, 7), (512, 7, 3), (64, 56, 3), (8, 28, 3)]):  # fmt: skip
        outs.append(b.conv2d(b.input(f"x{i}", (1, c, hw, hw)), 2 * c, k, padding=k // 2, name=f"conv{i}"))
    for i, (m, k, n) in enumerate([(1, 256, 256), (32, 512, 512), (128, 256, 1024), (512, 64, 64), (8, 1024, 64),
                                   (256, 512, 128), (64, 64, 64), (16, 128, 2048), (1024, 128, 256), (4, 64, 512)]):  # fmt: skip
        outs.append(b.matmul(b.input(f"a{i}", (m, k)), b.param(f"w{i}", (k, n)), name=f"mm{i}"))
    for n in (1 << 10, 1 << 14, 1 << 18, 1 << 22):
        outs.append(b.relu(b.input(f"r{n}", (n,)), name=f"relu{n}"))
        outs.append(b.add(b.input(f"p{n}", (n,)), b.input(f"q{n}", (n,)), name=f"add{n}"))
    return b.build(outs)


def _chain(n: int):
    b = GraphBuilder("chain")
    x = b.input("x", (1,))
    for i in range(n):
        x = b.relu(x, name=f"r{i}")
    return b.build([x])


def _corun(kind: str, k: int):
    b = GraphBuilder(f"corun-{kind}")
    outs = []
    for c in range(k):
        if kind == "compute":
            x = b.input(f"x{c}", (1, 64, 28, 28))
            for i in range(4):
                x = b.conv2d(x, 64, 3, padding=1, name=f"c{c}_conv{i}")
        else:
            x = b.input(f"x{c}", (1 << 21,))
            for i in range(4):
                x = b.relu(x, name=f"c{c}_relu{i}")
        outs.append(x)
    g = b.build(outs)
    ids = g.node_ids
    one = with_derived_waits(g, ids, {op: 0 for op in ids}, "sequential")
    many = with_derived_waits(g, ids, {op: int(op.split("_")[0][1:]) for op in ids}, "many")
    return g, one, many


def _measurements() -> DeviceMeasurements:
    """What a calibration on a device that behaves exactly like ``TRUE`` would measure."""
    model = AnalyticCostModel(TRUE)
    ops = _op_graph()
    op_ms = {n.id: model.body_ms(ops, n) + TINY_MS for n in ops.nodes}
    chain = _chain(100)
    seq = with_derived_waits(chain, chain.node_ids, {op: 0 for op in chain.node_ids}, "sequential")
    ping = with_derived_waits(
        chain, chain.node_ids, {op: i % 2 for i, op in enumerate(chain.node_ids)}, "ping"
    )

    def timed(name, purpose, g, s, pair=None):
        return TimedRun(name, purpose, g, s, simulate(g, s, model).makespan_ms, pair=pair)

    runs = [timed("chain", "overhead", chain, seq), timed("pingpong", "events", chain, ping, "chain")]
    for kind, k in (("compute", 2), ("memory", 2), ("compute", 4), ("memory", 4)):
        g, one, many = _corun(kind, k)
        base = f"{kind} x{k} one stream"
        runs += [timed(base, "contention", g, one), timed(f"{kind} x{k}", "contention", g, many, base)]
    return DeviceMeasurements(
        "cpu", "synthetic", 2, ops, op_ms, TINY_MS, TRUE.kernel_fixed_ms, tuple(runs), meta={"date": "today"}
    )


@pytest.fixture(scope="module")
def fitted():
    return fit_profile(_measurements(), name="refit")


def test_the_fit_recovers_the_per_op_and_event_costs(fitted):
    p = fitted.profile
    assert p.name == "refit" and p.launch_overhead_ms == 0.0 and p.calibration.fixed_holds_lock
    assert p.kernel_fixed_ms == pytest.approx(TRUE.kernel_fixed_ms)
    assert p.event_resume_ms == pytest.approx(TRUE.event_resume_ms, rel=0.05)


def test_the_fitted_curves_reproduce_the_timed_ops(fitted):
    assert fitted.op_median_error < 0.05
    assert {"conv", "gemm", "relu", "add"} <= set(fitted.kinds)


def test_the_fit_reproduces_every_run_and_speedup(fitted):
    for r in fitted.runs:
        assert abs(r.error) < 0.05, r
        if r.speedup_error is not None:
            assert abs(r.speedup_error) < 0.03, r
    cal = fitted.profile.calibration
    assert cal.speedup_error is not None and cal.speedup_error < 0.03
    assert dict(cal.sources)["contention"].startswith("fitted to the speedups")


def test_monotone_curves_never_fall_as_work_grows():
    pts = monotone([(1, 5.0), (2, 3.0), (3, 4.0), (3, 6.0), (10, 20.0)])
    times = [t for _, t in pts]
    assert times == sorted(times) and [w for w, _ in pts] == [1, 2, 3, 10]


def test_gemm_fit_recovers_a_known_surface():
    true = GemmCurve("gemm", 1e11, 100.0, 30.0, 50.0)
    samples = []
    for m in (1, 8, 64, 512, 4096):
        for n in (16, 64, 256, 1024):
            for k in (16, 128, 1024):
                flops = 2 * m * n * k
                samples.append(
                    (OpFeatures("gemm", "gemm", flops, 0, (m, n, k)), true.time_ms(flops, (m, n, k)))
                )
    got = fit_gemm("gemm", samples)
    for f, ms in samples:
        assert math.isclose(got.time_ms(f.flops, f.gemm_mnk), ms, rel_tol=0.02)


def test_refining_on_other_models_undoes_a_family_measured_too_slow():
    import dataclasses

    from streamplan.cost.refine import refine_profile

    cal = TRUE.calibration
    slow_conv = dataclasses.replace(
        cal,
        gemm_curves=tuple(
            dataclasses.replace(g, peak_flops_per_s=g.peak_flops_per_s / 1.5) for g in cal.gemm_curves
        ),
    )
    wrong = TRUE.replace(calibration=slow_conv)
    runs = []
    for kind in ("compute", "memory"):
        for k in (2, 3, 4):
            g, one, _ = _corun(kind, k)
            runs.append((g, one, simulate(g, one, AnalyticCostModel(TRUE)).makespan_ms))
    refined = refine_profile(wrong, runs)
    g, one, _ = _corun("compute", 5)  # a model none of the runs was
    truth = simulate(g, one, AnalyticCostModel(TRUE)).makespan_ms
    before = simulate(g, one, AnalyticCostModel(wrong)).makespan_ms
    after = simulate(g, one, AnalyticCostModel(refined)).makespan_ms
    assert abs(after / truth - 1) < 0.1 < abs(before / truth - 1)
    assert "refined" in dict(refined.calibration.sources)


def test_time_weights_grow_with_the_square_root_of_time():
    assert time_weights([1.0, 4.0, 16.0]) == pytest.approx([0.5, 1.0, 2.0])
    assert time_weights([]) == []


def test_the_gemm_fit_gets_the_long_ops_right_when_the_short_ones_disagree():
    # long ops run at a plateau the four-number surface cannot follow while the many short ones
    # follow the surface (as 1 x 1 convolutions do on a CPU): the long ops, which make a model's
    # latency, decide the fit (unweighted, they come out 20% off)
    surface = GemmCurve("conv1x1", 2.5e11, 100.0, 40.0, 50.0)

    def sample(m: int, n: int, k: int) -> tuple[OpFeatures, float]:
        flops = 2 * m * n * k
        return OpFeatures("conv1x1", "conv1x1", flops, 0, (m, n, k)), 1e3 * flops / min(
            9e10, surface.rate(m, n, k)
        )

    long_ops = [sample(m, n, 512) for m in (196, 784, 3136) for n in (256, 512, 1024)]
    short_ops = [sample(m, n, k) for m in (16, 49, 196) for n in (16, 32, 64) for k in (16, 32, 64)]
    got = fit_gemm("conv1x1", long_ops + short_ops)
    errors = [abs(got.time_ms(f.flops, f.gemm_mnk) / ms - 1) for f, ms in long_ops]
    assert max(errors) < 0.12, errors


def test_a_machine_that_drifted_while_calibrating_widens_the_latency_error(fitted):
    """The probe timed at every phase: its range becomes the profile's drift, and half of it joins
    the in-sample latency error in quadrature (constants measured while the machine's speed moved
    by 40% are not better than about ±20%, however well they fit each other)."""
    from dataclasses import replace

    assert replace(_measurements(), probe_ms=(10.0, 10.0, 10.0, 10.0)).drift == 0.0
    steady = fitted.profile.calibration  # no probe: the in-sample error alone
    drifting = fit_profile(replace(_measurements(), probe_ms=(10.0, 10.0, 14.0, 10.0))).profile.calibration
    assert drifting.drift == pytest.approx(0.4)
    assert drifting.latency_error == pytest.approx(math.hypot(steady.latency_error, 0.2))
    assert drifting.speedup_error == pytest.approx(steady.speedup_error)  # alternated runs: left alone
    assert "fixed model" in drifting.source("drift") and "drift" in drifting.source("latency_error")
    assert steady.drift is None and "drift" not in steady.source("latency_error")  # no probe, nothing claimed
    # the profile file keeps it
    assert Calibration.from_dict(drifting.to_dict()).drift == pytest.approx(0.4)
