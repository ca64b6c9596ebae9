"""What runs in a worker process (a local pool's or a Ray worker's): captures and jobs.

``capture(request)`` loads one model and returns its graph as graph JSON, the form
that travels between processes and machines (and through Ray's object store); every
job of that request then runs ``run_job(job, settings, capture)``: the same
``Session.compare`` as ``streamplan compare``, for one policy, plus the sequential
makespan of the graph for the speedup. Nothing here raises for a failing job: the
error goes into the job's row and the sweep goes on.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from streamplan.errors import StreamplanError
from streamplan.ir.graph import Graph
from streamplan.models import ModelRequest
from streamplan.sweep.rows import SweepRow
from streamplan.sweep.spec import Job, SweepSettings

_CACHED_GRAPHS = 4  # parsed graphs a worker keeps (a few models' jobs interleave)


@dataclass(frozen=True)
class Capture:
    """One model request's graph as graph JSON, or why it could not be loaded."""

    request: ModelRequest
    graph_json: str | None
    error: str | None = None
    capture_s: float = 0.0


def init_worker() -> None:
    """Set up a pool worker: Ctrl-C is the parent's to handle (it stops the sweep and ends
    the workers), and torch keeps to one thread so that workers do not fight over cores."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def capture(request: ModelRequest) -> Capture:
    """Load ``request``'s graph (a torch capture for torch models) as graph JSON."""
    from streamplan.ir.serialize import graph_to_dict

    t0 = time.perf_counter()
    try:
        graph = request.load()
        text = json.dumps(graph_to_dict(graph), separators=(",", ":"))
    except Exception as e:  # any failure of the user's model is that model's rows' error
        return Capture(request, None, error_text(e), time.perf_counter() - t0)
    _remember(request, text, graph)
    return Capture(request, text, None, time.perf_counter() - t0)


def run_job(job: Job, settings: SweepSettings, shared: Capture | None = None) -> SweepRow:
    """One job's row: its policy scheduled, verified, simulated and (with ``settings.memory``)
    analysed on the job's graph, ``shared``'s when given, else loaded here."""
    from streamplan.app.session import Session

    t0 = time.perf_counter()
    try:
        if shared is not None and shared.error is not None:
            return SweepRow.failed(job, settings, f"loading the model failed: {shared.error}")
        graph = _graph(job.request(), shared)
        session = Session(graph, job.settings(settings))
        (row,) = session.compare([job.policy], memory=settings.memory).rows
        d = row.to_dict()
        if d.get("speedup") is None and d.get("makespan_ms"):
            d["speedup"] = _baseline_ms(job, settings, graph) / d["makespan_ms"]
        return SweepRow.from_compare(job, settings, d, graph=graph.name, elapsed_s=time.perf_counter() - t0)
    except Exception as e:
        return SweepRow.failed(job, settings, error_text(e), elapsed_s=time.perf_counter() - t0)


def error_text(e: BaseException) -> str:
    """A failure in one line: a user error as the CLI would say it, anything else with its type."""
    if isinstance(e, StreamplanError):
        return " ".join(line.strip() for line in e.short().splitlines())
    return f"internal error: {type(e).__name__}: {e}"


# Per-process caches: a worker runs many jobs of the same graph, which it parses once and
# whose sequential makespan (the speedup's baseline) it simulates once per device.
_graphs: OrderedDict[ModelRequest, tuple[int, Graph]] = OrderedDict()
_baselines: dict[tuple[Any, ...], float] = {}


def _remember(request: ModelRequest, text: str, graph: Graph) -> None:
    _graphs[request] = (hash(text), graph)
    _graphs.move_to_end(request)
    while len(_graphs) > _CACHED_GRAPHS:
        _graphs.popitem(last=False)


def _graph(request: ModelRequest, shared: Capture | None) -> Graph:
    if shared is None:  # no shared capture: load it here (what sharing saves)
        return request.load()
    assert shared.graph_json is not None
    cached = _graphs.get(request)
    if cached is not None and cached[0] == hash(shared.graph_json):
        _graphs.move_to_end(request)
        return cached[1]
    from streamplan.ir.serialize import graph_from_dict

    graph = graph_from_dict(json.loads(shared.graph_json), source=request.spec)
    _remember(request, shared.graph_json, graph)
    return graph


def _baseline_ms(job: Job, settings: SweepSettings, graph: Graph) -> float:
    from streamplan.app.analysis import run_policy
    from streamplan.schedule.registry import BASELINE_POLICY

    # the sequential job of the same graph and context (no budget: sequential takes none)
    base = dataclasses.replace(job, policy=BASELINE_POLICY, budget=None)
    key = (base.key(), graph.name, len(graph.nodes), settings)
    if key not in _baselines:
        if len(_baselines) > 256:
            _baselines.clear()
        _baselines[key] = run_policy(graph, BASELINE_POLICY, base.context(settings)).makespan_ms
    return _baselines[key]
