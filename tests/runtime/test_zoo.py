"""Every zoo model at batch 1 (small inputs) under every policy, with and without chaos.

Inputs are shrunk (images to 96x96 or 80x80, sequences to 16 tokens) to keep the
suite fast on two shared cores; the graphs keep all their ops and branches.
"""

from __future__ import annotations

import pytest
import torch

from helpers.models import RUNNABLE_MODELS, small_model
from helpers.shared import stored_schedule
from streamplan.memory.host_order import host_order_peak_bytes
from streamplan.runtime import compare_outputs, run
from streamplan.runtime.compare import _flat_tensors
from streamplan.runtime.interpret import params_from_module
from streamplan.schedule.context import ScheduleContext
from streamplan.schedule.registry import POLICIES
from streamplan.schedule.verify import verify_schedule

# budget returns one of the other policies' schedules (or the same streams launched in another
# order) and runs every one of them, ios included: tests/budget runs its schedules for real
RUN_POLICIES = [p for p in POLICIES if p != "budget"]
CTX = ScheduleContext(max_streams=4, time_limit_s=2.0)


@pytest.fixture(scope="module", params=RUNNABLE_MODELS)
def zoo_model(request):
    name = request.param
    module, inputs, graph = small_model(name)
    with torch.no_grad():
        ref = _flat_tensors(module(*inputs))
    return name, graph, params_from_module(graph, module), inputs, ref


@pytest.mark.parametrize("policy", RUN_POLICIES)
@pytest.mark.slow
def test_zoo_matches_eager(zoo_model, policy: str) -> None:
    name, graph, params, inputs, ref = zoo_model
    schedule = stored_schedule(graph, policy, CTX)  # the codegen tests run the same schedules
    verify_schedule(graph, schedule)
    for chaos in (False, True):
        result = run(graph, schedule, list(inputs), params=params, chaos=chaos)
        ok, max_abs, _ = compare_outputs(result.outputs, ref)
        assert ok, f"{name} {policy} chaos={chaos}: max abs error {max_abs}"
        if (
            policy == "sequential" and not chaos
        ):  # one stream: measured live bytes = the memory model's figure
            predicted = host_order_peak_bytes(graph, schedule)
            assert result.measured_peak_bytes == predicted
