"""What every command shares: the consoles, JSON output, options, and loading a model."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import typer
from rich.console import Console

from streamplan.errors import ModelSpecError, ScheduleError, StreamplanError

out = Console(highlight=False, width=None if sys.stdout.isatty() else 110)
err = Console(stderr=True, highlight=False, soft_wrap=True)

DEFAULT_POLICIES = "sequential,memory,wavefront,asap,nimble,ios"
PROFILES = "v100, a100, h100, h200, cpu, or a FILE.json from `streamplan calibrate`"


def policy_help() -> str:
    from streamplan.schedule.registry import POLICIES

    return f"scheduling policy: {', '.join(POLICIES)}"


ModelArg = typer.Argument(..., help="zoo name, random:N[:seed], graph.json, or file.py:function")
BatchOpt = typer.Option(
    None, "--batch", help="rebuild the model's example inputs at this batch size (not for graph .json files)"
)
DtypeOpt = typer.Option(None, "--dtype", help="float32 (default), float16, bfloat16, float64")
JsonOpt = typer.Option(
    False, "--json", help='print machine-readable JSON only; an error is a JSON object {"error": ...}'
)
StreamsOpt = typer.Option(8, "--max-streams", min=1, help="cap on streams (hardware default: 8 queues)")
DeviceOpt = typer.Option("v100", "--device", help=f"cost-model device profile: {PROFILES}")
PolicyOpt = typer.Option("asap", "--policy", "-p", help=policy_help())
ForceOpt = typer.Option(False, "--force", help="overwrite the output file if it exists (never an input file)")
IncludeInputsOpt = typer.Option(
    False, "--include-inputs", help="also count the graph's inputs in the memory figures (resident)"
)
IncludeParamsOpt = typer.Option(
    False, "--include-params", help="also count parameters, buffers and constants in the memory figures"
)
NoCacheOpt = typer.Option(
    False,
    "--no-cache",
    help="capture the model again instead of reading the cache of captured graphs (`streamplan cache info`)",
)
ScheduleFileOpt = typer.Option(
    None, "--schedule", help="use a saved schedule (`streamplan schedule -o FILE`) instead of --policy"
)
TimeLimitOpt = typer.Option(
    10.0,
    "--time-limit",
    min=0.01,
    help="seconds each exact search may take (the ios policy, the worst-case peak solver); "
    "a longer limit can narrow a worst-case interval [a, b] to one exact figure",
)
TrainOpt = typer.Option(
    False,
    "--train",
    help="one training step (forward, loss, backward, optimizer update) instead of inference",
)
OptimizerOpt = typer.Option(
    "none", "--optimizer", help="with --train: the update in the step: none, sgd, momentum or adam"
)
CudaGraphsOpt = typer.Option(
    False,
    "--cuda-graphs",
    help="simulate the schedule replayed as one CUDA graph (one host launch; per-node device overhead)",
)
BudgetOpt = typer.Option(
    None,
    "--budget",
    help="memory budget for --policy budget: bytes, 12MiB, 1.5GiB, or a factor of the sequential peak (1.2x)",
)
BudgetFigureOpt = typer.Option(
    "worst_case", "--budget-figure", help="what the budget bounds: worst_case (over all timings) or arena"
)
FUSION_HELP = (
    "none: schedule the ops as captured; first: fuse into kernels (as Inductor would), then "
    "schedule; stream-aware: schedule, then fuse only along each stream's chains"
)
FusionOpt = typer.Option("none", "--fusion", help=FUSION_HELP)
MeasuredOpt = typer.Option(
    None,
    "--measured",
    help="measured op table (bench/gpu_validate.py --measured-out): op times for the simulator "
    "(the --device profile covers ops it lacks) and op scratch for the torch-cuda replay",
)

INTERVAL_NOTE = (
    "a worst-case figure [a, b] is an interval: the solver proved the peak over all timings lies "
    "between a (a timing that reaches it) and b (a proven bound) but stopped before pinning it; "
    "a longer --time-limit can close it"
)


def emit_json(obj: Any) -> None:
    """Print ``obj`` as strict JSON (NaN and infinities become null) on stdout."""
    sys.stdout.write(json.dumps(_strict(obj), indent=1, default=_json_default, allow_nan=False) + "\n")


def _strict(o: Any) -> Any:
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {str(k): _strict(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_strict(v) for v in o]
    if hasattr(o, "to_dict"):
        return _strict(o.to_dict())
    return o


def _json_default(o: Any) -> Any:
    return str(o)


def parse_policies(text: list[str] | None, default: str = DEFAULT_POLICIES) -> list[str]:
    """Comma-separated policy names; an unknown name or an empty list is a user error."""
    from streamplan.schedule.registry import policy_info

    items: list[str] = []
    for t in text if text is not None else [default]:
        items.extend(p.strip() for p in t.split(",") if p.strip())
    if not items:
        raise ModelSpecError("no policy given", hint=policy_help())
    for p in items:
        policy_info(p)  # raises naming the policies
    return list(dict.fromkeys(items))


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


def load_graph(
    model: str,
    batch: int | None,
    dtype: str | None,
    progress=None,
    *,
    no_cache: bool = False,
    train: bool = False,
    optimizer: str = "none",
):
    """The model's graph (captured, built or read; captures through the capture cache unless
    ``no_cache``), with a progress step while it loads.

    A training step whose loss had to default to the sum of the outputs says so on stderr.
    """
    from streamplan.cache import CaptureCache
    from streamplan.models import ModelRequest
    from streamplan.progress import no_progress

    if optimizer != "none" and not train:
        raise ModelSpecError(
            f"--optimizer {optimizer} needs --train", hint="add --train, or drop --optimizer"
        )
    request = ModelRequest(model, batch=batch, dtype=dtype, train=train, optimizer=optimizer)
    graph = request.load(cache=None if no_cache else CaptureCache(), progress=progress or no_progress)
    if train:
        from streamplan.ir.training import training_step

        step = training_step(graph)
        if step is not None and step.loss_is_default:
            err.print(f"warning: {model} gives no loss function: the loss is {step.loss_fn}", markup=False)
    return graph


def load_schedule(path: str, graph, *, fusion: str = "none"):
    """A saved schedule for ``graph``: made for another graph (by its fingerprint) and not
    fitting this one is one line saying so; made for another batch of the same graph and
    fitting, a note on stderr. A schedule runs the kernels it was made for, so a ``--fusion``
    other than ``none`` that disagrees with its record is refused rather than ignored."""
    from streamplan.fusion.plan import fuses, fusion_mode
    from streamplan.ir.fingerprint import fingerprint_mismatch
    from streamplan.ir.schedule import StreamSchedule, structure_problems

    s = StreamSchedule.load(path)
    made = fusion_mode(s)
    if fuses(fusion) and made != fusion:
        raise ScheduleError(
            f"the schedule was made with --fusion {made}, not {fusion}",
            where=path,
            hint=f"a saved schedule keeps its own fusion: drop --fusion, or save one with --fusion {fusion}",
        )
    mismatch = fingerprint_mismatch(s.meta, graph)
    if mismatch is not None:
        if structure_problems(graph, s):
            raise ScheduleError(
                mismatch, where=path, hint="make a schedule for this model with `streamplan schedule`"
            )
        err.print(f"note: {mismatch}; its ops are the same, so it is used as it is", markup=False)
    return s


def parse_budget(text: str | None, figure: str = "worst_case", *, policies: tuple[str, ...] = ()):
    """``--budget`` as a ``MemoryBudget`` (None without one); refused when no budget policy is chosen."""
    if text is None:
        return None
    from streamplan.schedule.context import MemoryBudget

    if policies and "budget" not in policies:
        raise ModelSpecError("--budget only applies to the budget policy", hint="add --policy budget")
    return MemoryBudget.parse(text, figure=figure)


def run_saved_or_policy(graph, policy: str, schedule_file: str | None, ctx, *, fusion: str = "none"):
    """The ``PolicyRun`` of the saved schedule in ``schedule_file`` (checked against ``graph``),
    or of ``policy`` when no file is given."""
    from streamplan.app.analysis import run_policy, run_schedule

    if schedule_file:
        return run_schedule(graph, load_schedule(schedule_file, graph, fusion=fusion), ctx)
    return run_policy(graph, policy, ctx)


def write_file(path: str, data: str | bytes, *, force: bool, protected: tuple[str, ...] = ()) -> None:
    """``files.write_output`` with the CLI's words for the way out (``--force``)."""
    from streamplan.files import OutputFileError, write_output

    try:
        write_output(path, data, force=force, protected=protected)
    except OutputFileError as e:
        raise _with_force_hint(e) from None


def check_file(path: str, *, force: bool, protected: tuple[str, ...] = ()) -> None:
    """Refuse a bad output path before any long work starts."""
    from streamplan.files import OutputFileError, check_output

    try:
        check_output(path, force=force, protected=protected)
    except OutputFileError as e:
        raise _with_force_hint(e) from None


def _with_force_hint(e: StreamplanError) -> StreamplanError:
    if e.hint and "(force)" in e.hint:
        e.hint = "choose another path, or pass --force to overwrite it"
    return e
