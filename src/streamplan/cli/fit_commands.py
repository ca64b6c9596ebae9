"""``fit``: will this step fit on this GPU as PyTorch runs it, and what is the cheapest way to make it fit?"""

from __future__ import annotations

import typer

from streamplan.cli.app import app
from streamplan.cli.common import (
    BatchOpt,
    DtypeOpt,
    JsonOpt,
    MeasuredOpt,
    ModelArg,
    NoCacheOpt,
    OptimizerOpt,
    TrainOpt,
    emit_json,
    err,
    out,
)
from streamplan.cli.errors import EXIT_OUT_OF_MEMORY
from streamplan.cli.progress import progress_display
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


@app.command(help=FIT_HELP)
def fit(
    model: str = ModelArg,
    device: str = typer.Option(
        "h100",
        "--device",
        help="device profile(s), comma-separated: v100, a100, a100-80gb, h100, h200, l4, rtx4090, rtx3090",
    ),
    batch: int | None = BatchOpt,
    dtype: str | None = DtypeOpt,
    train: bool = TrainOpt,
    optimizer: str = OptimizerOpt,
    precision: str | None = typer.Option(
        None,
        "--precision",
        help="with --train: mixed-bf16 or mixed-fp16 (bf16/fp16 model, fp32 master weights and optimizer state)",
    ),
    attention: str | None = typer.Option(
        None,
        "--attention",
        help="flash or math (the kernel of scaled_dot_product_attention), or eager (an hf: model's own code)",
    ),
    device_memory: float | None = typer.Option(
        None, "--device-memory-gib", help="fit against this many GiB instead of the profile's usable memory"
    ),
    time_limit: float = typer.Option(
        10.0,
        "--time-limit",
        min=0.01,
        help="seconds each change's search may take (remat, budget, order, batch)",
    ),
    batch_search: bool = typer.Option(
        True,
        "--batch-search/--no-batch-search",
        help="search the largest micro-batch that fits (captures again)",
    ),
    measured: str | None = MeasuredOpt,
    no_cache: bool = NoCacheOpt,
    as_json: bool = JsonOpt,
) -> None:
    from streamplan.app.session import analyze

    devices = [d.strip() for d in device.split(",") if d.strip()]
    if not devices:
        raise ModelSpecError("no device given", hint="--device h100 (or several: --device h100,a100-80gb,l4)")
    if optimizer != "none" and not train:
        raise ModelSpecError(
            f"--optimizer {optimizer} needs --train", hint="add --train, or drop --optimizer"
        )
    capacity = None
    if device_memory is not None:
        if not device_memory > 0:
            raise ModelSpecError(f"--device-memory-gib must be > 0, got {device_memory:g}")
        capacity = int(device_memory * (1 << 30))
    from streamplan.cost.devices import get_device

    for d in devices:
        get_device(d)  # an unknown device fails before the capture
    answers = []
    with progress_display(err) as progress:
        session = analyze(
            model,
            train=train,
            optimizer=optimizer,
            batch=batch,
            dtype=dtype,
            precision=precision,
            attention=attention,
            cache=not no_cache,
            progress=progress,
            device=devices[0],
            measured=measured,
            time_limit_s=time_limit,
            device_memory_bytes=capacity,
        )
        for d in devices:
            answers.append(session.with_settings(device=d).fit(search_batch=batch_search))
    if as_json:
        emit_json(answers[0].to_dict() if len(answers) == 1 else [a.to_dict() for a in answers])
    else:
        for i, answer in enumerate(answers):
            if i:
                out.print("")
            for line in answer.lines():
                out.print(line, markup=False)
    if not all(a.fits for a in answers):
        raise typer.Exit(EXIT_OUT_OF_MEMORY)
