"""What every command shares: the consoles, JSON output, options, and loading a model."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import typer
from rich.console import Console

from streamplan.errors import ModelSpecError, StreamplanError

out = Console(highlight=False, width=None if sys.stdout.isatty() else 110)
err = Console(stderr=True, highlight=False, soft_wrap=True)

DEFAULT_POLICIES = "sequential,memory,wavefront,asap,nimble,ios"
PROFILES = "v100, a100, h100, h200, cpu"


def policy_help() -> str:
    from streamplan.schedule.registry import POLICIES

    return f"scheduling policy: {', '.join(POLICIES)}"


ModelArg = typer.Argument(..., help="zoo name, random:N[:seed], graph.json, or file.py:function")
BatchOpt = typer.Option(None, "--batch", help="rebuild the example inputs at this batch size")
DtypeOpt = typer.Option(None, "--dtype", help="float32 (default), float16, bfloat16, float64")
JsonOpt = typer.Option(False, "--json", help="print machine-readable JSON only (errors too)")
StreamsOpt = typer.Option(8, "--max-streams", min=1, help="cap on streams (hardware default: 8 queues)")
DeviceOpt = typer.Option("v100", "--device", help=f"cost-model device profile: {PROFILES}")
PolicyOpt = typer.Option("asap", "--policy", "-p", help=policy_help())
ForceOpt = typer.Option(False, "--force", help="overwrite the output file if it exists")
IncludeInputsOpt = typer.Option(False, "--include-inputs", help="count graph inputs in memory figures")
IncludeParamsOpt = typer.Option(False, "--include-params", help="count params/buffers in memory figures")
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


def load_graph(model: str, batch: int | None, dtype: str | None, progress=None):
    """The model's graph (captured, built or read), with a progress step while it loads."""
    from streamplan.models import ModelRequest

    if progress is not None:
        progress(f"loading {model}", None, None)
    return ModelRequest(model, batch=batch, dtype=dtype).load()


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
