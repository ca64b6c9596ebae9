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

The rules a command used to apply itself live here, so a Python user gets them too: a
saved schedule is checked against the graph (``load_schedule``: refused when made for
another graph or fusion mode, a note when made for another batch), a budget needs a
policy that reads one (``Settings.check_policies``), and what capturing the model had to
assume is in ``notes`` rather than printed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from streamplan.app.analysis import MemoryCurve, PolicyRun, compare_policies
from streamplan.app.analysis import memory_curve as _memory_curve
from streamplan.app.analysis import run_policy as _run_policy
from streamplan.app.analysis import run_schedule as _run_schedule
from streamplan.app.comparison import Comparison
from streamplan.app.explain import ExplainResult, explain_run
from streamplan.app.fusion_note import fusion_note
from streamplan.app.memory import MemoryAnalysis, analyze_run_memory
from streamplan.app.saved import LoadedSchedule, ScheduleCheck, check_saved, load_saved
from streamplan.app.training import training_answer
from streamplan.cost.opcost import CostModel
from streamplan.cost.timeline import Timeline
from streamplan.errors import ModelSpecError
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import Fusion, StreamSchedule
from streamplan.progress import ProgressFn, no_progress
from streamplan.schedule.context import MemoryBudget, ScheduleContext
from streamplan.schedule.registry import BASELINE_POLICY
from streamplan.schedule.settings import Settings

DEFAULT_POLICIES: tuple[str, ...] = ("sequential", "memory", "wavefront", "asap", "nimble", "ios")

__all__ = ["DEFAULT_POLICIES", "Comparison", "LoadedSchedule", "ScheduleCheck", "Session"]


