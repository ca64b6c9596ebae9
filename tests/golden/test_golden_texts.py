"""Golden texts: refactors must not change these results silently.

Regenerate after an intended change with ``STREAMPLAN_UPDATE_GOLDEN=1 pytest tests/golden``
and review the diff like code.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers.models import graph_of
from streamplan.cost.simulate import simulate
from streamplan.ir.printer import format_graph
from streamplan.memory.report import analyze_memory
from streamplan.models import load_model
from streamplan.schedule.registry import make_schedule

HERE = Path(__file__).parent / "expected"
UPDATE = os.environ.get("STREAMPLAN_UPDATE_GOLDEN") == "1"


def check(name: str, text: str) -> None:
    path = HERE / name
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with STREAMPLAN_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} changed; if intended, regenerate (see module docstring)"


def summary(model: str, policies: tuple[str, ...], device: str = "v100") -> str:
    """Per policy: streams, events, simulated ms (4 decimals) and every memory figure in bytes."""
    g = graph_of(model)
    rows = {}
    for p in policies:
        s = make_schedule(g, p)
        tl = simulate(g, s, device)
        m = analyze_memory(g, s, timeline=tl).to_dict()
        rows[p] = {
            "streams": s.num_streams,
            "events": s.num_events,
            "makespan_ms": round(tl.makespan_ms, 4),
            "host_order": m["host_order_peak_bytes"],
            "worst_case": m["worst_case_peak_bytes"],
            "simulated": m["simulated_peak_bytes"],
            "torch_cuda": m["torch_cuda"],
            "arena": m["arena_bytes"],
            "arena_lower_bound": m["arena_lower_bound_bytes"],
        }
    return json.dumps({"model": model, "ops": len(g.nodes), "device": device, "rows": rows}, indent=1) + "\n"


def test_seed_example2_printed_graph_and_schedule():
    g = load_model("seed-example2")
    check("seed-example2.graph.txt", format_graph(g) + "\n")
    check("seed-example2.asap.txt", str(make_schedule(g, "asap")) + "\n")


def test_seed_examples_summary():
    policies = ("sequential", "memory", "wavefront", "asap", "nimble", "ios")
    check("seed-example1.json", summary("seed-example1", policies))
    check("seed-example2.json", summary("seed-example2", policies))


@pytest.mark.slow
def test_inception_v3_summary():
    check("inception_v3.json", summary("inception_v3", ("sequential", "wavefront", "asap", "nimble", "ios")))


@pytest.mark.slow
def test_squeezenet_summary():
    check(
        "squeezenet.json",
        summary("squeezenet", ("sequential", "memory", "wavefront", "asap", "nimble", "ios")),
    )
