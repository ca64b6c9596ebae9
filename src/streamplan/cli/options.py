"""The options commands share, declared once, and what they become: ``Settings`` and a ``Session``.

A command names the shared options it takes with ``@takes(...)`` and receives them as one
``Given`` value; its own options stay in its signature::

    @app.command()
    @takes("model", "policy", "device", "max_streams", "as_json")
    def simulate(o: Given, trace: str | None = typer.Option(None, "--trace")) -> None:
        with o.session() as s:
            run = s.schedule(o.policy)

``o.settings()`` is the one place flags become a ``Settings``, ``o.session()`` the one place
a model spec becomes a ``Session`` (capture, progress display, notes on stderr). A new shared
option is an entry in ``OPTIONS``, a field of ``Given``, and (when it is a setting or a
capture argument) one line in ``settings`` or ``session``. A command may give a shared option
its own help or default by passing it to ``takes`` (``takes("device", device=RunDeviceOpt)``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import math
import typing
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import typer

from streamplan.errors import ModelSpecError
from streamplan.zoo.random_backward import MAX_FORWARD_OPS as MAX_RANDOM_TRAIN_OPS
from streamplan.zoo.random_dag import MAX_OPS as MAX_RANDOM_OPS

PROFILES = (
    "v100, a100, a100-80gb, h100, h200, l4, rtx4090, rtx3090, cpu, or a FILE.json from `streamplan calibrate`"
)
DEFAULT_POLICIES = "sequential,memory,wavefront,asap,nimble,ios"
FUSION_HELP = (
    "none: schedule the ops as captured; first: fuse into kernels (as Inductor would), then "
    "schedule; stream-aware: schedule, then fuse only along each stream's chains"
)
INTERVAL_NOTE = (
    "a worst-case figure [a, b] is an interval: the solver proved the peak over all timings lies "
    "between a (a timing that reaches it) and b (a proven bound) but stopped before pinning it; "
    "a longer --time-limit can close it"
)


# groups of shared options that commands take together
# how the model is loaded (every command that captures takes --train, and so --parallel)
CAPTURE = ("batch", "dtype", "no_cache", "train", "optimizer", "precision", "attention", "parallel")
COST = ("device", "max_streams", "cuda_graphs", "time_limit")  # what the schedules are costed on
COUNTED = ("include_inputs", "include_params")  # which storages the memory figures count


def _policy_help() -> str:
    from streamplan.schedule.registry import POLICIES

    return f"scheduling policy: {', '.join(POLICIES)}"


# name -> (annotation, typer default): what a command's signature would otherwise repeat
OPTIONS: dict[str, tuple[Any, Any]] = {
    "model": (
        str,
        typer.Argument(
            ...,
            help=f"zoo name, random:N[:seed] (N <= {MAX_RANDOM_OPS}), random-train:N[:seed] "
            f"(N <= {MAX_RANDOM_TRAIN_OPS}), graph.json, model.onnx, or file.py:function",
        ),
    ),
    "policy": (str, typer.Option("asap", "--policy", "-p", help=_policy_help())),
    "policies": (
        list[str] | None,
        typer.Option(None, "--policies", help=f"comma-separated policies; default {DEFAULT_POLICIES}"),
    ),
    "schedule_file": (
        str | None,
        typer.Option(
            None,
            "--schedule",
            help="use a saved schedule (`streamplan schedule -o FILE`) instead of --policy",
        ),
    ),
    "device": (str, typer.Option("v100", "--device", help=f"cost-model device profile: {PROFILES}")),
    "measured": (
        str | None,
        typer.Option(
            None,
            "--measured",
            help="measured op table (bench/gpu_validate.py --measured-out): op times for the simulator "
            "(the --device profile covers ops it lacks) and op scratch for the torch-cuda replay",
        ),
    ),
    "max_streams": (
        int,
        typer.Option(8, "--max-streams", min=1, help="cap on streams (hardware default: 8 queues)"),
    ),
    "cuda_graphs": (
        bool,
        typer.Option(
            False,
            "--cuda-graphs",
            help="simulate the schedule replayed as one CUDA graph (one host launch; per-node device overhead)",
        ),
    ),
    "fusion": (str, typer.Option("none", "--fusion", help=FUSION_HELP)),
    "batch": (
        int | None,
        typer.Option(
            None,
            "--batch",
            help="rebuild the model's example inputs at this batch size (not for graph .json files)",
        ),
    ),
    "dtype": (
        str | None,
        typer.Option(
            None,
            "--dtype",
            help="float32 (default), float16, bfloat16, float64 (a graph .json keeps its own)",
        ),
    ),
    "train": (
        bool,
        typer.Option(
            False,
            "--train",
            help="one training step (forward, loss, backward, optimizer update) instead of inference",
        ),
    ),
    "optimizer": (
        str,
        typer.Option(
            "none",
            "--optimizer",
            help="with --train: the update in the step: none, sgd, momentum, adam or adamw",
        ),
    ),
    "precision": (
        str | None,
        typer.Option(
            None,
            "--precision",
            help="with --train: mixed-bf16 or mixed-fp16 (bf16/fp16 model, fp32 master weights and "
            "optimizer state; docs/fit.md)",
        ),
    ),
    "attention": (
        str | None,
        typer.Option(
            None,
            "--attention",
            help="flash or math (the kernel of scaled_dot_product_attention), or eager (an hf: model's "
            "own code)",
        ),
    ),
    "parallel": (
        str | None,
        typer.Option(
            None,
            "--parallel",
            help="with --train: one rank's program under a parallel plan: fsdp=8, ddp=8, "
            "fsdp=8,prefetch=2,in_flight=none,reshard=false,record_stream=false, ddp=8,bucket=25MiB "
            "(--batch is each rank's batch; docs/distributed.md)",
        ),
    ),
    "no_cache": (
        bool,
        typer.Option(
            False,
            "--no-cache",
            help="capture the model again instead of reading the cache of captured graphs (`streamplan cache info`)",
        ),
    ),
    "include_inputs": (
        bool,
        typer.Option(
            False, "--include-inputs", help="also count the graph's inputs in the memory figures (resident)"
        ),
    ),
    "include_params": (
        bool,
        typer.Option(
            False,
            "--include-params",
            help="also count parameters, buffers and constants in the memory figures",
        ),
    ),
    "budget": (
        str | None,
        typer.Option(
            None,
            "--budget",
            help="memory budget for --policy budget: bytes, 12MiB, 1.5GiB, 800MB (10^6 B), or a factor of the "
            "sequential peak (1.2x)",
        ),
    ),
    "budget_figure": (
        str,
        typer.Option(
            "worst_case",
            "--budget-figure",
            help="what the budget bounds: worst_case (over all timings) or arena",
        ),
    ),
    "time_limit": (
        float,
        typer.Option(
            10.0,
            "--time-limit",
            min=0.01,
            help="seconds each exact search may take (the ios policy, the worst-case peak solver); "
            "a longer limit can narrow a worst-case interval [a, b] to one exact figure",
        ),
    ),
    "device_memory_gib": (
        float | None,
        typer.Option(
            None,
            "--device-memory-gib",
            help="the device's memory in GiB: the torch-cuda replay runs against it; exit 3 when it does not fit",
        ),
    ),
    "force": (
        bool,
        typer.Option(False, "--force", help="overwrite the output file if it exists (never an input file)"),
    ),
    "as_json": (
        bool,
        typer.Option(
            False, "--json", help='print machine-readable JSON only; an error is a JSON object {"error": ...}'
        ),
    ),
}


@dataclass(frozen=True)
class Given:
    """The shared options a command was given (those it does not take keep their defaults)."""

    model: str = ""
    policy: str = "asap"
    policies: tuple[str, ...] | None = None
    schedule_file: str | None = None
    device: str | None = "v100"
    measured: str | None = None
    max_streams: int = 8
    cuda_graphs: bool = False
    fusion: str = "none"
    batch: int | None = None
    dtype: str | None = None
    train: bool = False
    optimizer: str = "none"
    precision: str | None = None
    attention: str | None = None
    parallel: str | None = None
    no_cache: bool = False
    include_inputs: bool = False
    include_params: bool = False
    budget: str | None = None
    budget_figure: str = "worst_case"
    time_limit: float = 10.0
    device_memory_gib: float | None = None
    force: bool = False
    as_json: bool = False

    # -- what the flags mean --------------------------------------------------------------

    def settings(self, **changes: Any):
        """The ``Settings`` these flags ask for (``changes`` override fields); a bad value is a
        user error here, before any model is loaded."""
        from streamplan.errors import BudgetError
        from streamplan.ir.includes import Includes
        from streamplan.schedule.context import BUDGET_FIGURES, MemoryBudget
        from streamplan.schedule.settings import Settings

        if self.budget_figure not in BUDGET_FIGURES:
            raise BudgetError(
                f"unknown budgeted figure {self.budget_figure!r}",
                hint=f"use one of {', '.join(BUDGET_FIGURES)}",
            )
        fields: dict[str, Any] = {
            "device": self.device or "v100",
            "measured": self.measured,
            "cuda_graphs": self.cuda_graphs,
            "max_streams": self.max_streams,
            "fusion": self.fusions()[0],
            "includes": Includes(self.include_inputs, self.include_params),
            "budget": None
            if self.budget is None
            else MemoryBudget.parse(self.budget, figure=self.budget_figure),
            "time_limit_s": self.time_limit,
            "device_memory_bytes": _gib_bytes(self.device_memory_gib),
        }
        fields.update(changes)
        return Settings(**fields)

    def fusions(self) -> list[str]:
        """``--fusion``: one mode, or (where a command compares them) several, comma-separated,
        or ``all``."""
        return parse_fusions(self.fusion)

    def policy_names(self, default: str = DEFAULT_POLICIES) -> list[str]:
        """``--policies``: comma-separated names (repeatable); unknown names or none are user errors."""
        from streamplan.schedule.registry import policy_info

        items = [p.strip() for t in (self.policies or [default]) for p in t.split(",") if p.strip()]
        if not items:
            raise ModelSpecError("no policy given", hint=_policy_help())
        for p in items:
            policy_info(p)  # raises naming the policies
        return list(dict.fromkeys(items))

    @contextlib.contextmanager
    def session(self, settings: Any = None, *, policies: Sequence[str] = ()) -> Iterator[Any]:
        """The model's ``Session`` under ``settings`` (default: ``self.settings()``), inside the
        progress display on stderr; what loading had to assume is printed there as a warning.
        ``policies`` are checked against the settings first (``Settings.check_policies``), so a
        mistake fails before the model is loaded."""
        from streamplan.app.model_session import analyze
        from streamplan.cli.common import err
        from streamplan.cli.progress import progress_display

        settings = settings if settings is not None else self.settings()
        settings.check_policies(policies)
        settings.cost_model()  # an unknown profile or a malformed measured table fails before the capture
        with progress_display(err) as progress:
            s = analyze(
                self.model,
                train=self.train,
                optimizer=self.optimizer,
                batch=self.batch,
                dtype=self.dtype,
                precision=self.precision,
                attention=self.attention,
                parallel=self.parallel,
                cache=not self.no_cache,
                progress=progress,
                settings=settings,
            )
            for note in s.notes:
                err.print(f"warning: {note}", markup=False)
            yield s

    def protected(self, *more: str | None) -> tuple[str, ...]:
        """The input files no output may overwrite: the model, the saved schedule, the measured
        op table, and ``more``."""
        return tuple(p for p in (self.model, self.schedule_file, self.measured, *more) if p)


def parse_fusions(text: str) -> list[str]:
    """Comma-separated fusion modes, or ``all`` for every one; an unknown mode is a user error."""
    from streamplan.schedule.context import FUSION_MODES

    items = list(FUSION_MODES) if text.strip() == "all" else [t.strip() for t in text.split(",") if t.strip()]
    bad = [m for m in items if m not in FUSION_MODES]
    if bad or not items:
        raise ModelSpecError(
            f"unknown fusion mode {bad[0]!r}" if bad else "no fusion mode given",
            hint=f"use one or more of {', '.join(FUSION_MODES)} (comma-separated), or all",
        )
    return list(dict.fromkeys(items))


def _gib_bytes(gib: float | None) -> int | None:
    if gib is None:
        return None
    if not math.isfinite(gib) or gib <= 0:
        raise ModelSpecError(
            f"--device-memory-gib must be a positive number of GiB, got {gib:g} GiB",
            hint="give the device's memory in GiB, e.g. --device-memory-gib 16",
        )
    return int(gib * (1 << 30))


def takes(*names: str, **custom: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the shared options ``names`` (in that order, before its own), passed to it
    as one ``Given`` (its first parameter); ``custom`` replaces an option's declaration for this
    command (another help, default or flag)."""
    unknown = [n for n in (*names, *custom) if n not in OPTIONS]
    if unknown:
        raise KeyError(f"no shared option {unknown[0]!r}")

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        hints = typing.get_type_hints(fn)
        own = list(inspect.signature(fn).parameters.values())[1:]  # the first is the Given
        shared = [
            inspect.Parameter(
                n,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=custom.get(n, OPTIONS[n][1]),
                annotation=OPTIONS[n][0],
            )
            for n in names
        ]
        params = [*shared, *(p.replace(annotation=hints.get(p.name, p.annotation)) for p in own)]

        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            given = {n: kwargs.pop(n) for n in names}
            if given.get("policies") is not None:
                given["policies"] = tuple(given["policies"])
            return fn(Given(**given), **kwargs)

        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        del command.__wrapped__  # typer reads the signature above, not the function's own
        return command

    return wrap


assert {f.name for f in dataclasses.fields(Given)} == set(OPTIONS), "every shared option is a field of Given"
