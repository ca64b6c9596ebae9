"""explain's latency part on the launch-bound case: Inception V3 on an h200 launched by a Python host
loop (10-20 us per op, PyTorch eager's cost; 15 us here, above the device's shortest kernel of about
11 us, fixed time and minimum body) without CUDA graphs."""

from __future__ import annotations

import pytest

from helpers.models import graph_of
from streamplan.app import explain_policy, make_context
from streamplan.cost import get_device
from streamplan.report.views import explain_lines

PYTHON_LAUNCHED_H200 = get_device("h200").replace(launch_overhead_ms=0.015)


@pytest.mark.slow
def test_inception_v3_on_h200_is_launch_bound_and_graphs_would_help():
    g = graph_of("inception_v3")
    result = explain_policy(g, "asap", make_context(device=PYTHON_LAUNCHED_H200))
    lat = result.latency
    assert lat is not None and not lat.cuda_graphs
    assert lat.launch_bound and lat.little_to_gain
    assert lat.speedup < 1.0  # asap is slower than one stream here
    assert lat.max_speedup < 1.15  # and no schedule can gain much
    assert lat.graphs is not None and lat.graphs.sequential_ms / lat.graphs.policy_ms > 1.5
    text = "\n".join(explain_lines(result))
    for words in (
        "launch-bound",
        "kernel launches",
        "CUDA graphs",
        "larger batch",
        "No schedule can take less",
    ):
        assert words in text
    d = result.to_dict()["latency"]
    assert d["launch_bound"] is True and d["with_cuda_graphs"]["policy_ms"] < d["sequential_ms"]