class Session:
    """A graph under ``Settings``, with the verbs of every analysis and cached results.

    ``source`` is what the graph was made from (a ``ModelRequest``, ``(module, inputs)``, or
    ``(TrainingProblem, optimizer)`` for a module's training step): what ``run`` executes for
    real and compares with eager PyTorch. ``progress`` is called with each step of long work
    (``streamplan.progress``). ``notes`` say what making the graph had to assume (a training
    step's loss defaulting to the sum of the outputs, say).
    """

    def __init__(
        self,
        graph: Graph,
        settings: Settings | None = None,
        *,
        source: Any = None,
        progress: ProgressFn = no_progress,
        notes: Sequence[str] = (),
        _shared: dict[str, dict] | None = None,
    ):
        self.graph = graph
        self.settings = settings if settings is not None else Settings()
        self.source = source
        self.progress = progress
        self.notes = tuple(notes)
        # caches shared by every session on this graph (with_settings): keyed by settings
        self._shared = _shared if _shared is not None else {"cost": {}, "runs": {}, "memory": {}}

    def __repr__(self) -> str:
        return f"Session({self.graph.name!r}, {len(self.graph.nodes)} ops, {self.settings!r})"

    # -- settings, cost model, context --------------------------------------------------

    def with_settings(self, settings: Settings | None = None, **changes: Any) -> Session:
        """A session on the same graph under ``settings`` (or these settings with ``changes``)."""
        new = (settings or self.settings).replace(**changes) if changes else (settings or self.settings)
        return Session(
            self.graph,
            new,
            source=self.source,
            progress=self.progress,
            notes=self.notes,
            _shared=self._shared,
        )

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

    def check_policies(self, policies: Sequence[str]) -> tuple[str, ...]:
        """``policies`` checked under these settings (``Settings.check_policies``)."""
        return self.settings.check_policies(policies)

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

    def load_schedule(self, path: str, *, any_fusion: bool = False) -> LoadedSchedule:
        """A saved schedule (``streamplan schedule -o FILE``) checked against this graph: made
        for another graph and not fitting it is a ``ScheduleError``; made for another batch of
        the same ops, a note. A schedule runs the kernels it was made for, so settings whose
        fusion disagrees with its record are refused rather than ignored (``any_fusion``: each
        schedule keeps its own, as in a comparison)."""
        return load_saved(
            self.graph, path, self.context(), fusion=self.settings.fusion, any_fusion=any_fusion
        )

    def verify(self, path: str) -> ScheduleCheck:
        """Every problem of the saved schedule in ``path`` on this graph (``valid`` when none)."""
        self.progress("verifying", None, None)
        return check_saved(self.graph, path)

    def _run(self, run: PolicyRun | LoadedSchedule | str) -> PolicyRun:
        if isinstance(run, LoadedSchedule):
            return run.run
        return self.schedule(run) if isinstance(run, str) else run

    # -- analyses -----------------------------------------------------------------------

    def simulate(self, run: PolicyRun | LoadedSchedule | str) -> Timeline:
        """The simulated timeline of ``run`` (a policy's name, a run or a loaded schedule)."""
        return self._run(run).timeline

    def compare(
        self,
        policies: Sequence[str] = DEFAULT_POLICIES,
        *,
        memory: bool = True,
        schedules: Sequence[tuple[str, StreamSchedule] | LoadedSchedule] = (),
        fusions: Sequence[Fusion | str] | None = None,
    ) -> Comparison:
        """Every policy's row (the baseline first) under each fusion mode of ``fusions`` (default:
        the settings' own), then one row per saved schedule (``(label, schedule)`` or a loaded
        schedule: each runs the kernels it was made for, whatever ``fusions`` says). A rank
        program (``parallel=``) is also scheduled with ``overlap`` unless ``policies`` say
        otherwise."""
        if policies is DEFAULT_POLICIES and "parallel" in self.graph.meta:
            policies = (*policies, "overlap")
        pairs = [(s.path, s.run.schedule) if isinstance(s, LoadedSchedule) else s for s in schedules]
        notes = tuple(n for s in schedules if isinstance(s, LoadedSchedule) for n in s.notes)
        rows = compare_policies(
            self.graph,
            self.check_policies(policies),
            self.context(),
            memory=memory,
            includes=self.settings.includes,
            schedules=pairs,
            fusions=fusions,
            runner=lambda policy, mode: self.with_settings(fusion=mode).schedule(policy),
        )
        answer = training_answer(rows) if self.graph.is_training and memory else None
        return Comparison(self.graph.name, self.settings, tuple(rows), answer, notes)

    def memory(self, run: PolicyRun | LoadedSchedule | str) -> MemoryAnalysis:
        """Every memory figure of ``run`` with the allocator replays (cached per run)."""
        run = self._run(run)
        key = (run.schedule, self.settings)
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

    def explain(
        self,
        run: PolicyRun | LoadedSchedule | str,
        *,
        vs: PolicyRun | LoadedSchedule | str | None = BASELINE_POLICY,
    ) -> ExplainResult:
        """Which tensors set ``run``'s peaks; with ``vs`` (a policy, or a schedule in hand), what
        made more of them coexist than under that schedule of the same kernels. A policy's run
        also says what fusion did to its parallelism."""
        from streamplan.fusion.plan import FusedSchedule, schedule_same_kernels
        from streamplan.schedule.registry import POLICIES as registered_policies

        run = self._run(run)
        ctx = self.context()
        base = None
        if isinstance(vs, (PolicyRun, LoadedSchedule)):
            base = self._run(vs).schedule
        elif vs and vs != run.policy:
            planned = FusedSchedule(run.scheduled_graph(self.graph), run.schedule, run.fusion)
            base = schedule_same_kernels(self.graph, planned, vs, self.context(vs))
        result = explain_run(self.graph, run, ctx, vs_schedule=base)
        if (
            run.saved and run.policy not in registered_policies
        ):  # no policy to say what fusing would have changed
            return result
        return dataclasses.replace(result, fusion=fusion_note(self.graph, run, ctx))

    def curve(self, run: PolicyRun | LoadedSchedule | str) -> MemoryCurve:
        """``run``'s live memory over simulated time and its worst-case peak (what ``plot`` draws;
        in a notebook, an inline image)."""
        return _memory_curve(self.graph, self._run(run), self.context())

    def pareto(self, *, points: int | None = None, figure: str | None = None):
        """The latency/memory front of budgeted schedules, with every fixed policy for reference
        (``figure``: what is budgeted, ``worst_case`` or ``arena``; default: the settings'
        budget's figure, else the worst case)."""
        from streamplan.app.budget import pareto_front
        from streamplan.budget.pareto import DEFAULT_POINTS

        if figure is None:
            figure = self.settings.budget.figure if self.settings.budget is not None else "worst_case"
        budget = MemoryBudget(limit_bytes=0, figure=figure, includes=self.settings.includes)  # type: ignore[arg-type]
        return pareto_front(
            self.graph,
            self.context("budget"),
            points=DEFAULT_POINTS if points is None else points,
            budget=budget,
        )

    def remat(self, budget: str | int | MemoryBudget, *, policy: str = "asap", **options: Any):
        """The fastest rematerialization plan and ``policy`` schedule whose worst case fits
        ``budget`` (``MemoryBudget.parse`` grammar; ``0.5x`` is half today's worst case).
        ``options``: ``solver``, ``joint``, ``levels``, ``rounds``, ``policy_time_limit_s``,
        ``search_time_limit_s``."""
        from streamplan.app.remat import plan_remat

        return plan_remat(
            self.graph,
            MemoryBudget.parse(budget),
            policy=policy,
            ctx=self.context(policy),
            includes=self.settings.includes,
            **options,
        )

    def checkpointing(self, name: str, *, policy: str = "asap"):
        """A framework's activation-checkpointing policy (``full`` or ``selective``) over the
        model's numbered blocks, priced as a rematerialization plan under ``policy``: its
        worst case, simulated time and recomputed FLOPs beside today's (``remat.checkpoint``)."""
        from streamplan.app.remat import plan_checkpointing

        return plan_checkpointing(
            self.graph, name, policy=policy, ctx=self.context(policy), includes=self.settings.includes
        )

    def fit(self, *, search_batch: bool = True):
        """Whether the step fits the settings' device as PyTorch runs it (one stream, program
        order, the caching allocator), its peak by role and what sets it, and if it does not fit,
        the cheapest changes that make it fit with their predicted step times (``app/fit.py``).
        ``search_batch=False`` skips the search for the largest micro-batch (it captures again)."""
        from streamplan.app.fit import fit_session

        return fit_session(self, search_batch=search_batch)

    def codegen(self, run: PolicyRun | LoadedSchedule | str, *, class_name: str | None = None):
        """``run`` written as a self-contained, torch-only Python module."""
        from streamplan.app.codegen import codegen_run

        return codegen_run(
            self.graph, self._run(run), self.context(), model=self._spec(), class_name=class_name
        )

    def report(
        self, policies: Sequence[str] = DEFAULT_POLICIES, *, explain: bool = True, pareto_points: int = 0
    ):
        """Everything the HTML report shows (``streamplan.report.html`` renders it)."""
        from streamplan.app.report import report_model

        return report_model(
            self.graph,
            list(self.check_policies(policies)),
            self.settings,
            cost=self.cost,
            progress=self.progress,
            model=self._spec() or self.graph.name,
            explain=explain,
            pareto_points=pareto_points,
        )

    def run(
        self,
        run: PolicyRun | LoadedSchedule | str = "asap",
        *,
        on: str = "cpu",
        chaos: bool = False,
        repeat: int = 5,
        seed: int = 0,
    ):
        """Execute ``run``'s schedule for real on ``on`` (``cpu`` or ``cuda``), compare its outputs
        with eager PyTorch and its measurements with the predictions. A rank program (a model
        spec with ``parallel=``) runs as one gloo process per rank on the CPU, compared with one
        eager step of the whole module on the whole batch (``app.parallel``)."""
        from streamplan.app.run import run_model
        from streamplan.frontends.training import TrainingProblem
        from streamplan.models import ModelRequest

        if isinstance(self.source, ModelRequest) and self.source.parallel is not None:
            return self._run_ranks(run, on=on, chaos=chaos, repeat=repeat, seed=seed)
        if self.source is None:
            raise ModelSpecError(
                f"{self.graph.name}: a session on a graph alone has no model to run",
                hint="analyze a model spec or a torch.nn.Module to run it",
            )
        if isinstance(run, LoadedSchedule):
            run = run.run
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

    def _run_ranks(
        self, run: PolicyRun | LoadedSchedule | str, *, on: str, chaos: bool, repeat: int, seed: int
    ):
        from streamplan.app.parallel import run_parallel

        if on != "cpu":
            raise ModelSpecError(
                "a parallel plan runs its ranks as CPU processes over gloo",
                hint="run on cpu (NCCL ranks on GPUs are not launched by streamplan)",
            )
        if not isinstance(run, str):
            raise ModelSpecError(
                "a rank program is run under a policy, not a saved schedule",
                hint="name the policy (overlap, the default for rank programs)",
            )
        r = self.source
        return run_parallel(
            r.spec,
            r.parallel,
            batch=r.batch,
            optimizer=r.optimizer,
            policy=run,
            ctx=self.context(run),
            repeat=repeat,
            chaos=chaos,
            seed=seed,
        )

    def plan_knobs(self, *, budget: str | int | None = None, remat_tries: int = 3):
        """For a rank program: the plan's knobs (prefetch, in-flight limit, reshard,
        ``record_stream``, buckets) that fit ``budget`` (bytes per rank) with the fastest
        simulated step, and the Pareto front over the knobs (``budget.knobs``); when the
        fastest settings do not fit, rematerialization on up to ``remat_tries`` of them
        (``remat.knobs``; 0: knobs only)."""
        import dataclasses

        from streamplan.cache import CaptureCache
        from streamplan.models import ModelRequest
        from streamplan.units import parse_bytes

        if not isinstance(self.source, ModelRequest) or self.source.parallel is None:
            raise ModelSpecError(
                f"{self.graph.name} is not a rank program: there are no knobs to choose",
                hint="analyze a model spec with train=True and parallel='fsdp=8' (or ddp=8)",
            )
        budget_bytes = None if budget is None else parse_bytes(budget, what="memory budget")
        step = dataclasses.replace(self.source, parallel=None).load(
            cache=CaptureCache(), progress=self.progress
        )
        from streamplan.remat.knobs import prescribe_with_remat

        return prescribe_with_remat(
            step,
            self.source.parallel,
            budget_bytes=budget_bytes,
            ctx=self.context(),
            tries=remat_tries,
            progress=self.progress,
        )

    def _spec(self) -> str | None:
        """The model spec the graph was made from (None for a module or a graph)."""
        from streamplan.models import ModelRequest

        return self.source.spec if isinstance(self.source, ModelRequest) else None
