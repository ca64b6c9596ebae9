"""``fit``: will this step fit on this GPU as PyTorch runs it, and what is the cheapest way to make it fit?"""

from __future__ import annotations

import typer

from streamplan.cli.app import app
from streamplan.cli.common import emit_json, out
from streamplan.cli.errors import EXIT_OUT_OF_MEMORY
from streamplan.cli.options import CAPTURE, Given, takes
from streamplan.errors import ModelSpecError

FIT_HELP = f"""Does the model (one training step with --train) fit on the device as PyTorch runs it, and if not,
what is the cheapest change that makes it fit?

\b
Prints yes or no for the default PyTorch execution (one stream, program order, the caching
allocator's reserved peak against the device's memory less the CUDA context), the peak by role
(parameters, gradients, optimizer state, saved activations, temporaries, workspace, allocator
slack), what sets it, and when it does not fit, the changes that make it fit, fastest first,
each with its predicted step time: a memory-optimal order, a remat plan, a budgeted schedule,
the largest micro-batch (gradient accumulation). Each search takes at most --time-limit seconds.
docs/fit.md explains every number. Exit status {EXIT_OUT_OF_MEMORY} when it does not fit.
"""


FitDeviceOpt = typer.Option(
    "h100",
    "--device",
    help="device profile(s), comma-separated: v100, a100, a100-80gb, h100, h200, l4, rtx4090, rtx3090, "
    "or a profile FILE.json from `streamplan calibrate` (with --device-memory-gib when it has no memory size)",
)
FitTimeLimitOpt = typer.Option(
    10.0, "--time-limit", min=0.01, help="seconds each change's search may take (remat, budget, order, batch)"
)
FitMemoryOpt = typer.Option(
    None, "--device-memory-gib", help="fit against this many GiB instead of the profile's usable memory"
)


@app.command(help=FIT_HELP)
@takes(
    "model", "device", *CAPTURE, "measured", "time_limit", "device_memory_gib", "as_json",
    device=FitDeviceOpt, time_limit=FitTimeLimitOpt, device_memory_gib=FitMemoryOpt,
)  # fmt: skip
def fit(
    o: Given,
    batch_search: bool = typer.Option(
        True,
        "--batch-search/--no-batch-search",
        help="search the largest micro-batch that fits (captures again)",
    ),
) -> None:
    from streamplan.cost.devices import get_device

    devices = [d.strip() for d in (o.device or "").split(",") if d.strip()]
    if not devices:
        raise ModelSpecError("no device given", hint="--device h100 (or several: --device h100,a100-80gb,l4)")
    for d in devices:
        get_device(d)  # an unknown device fails before the capture
    answers = []
    with o.session(o.settings(device=devices[0])) as session:
        for d in devices:
            answers.append(session.with_settings(device=d).fit(search_batch=batch_search))
    if o.as_json:
        emit_json(answers[0].to_dict() if len(answers) == 1 else [a.to_dict() for a in answers])
    else:
        for i, answer in enumerate(answers):
            if i:
                out.print("")
            for line in answer.lines():
                out.print(line, markup=False)
    if not all(a.fits for a in answers):
        raise typer.Exit(EXIT_OUT_OF_MEMORY)
