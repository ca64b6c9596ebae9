"""``Session``: one model's graph, the settings it is analysed under, and every verb on it.

``streamplan.analyze(model)`` makes one from a zoo name, a model spec, a graph, or a
``torch.nn.Module`` with example inputs; the command line makes one per command. A
session owns its cost model and caches what it computed (a policy's run, a run's memory
figures), so asking twice is free; ``with_settings`` gives a session on the same graph
under other settings, sharing the caches::

    import streamplan

    s = streamplan.analyze("seed-example2", device="h100")
    print(s.compare(["sequential", "asap"]))
    print(s.explain("asap", vs="sequential"))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from streamplan.app.analysis import MemoryCurve, PolicyRow, PolicyRun, compare_policies
from streamplan.app.analysis import memory_curve as _memory_curve
from streamplan.app.analysis import run_policy as _run_policy
from streamplan.app.analysis import run_schedule as _run_schedule
from streamplan.app.explain import ExplainResult, explain_run
from streamplan.app.fusion_note import fusion_note
from streamplan.app.memory import MemoryAnalysis, analyze_run_memory
from streamplan.app.training import TrainingAnswer, training_answer
from streamplan.cost.opcost import CostModel
from streamplan.cost.timeline import Timeline
from streamplan.errors import ModelSpecError, ScheduleError
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.progress import ProgressFn, no_progress
from streamplan.schedule.context import ScheduleContext
from streamplan.schedule.registry import BASELINE_POLICY
from streamplan.schedule.settings import Settings

DEFAULT_POLICIES: tuple[str, ...] = ("sequential", "memory", "wavefront", "asap", "nimble", "ios")


@dataclass(frozen=True)
class LoadedSchedule:
    """A saved schedule checked against the session's graph: its run, and the notes the check
    made (made for another batch of the same graph, say)."""

    run: PolicyRun
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Comparison:
    """Every policy's row on one graph under one ``Settings`` (the ``compare`` command's result);
    for a training step, ``answer`` says whether and where each policy raises the peak."""

    model: str
    settings: Settings
    rows: tuple[PolicyRow, ...]
    answer: TrainingAnswer | None = None

    def row(self, policy: str) -> PolicyRow:
        """The row of ``policy`` (``KeyError`` when it was not compared)."""
        for r in self.rows:
            if r.policy == policy:
                return r
        raise KeyError(policy)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"model": self.model, "rows": [r.to_dict() for r in self.rows]}
        if self.answer is not None:
            d["answer"] = self.answer.to_dict()
        return d

    def __str__(self) -> str:
        lines = [f"{self.model} on {self.settings.device}: policy, streams, makespan, worst-case peak"]
        for r in self.rows:
            if r.error:
                lines.append(f"  {r.policy:<12} failed: {r.error}")
                continue
            wc = r.memory.worst_case.upper_bytes / (1 << 20) if r.memory is not None else float("nan")
            speed = f" ({r.speedup:.2f}x)" if r.speedup else ""
            lines.append(
                f"  {r.policy:<12} {r.streams:>2} streams  {r.makespan_ms:9.3f} ms{speed}  {wc:10.2f} MiB"
            )
        if self.answer is not None:
            lines += [f"  {line}" for line in self.answer.lines]
        return "\n".join(lines)


class Session:
    """A graph under ``Settings``, with the verbs of every analysis and cached results.

    ``source`` is what the graph was made from (a ``ModelRequest``, ``(module, inputs)``, or
    ``(TrainingProblem, optimizer)`` for a module's training step): what
    ``run`` executes for real and compares with eager PyTorch. ``progress`` is called with
    each step of long work (``streamplan.progress``).
    """

    def __init__(
        self,
        graph: Graph,
        settings: Settings | None = None,
        *,
        source: Any = None,
        progress: ProgressFn = no_progress,
        _shared: dict[str, dict] | None = None,
    ):
        self.graph = graph
        self.settings = settings if settings is not None else Settings()
        self.source = source
        self.progress = progress
        # caches shared by every session on this graph (with_settings): keyed by settings
        self._shared = _shared if _shared is not None else {"cost": {}, "runs": {}, "memory": {}}

    def __repr__(self) -> str:
        return f"Session({self.graph.name!r}, {len(self.graph.nodes)} ops, {self.settings!r})"

    # -- settings, cost model, context --------------------------------------------------

    def with_settings(self, settings: Settings | None = None, **changes: Any) -> Session:
        """A session on the same graph under ``settings`` (or these settings with ``changes``)."""
        new = (settings or self.settings).replace(**changes) if changes else (settings or self.settings)
        return Session(self.graph, new, source=self.source, progress=self.progress, _shared=self._shared)

    @property
    def cost(self) -> CostModel:
        """The cost model of these settings (made once per device, table and CUDA-graph mode)."""
        s = self.settings
        key = (s.device, s.measured, s.cuda_graphs)
        cache = self._shared["cost"]
        if key not in cache:
            cache[key] = s.cost_model()
        return cache[key]

    def context(self, policy: str | None = None) -> ScheduleContext:
        """The scheduling context these settings give ``policy`` (on the session's cost model)."""
        return self.settings.context(policy, cost=self.cost, progress=self.progress)

    # -- schedules ----------------------------------------------------------------------

    def schedule(self, policy: str) -> PolicyRun:
        """``policy``'s verified schedule (fused as the settings say) and its simulated timeline."""
        key = (policy, self.settings)
        runs = self._shared["runs"]
        if key not in runs:
            runs[key] = _run_policy(self.graph, policy, self.context(policy))
        return runs[key]

    def run_of(self, schedule: StreamSchedule) -> PolicyRun:
        """A schedule in hand, verified against the graph (or the kernels its fusion record
        rebuilds) and simulated."""
        return _run_schedule(self.graph, schedule, self.context())

    def load_schedule(self, path: str) -> LoadedSchedule:
        """A saved schedule (``streamplan schedule -o FILE``) checked against this graph: made
        for another graph and not fitting it is a ``ScheduleError``; made for another batch of
        the same ops, a note. A schedule runs the kernels it was made for, so settings whose
        fusion disagrees with its record are refused rather than ignored."""
        from streamplan.fusion.plan import fuses
        from streamplan.ir.fingerprint import fingerprint_mismatch
        from streamplan.ir.schedule import structure_problems

        s = StreamSchedule.load(path)
        made, wanted = s.fusion_mode, self.settings.fusion
        if fuses(wanted) and made != wanted:
            raise ScheduleError(
                f"the schedule was made with --fusion {made}, not {wanted}",
                where=path,
                hint=f"a saved schedule keeps its own fusion: drop --fusion, or save one with --fusion {wanted}",
            )
        notes: list[str] = []
        mismatch = fingerprint_mismatch(s.meta, self.graph)
        if mismatch is not None:
            if structure_problems(self.graph, s):
                raise ScheduleError(
                    mismatch, where=path, hint="make a schedule for this model with `streamplan schedule`"
                )
            notes.append(f"{mismatch}; its ops are the same, so it is used as it is")
        return LoadedSchedule(self.run_of(s), tuple(notes))

    def _run(self, run: PolicyRun | str) -> PolicyRun:
        return self.schedule(run) if isinstance(run, str) else run

    # -- analyses -----------------------------------------------------------------------

    def simulate(self, run: PolicyRun | str) -> Timeline:
        """The simulated timeline of ``run`` (a policy's name or a run)."""
        return self._run(run).timeline

    def compare(
        self,
        policies: Sequence[str] = DEFAULT_POLICIES,
        *,
        memory: bool = True,
        schedules: Sequence[tuple[str, StreamSchedule]] = (),
    ) -> Comparison:
        """Every policy's row (the baseline first), then one row per saved schedule."""
        rows = compare_policies(
            self.graph,
            list(policies),
            self.settings.context(cost=self.cost, progress=self.progress),
            memory=memory,
            includes=self.settings.includes,
            schedules=schedules,
        )
        answer = training_answer(rows) if self.graph.is_training and memory else None
        return Comparison(self.graph.name, self.settings, tuple(rows), answer)

    def memory(self, run: PolicyRun | str) -> MemoryAnalysis:
        """Every memory figure of ``run`` with the allocator replays (cached per run)."""
        run = self._run(run)
        key = (run.schedule, run.fusion_mode, self.settings)
        cache = self._shared["memory"]
        if key not in cache:
            cache[key] = analyze_run_memory(
                self.graph,
                run,
                self.context(),
                includes=self.settings.includes,
                device_memory_bytes=self.settings.device_memory_bytes,
            )
        return cache[key]

    def explain(self, run: PolicyRun | str, *, vs: PolicyRun | str | None = BASELINE_POLICY) -> ExplainResult:
        """Which tensors set ``run``'s peaks; with ``vs``, what made more of them coexist than
        under that schedule of the same kernels."""
        import dataclasses

        from streamplan.fusion.plan import FusedSchedule, schedule_same_kernels

        run = self._run(run)
        ctx = self.context()
        base = None
        if isinstance(vs, PolicyRun):
            base = vs.schedule
        elif vs and vs != run.policy:
            planned = FusedSchedule(run.scheduled_graph(self.graph), run.schedule, run.fusion)
            base = schedule_same_kernels(self.graph, planned, vs, self.context(vs))
        result = explain_run(self.graph, run, ctx, vs_schedule=base)
        return dataclasses.replace(result, fusion=fusion_note(self.graph, run, ctx))

    def curve(self, run: PolicyRun | str) -> MemoryCurve:
        """``run``'s live memory over simulated time and its worst-case peak (what ``plot`` draws)."""
        return _memory_curve(self.graph, self._run(run), self.context())

    def pareto(self, *, points: int | None = None):
        """The latency/memory front of budgeted schedules, with every fixed policy for reference."""
        from streamplan.app.budget import pareto_front
        from streamplan.budget.pareto import DEFAULT_POINTS
        from streamplan.schedule.context import MemoryBudget

        figure = self.settings.budget.figure if self.settings.budget is not None else "worst_case"
        inc = self.settings.includes
        budget = MemoryBudget(limit_bytes=0, figure=figure, includes=inc)
        return pareto_front(
            self.graph,
            self.context("budget"),
            points=DEFAULT_POINTS if points is None else points,
            budget=budget,
        )

    def remat(self, budget: str | int, *, policy: str = "asap", **options: Any):
        """The fastest rematerialization plan and ``policy`` schedule whose worst case fits
        ``budget`` (``streamplan.units`` grammar; ``0.5x`` is half today's worst case)."""
        from streamplan.app.remat import plan_remat

        return plan_remat(
            self.graph,
            budget,
            policy=policy,
            ctx=self.context(policy),
            includes=self.settings.includes,
            **options,
        )

    def codegen(self, run: PolicyRun | str, *, class_name: str | None = None):
        """``run`` written as a self-contained, torch-only Python module."""
        from streamplan.app.codegen import codegen_run

        model = self._spec()
        return codegen_run(self.graph, self._run(run), self.context(), model=model, class_name=class_name)

    def report(
        self, policies: Sequence[str] = DEFAULT_POLICIES, *, explain: bool = True, pareto_points: int = 0
    ):
        """Everything the HTML report shows (``streamplan.report.html`` renders it)."""
        from streamplan.app.report import report_model

        return report_model(
            self.graph,
            list(policies),
            self.settings.context(cost=self.cost, progress=self.progress),
            model=self._spec() or self.graph.name,
            includes=self.settings.includes,
            explain=explain,
            pareto_points=pareto_points,
        )

    def run(
        self,
        run: PolicyRun | str = "asap",
        *,
        on: str = "cpu",
        chaos: bool = False,
        repeat: int = 5,
        seed: int = 0,
    ):
        """Execute ``run``'s schedule for real on ``on`` (``cpu`` or ``cuda``), compare its outputs
        with eager PyTorch and its measurements with the predictions."""
        from streamplan.app.run import run_model
        from streamplan.frontends.training import TrainingProblem
        from streamplan.models import ModelRequest

        if self.source is None:
            raise ModelSpecError(
                f"{self.graph.name}: a session on a graph alone has no model to run",
                hint="analyze a model spec or a torch.nn.Module to run it",
            )
        schedule = None if isinstance(run, str) else run.schedule
        policy = run if isinstance(run, str) else run.policy
        model, batch, train, optimizer = self.source, None, False, "none"
        if isinstance(self.source, ModelRequest):
            r = self.source
            model, batch, train, optimizer = r.spec, r.batch, r.train, r.optimizer
        elif isinstance(self.source[0], TrainingProblem):
            (model, optimizer), train = self.source, True
        return run_model(
            model,
            policy,
            self.context(policy),
            target=on,
            graph=self.graph,
            batch=batch,
            chaos=chaos,
            repeat=repeat,
            seed=seed,
            schedule=schedule,
            train=train,
            optimizer=optimizer,
        )

    def _spec(self) -> str | None:
        """The model spec the graph was made from (None for a module or a graph)."""
        from streamplan.models import ModelRequest

        return self.source.spec if isinstance(self.source, ModelRequest) else None


def analyze(
    model: Any,
    example_inputs: Any = None,
    *,
    train: bool = False,
    optimizer: str = "none",
    loss_fn: Any = None,
    targets: Sequence[Any] = (),
    batch: int | None = None,
    dtype: str | None = None,
    name: str | None = None,
    cache: bool = True,
    progress: ProgressFn = no_progress,
    settings: Settings | None = None,
    **setting_fields: Any,
) -> Session:
    """A ``Session`` on ``model`` under ``settings`` (or ``Settings(**setting_fields)``).

    ``model`` is a model spec (a zoo name, ``random:N``, ``graph.json``, ``file.py:function``,
    ``model.onnx``; captured through the capture cache unless ``cache=False``), a ``Graph``, or
    a ``torch.nn.Module`` with ``example_inputs``. ``train=True`` makes it one training step
    (``optimizer``: none, sgd, momentum or adam; for a module, ``loss_fn(output, *targets)``,
    the sum of the outputs when None).
    """
    if settings is not None and setting_fields:
        raise ScheduleError("give either settings= or setting fields, not both")
    settings = settings if settings is not None else Settings(**setting_fields)
    if isinstance(model, Graph):
        if train or batch is not None or dtype is not None or example_inputs is not None:
            raise ModelSpecError(
                f"{model.name}: a graph is already captured: train, batch, dtype and example inputs "
                "do not apply to it",
                hint="pass the model spec or the module to capture it with them",
            )
        return Session(model, settings, progress=progress)
    if isinstance(model, str):
        from streamplan.cache import CaptureCache
        from streamplan.models import ModelRequest

        if example_inputs is not None:
            raise ModelSpecError(
                f"{model}: a model spec makes its own example inputs", hint="drop example_inputs"
            )
        if optimizer != "none" and not train:
            raise ModelSpecError(f"optimizer={optimizer!r} needs train=True", hint="add train=True")
        request = ModelRequest(model, batch=batch, dtype=dtype, train=train, optimizer=optimizer)
        graph = request.load(cache=CaptureCache() if cache else None, progress=progress)
        return Session(graph, settings, source=request, progress=progress)
    if example_inputs is None:
        raise ModelSpecError(
            f"cannot analyze a {type(model).__name__} without example inputs",
            hint="analyze(module, example_inputs) with a tuple of tensors, or a model spec string",
        )
    inputs = example_inputs if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    if batch is not None or dtype is not None:
        raise ModelSpecError(
            "batch and dtype rebuild a model spec's inputs; a module is captured with the inputs given",
            hint="pass example inputs of the batch size and dtype you want",
        )
    if train:
        from streamplan.frontends.training import TrainingProblem, capture_training

        problem = TrainingProblem(model, tuple(inputs), loss_fn, tuple(targets), "the given loss function")
        graph = capture_training(problem, optimizer=optimizer, name=name)
        return Session(graph, settings, source=(problem, optimizer), progress=progress)
    from streamplan.frontends.torch_capture import capture

    graph = capture(model, tuple(inputs), name=name)
    return Session(graph, settings, source=(model, tuple(inputs)), progress=progress)
