"""explain states a speedup with the profile's uncertainty, and says when it may be a loss."""

from __future__ import annotations

import dataclasses

import pytest

from streamplan.app import explain_policy, make_context
from streamplan.cost import get_device
from streamplan.models import load_model
from streamplan.report.views import explain_lines


def profile_with_error(error):
    v100 = get_device("v100")
    return v100.replace(calibration=dataclasses.replace(v100.calibration, speedup_error=error))


@pytest.mark.parametrize(("error", "verdict"), [(0.9, "may be a loss"), (0.0001, "gain")])
def test_a_speedup_inside_its_uncertainty_may_be_a_loss(error, verdict):
    g = load_model("random:60:3")
    result = explain_policy(g, "asap", make_context(device=profile_with_error(error)))
    lat = result.latency
    assert lat.speedup > 1.0
    assert lat.speedup_uncertainty == pytest.approx(lat.speedup * error)
    assert lat.verdict == verdict
    text = "\n".join(explain_lines(result))
    assert f"{lat.speedup:.2f}x ± {lat.speedup_uncertainty:.2f}" in text
    assert ("may be a loss on this device" in text) is (verdict == "may be a loss")
    d = result.to_dict()["latency"]
    assert d["verdict"] == verdict and d["speedup_uncertainty"] == pytest.approx(lat.speedup_uncertainty)


def test_without_an_error_estimate_the_speedup_is_stated_plainly():
    g = load_model("random:60:3")
    result = explain_policy(g, "asap", make_context(device=profile_with_error(None)))
    assert result.latency.speedup_uncertainty is None
    assert " ± " not in "\n".join(explain_lines(result))


def test_a_latency_is_stated_with_the_profiles_typical_error():
    g = load_model("random:60:3")
    v100 = get_device("v100")
    drifted = v100.replace(calibration=dataclasses.replace(v100.calibration, latency_error=0.33))
    result = explain_policy(g, "asap", make_context(device=drifted))
    assert result.latency.latency_error == pytest.approx(0.33)
    assert "Latencies on this profile are typically off by 33%." in "\n".join(explain_lines(result))
    assert result.to_dict()["latency"]["latency_error"] == pytest.approx(0.33)
    unknown = v100.replace(calibration=dataclasses.replace(v100.calibration, latency_error=None))
    result = explain_policy(g, "asap", make_context(device=unknown))
    assert "typically off by" not in "\n".join(explain_lines(result))
