"""``run`` on the CPU with a built-in profile far from the measured latency says how to calibrate; repetitions
far apart say the machine was busy."""

from __future__ import annotations

import dataclasses
import io

from rich.console import Console

from streamplan.app.context import make_context
from streamplan.app.run import profile_for, run_model
from streamplan.report.views import run_lines


def _text(report) -> str:  # noqa: ANN001
    out = io.StringIO()
    console = Console(file=out, width=250)
    for line in run_lines(report, target="cpu", repeat=1):
        console.print(line)
    return out.getvalue()


def test_a_built_in_profile_far_off_points_to_calibrate_and_a_close_or_calibrated_one_does_not():
    report = run_model(
        "random:12:3", "sequential", make_context(device=profile_for("cpu")), target="cpu", repeat=1
    )
    measured = report.comparison.measured_ms

    def predicting(ratio: float, profile: str = report.profile):
        timeline = dataclasses.replace(report.simulated, makespan_ms=measured * ratio)
        return dataclasses.replace(report, simulated=timeline, profile=profile)

    assert report.profile == "cpu"
    assert "streamplan calibrate --on cpu" in _text(predicting(0.3))
    assert "streamplan calibrate --on cpu" in _text(predicting(1.6))
    assert "streamplan calibrate" not in _text(predicting(1.1))
    assert "streamplan calibrate" not in _text(predicting(0.3, profile="cpu-calibrated"))


def test_repetitions_far_apart_say_the_machine_was_busy():
    report = run_model(
        "random:12:3", "sequential", make_context(device=profile_for("cpu")), target="cpu", repeat=3
    )

    def timed(*times: float, chaos: bool = False):
        result = dataclasses.replace(report.comparison.result, times_ms=times, chaos=chaos)
        return dataclasses.replace(report, comparison=dataclasses.replace(report.comparison, result=result))

    assert "took 10.000 ms to 14.000 ms (38% apart): the machine's speed moved" in _text(
        timed(10.0, 14.0, 10.5)
    )
    assert "machine's speed moved" not in _text(timed(10.0, 10.4, 10.2))
    assert "machine's speed moved" not in _text(timed(10.0, 20.0))  # two: nothing to call typical
    assert "machine's speed moved" not in _text(timed(10.0, 14.0, 10.5, chaos=True))  # delays vary on purpose


def test_a_profile_calibrated_on_a_drifting_machine_is_named_when_a_run_disagrees():
    report = run_model(
        "random:12:3", "sequential", make_context(device=profile_for("cpu")), target="cpu", repeat=1
    )
    measured = report.comparison.measured_ms

    def calibrated(drift, ratio: float):
        timeline = dataclasses.replace(report.simulated, makespan_ms=measured * ratio)
        return dataclasses.replace(report, simulated=timeline, profile="cpu-calibrated", profile_drift=drift)

    assert "calibrated while the machine's speed varied by 51%" in _text(calibrated(0.51, 1.4))
    assert "varied by" not in _text(calibrated(0.51, 1.1))  # the run agrees: nothing to explain
    assert "varied by" not in _text(calibrated(0.05, 1.4))  # a steady calibration: not the cause
    assert report.profile_drift is None  # a built-in profile was never calibrated here
    assert calibrated(0.51, 1.4).to_dict()["profile_drift"] == 0.51
