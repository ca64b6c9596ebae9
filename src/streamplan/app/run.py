"""Run a schedule for real and set the measurements beside the predictions (the ``run`` command)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamplan.app.display import Shown
from streamplan.cost.simulate import simulate
from streamplan.cost.timeline import Timeline
from streamplan.errors import ModelSpecError
from streamplan.fusion.transform import kernel_count
from streamplan.ir.graph import Graph
from streamplan.ir.includes import EVERYTHING
from streamplan.ir.schedule import StreamSchedule
from streamplan.ir.training import training_step
from streamplan.memory.worst_case import WorstCasePeak
from streamplan.schedule.context import DEFAULT_CONTEXT, ScheduleContext

TARGETS = ("cpu", "cuda")


def profile_for(target: str) -> str:
    """The cost-model profile for an execution target: ``cpu``, or the GPU's family when known."""
    if target == "cpu":
        return "cpu"
    import torch

    name = torch.cuda.get_device_name(0).lower() if torch.cuda.is_available() else ""
    for family in ("h200", "h100", "a100", "v100"):
        if family in name:
            return family
    return "h100"


def check_run(target: str, *, cuda_graphs: bool = False, trace: bool = False) -> None:
    """Refuse a run that cannot happen, before any capture: a profile named as the target, an
    unknown target or CUDA where there is none, CUDA graphs off the GPU, a per-op trace off the
    CPU runtime."""
    from streamplan.cost.devices import DEVICES

    if target in DEVICES and target not in TARGETS:
        raise ModelSpecError(
            f"--on takes where to execute, not a profile: {target!r}", hint="use --on cpu or --on cuda"
        )
    check_target(target)
    if cuda_graphs and target != "cuda":
        raise ModelSpecError(
            "CUDA graphs are captured on a GPU only", hint="use --on cuda, or drop --cuda-graphs"
        )
    if trace and target != "cpu":
        raise ModelSpecError(
            "--trace records per-op times on the CPU runtime only",
            hint="drop --trace, or use torch.profiler around streamplan.runtime.run on the GPU",
        )


def check_target(target: str) -> None:
    """A clear error for an unknown target, or CUDA where there is none."""
    if target not in TARGETS:
        raise ModelSpecError(f"unknown execution target {target!r}", hint="run on 'cpu' or 'cuda'")
    if target == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ModelSpecError("no CUDA device is available here", hint="run on the CPU instead")


def _rel(pred: float | None, meas: float | None) -> float | None:
    if pred is None or not meas:
        return None
    return (pred - meas) / meas


@dataclass(frozen=True)
class CudaPrediction:
    """The ``torch-cuda`` replay's prediction of the caching allocator's peaks."""

    max_memory_allocated_bytes: int
    max_memory_reserved_bytes: int
    includes_op_memory: bool


@dataclass(frozen=True)
class RunReport(Shown):
    """A real run (outputs vs eager, measured time and memory) beside the predictions."""

    comparison: Any  # runtime.Comparison (typed loosely: this module must not import torch)
    graph: Graph
    profile: str
    simulated: Timeline
    simulated_peak_bytes: int
    worst_case: WorstCasePeak
    cuda: CudaPrediction | None
    predicted_tracked_peak_bytes: int | None
    profile_drift: float | None = None  # how much the machine drifted while the profile was calibrated

    def __str__(self) -> str:
        c = self.comparison
        verdict = "match" if c.matches_eager else "DIFFER from"
        return (
            f"{self.graph.name} / {self.schedule.policy} on {c.device}: outputs {verdict} {c.reference} "
            f"(max relative error {c.max_rel_error:.2e}); measured {c.measured_ms:.3f} ms, predicted "
            f"{self.simulated.makespan_ms:.3f} ms ({self.profile} profile); measured peak "
            f"{c.measured_peak_bytes / (1 << 20):.2f} MiB, predicted {self.simulated_peak_bytes / (1 << 20):.2f} MiB"
        )

    @property
    def schedule(self) -> StreamSchedule:
        return self.comparison.schedule

    @property
    def fusion_mode(self) -> str:
        return self.schedule.fusion_mode.value

    @property
    def fused(self) -> bool:
        """Whether the run executed fused kernels."""
        return self.schedule.fusion is not None

    @property
    def kernels(self) -> int:
        """Kernels one run launches (fewer than ops when the schedule runs fused kernels)."""
        return kernel_count(self.graph)

    @property
    def chaos(self) -> bool:
        return self.comparison.result.chaos

    @property
    def latency_relative_error(self) -> float | None:
        # chaos delays are part of the measured time: a latency comparison would mean nothing
        return None if self.chaos else _rel(self.simulated.makespan_ms, self.comparison.measured_ms)

    @property
    def peak_relative_error(self) -> float | None:
        return _rel(self.simulated_peak_bytes, self.comparison.measured_peak_bytes)

    @property
    def allocated_relative_error(self) -> float | None:
        if self.cuda is None:
            return None
        return _rel(self.cuda.max_memory_allocated_bytes, self.comparison.result.max_memory_allocated_bytes)

    @property
    def tracked_peak_relative_error(self) -> float | None:
        return _rel(self.predicted_tracked_peak_bytes, self.comparison.result.tracked_peak_bytes)

    def to_dict(self) -> dict[str, Any]:
        d = self.comparison.to_dict()
        d["predicted_peak_bytes"] = self.simulated_peak_bytes
        d["predicted_ms"] = self.simulated.makespan_ms
        d["profile"] = self.profile
        d["profile_drift"] = self.profile_drift
        d["fusion"] = self.fusion_mode
        d["kernels"] = self.kernels
        d["predicted_worst_case_peak_bytes"] = {
            "lower": self.worst_case.lower_bytes,
            "upper": self.worst_case.upper_bytes,
            "exact": self.worst_case.exact,
        }
        d["peak_relative_error"] = self.peak_relative_error
        d["latency_relative_error"] = self.latency_relative_error
        d["latency_includes_chaos_delays"] = self.chaos
        d["memory_includes"] = "activations"
        step = training_step(self.graph)
        if step is not None:
            d["train"] = True
            d["optimizer"] = step.optimizer
            d["compared"] = ["loss", "gradients" if step.optimizer == "none" else "updated parameters"]
        if self.cuda is not None:
            d["predicted_max_memory_allocated_bytes"] = self.cuda.max_memory_allocated_bytes
            d["predicted_max_memory_reserved_bytes"] = self.cuda.max_memory_reserved_bytes
            d["allocated_relative_error"] = self.allocated_relative_error
            d["prediction_includes_op_memory"] = self.cuda.includes_op_memory
        if self.comparison.result.tracked_peak_bytes is not None:
            d["predicted_tracked_peak_bytes"] = self.predicted_tracked_peak_bytes
            d["tracked_peak_relative_error"] = self.tracked_peak_relative_error
        return d


def run_model(
    model: str | tuple[Any, Any],
    policy: str = "asap",
    ctx: ScheduleContext | None = None,
    *,
    target: str = "cpu",
    graph: Graph | None = None,
    batch: int | None = None,
    chaos: bool = False,
    repeat: int = 5,
    seed: int = 0,
    schedule: StreamSchedule | None = None,
    train: bool = False,
    optimizer: str = "none",
) -> RunReport:
    """Run ``model`` under ``policy`` (or a given ``schedule``) on ``target`` and predict it.

    ``model`` is a spec or ``(module, example_inputs)``; ``graph`` its captured graph
    when the caller has it. Predictions use ``ctx.cost`` (pass the profile of the
    target, ``profile_for(target)``, to compare like with like). ``train`` runs one
    training step with ``optimizer``'s update and compares its loss and gradients (or
    updated parameters) with eager ``loss.backward()`` and ``torch.optim``. With
    ``ctx.fusion`` the run executes fused kernels and the predictions are the kernels'.
    With ``ctx.cuda_graphs`` (CUDA only) the schedule is captured as one CUDA graph and
    replayed, and the prediction uses the simulator's CUDA-graph mode.
    """
    from streamplan.memory.simulated import simulated_memory
    from streamplan.memory.worst_case import worst_case_peak
    from streamplan.runtime import run_and_compare

    ctx = ctx or DEFAULT_CONTEXT
    check_target(target)
    if ctx.cuda_graphs and target != "cuda":
        raise ModelSpecError(
            "CUDA graphs are captured on a GPU only", hint="run on cuda, or without CUDA graphs"
        )
    if isinstance(model, str) and ".py:" in model and not train:  # the user's module: weights, reference
        from streamplan.model_files import load_python_module

        module, inputs = load_python_module(model, batch=batch)
        model = (module, inputs if isinstance(inputs, (tuple, list)) else (inputs,))
    ctx.progress(f"running {policy} on {target}", None, None)
    cmp = run_and_compare(
        model,
        policy,
        ctx=ctx,
        device=target,
        chaos=chaos,
        repeat=repeat,
        warmup=1 if repeat > 1 else 0,
        batch=batch,
        seed=seed,
        graph=graph,
        track_allocations=True,
        cuda_graph=ctx.cuda_graphs,
        schedule=schedule,
        train=train,
        optimizer=optimizer,
    )
    graph = cmp.graph
    ctx.progress("predicting", None, None)
    tl = simulate(graph, cmp.schedule, ctx.cost)
    sim_peak = simulated_memory(graph, cmp.schedule, tl).peak_bytes
    worst = worst_case_peak(graph, cmp.schedule)
    cuda = None
    if target == "cuda":
        from streamplan.memory.allocators import replay

        tc = replay(
            graph,
            cmp.schedule,
            "torch-cuda",
            timeline=tl,
            includes=EVERYTHING,
            op_memory=_op_memory(graph, cmp),
        )
        cuda = CudaPrediction(tc.allocated_peak_bytes, tc.reserved_peak_bytes, tc.op_memory)
    tracked = None
    if cmp.result.tracked_peak_bytes is not None:
        from streamplan.memory.allocators import replay

        tracked = replay(graph, cmp.schedule, "exact", op_memory=_op_memory(graph, cmp)).allocated_peak_bytes
    return RunReport(
        comparison=cmp,
        graph=graph,
        profile=ctx.cost.device_name,
        simulated=tl,
        simulated_peak_bytes=sim_peak,
        worst_case=worst,
        cuda=cuda,
        predicted_tracked_peak_bytes=tracked,
        profile_drift=_profile_drift(ctx.cost),
    )


def _profile_drift(cost: Any) -> float | None:
    """The drift recorded by the calibration behind ``cost`` (None: not a calibrated profile)."""
    from streamplan.cost.opcost import AnalyticCostModel

    return cost.device.calibration.drift if isinstance(cost, AnalyticCostModel) else None


def _op_memory(graph: Graph, cmp: Any):
    """The op scratch and stream workspaces measured before the run, as the replay takes them."""
    from streamplan.cost.measured import MeasuredTable
    from streamplan.memory.allocators import OpMemory

    measured = cmp.op_memory
    table = MeasuredTable(
        cmp.device,
        {},
        dict(measured.scratch_bytes) if measured else {},
        measured.stream_workspace_bytes if measured else 0,
    )
    return OpMemory.from_table(graph, table)
