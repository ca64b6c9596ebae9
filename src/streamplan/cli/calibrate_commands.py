"""``calibrate``: measure this machine's CPU runtime or CUDA device and write a device profile."""

from __future__ import annotations

import typer

from streamplan.cli.app import app
from streamplan.cli.common import check_file, emit_json, err, out, write_file
from streamplan.cli.options import Given, takes
from streamplan.cli.progress import progress_display


@app.command()
@takes("force", "as_json")
def calibrate(
    o: Given,
    on: str = typer.Option("cpu", "--on", help="what to measure: cpu (the CPU runtime) or cuda (this GPU)"),
    output: str = typer.Option(..., "--output", "-o", help="the profile file to write (JSON)"),
    quick: bool = typer.Option(False, "--quick", help="a few sizes and repetitions (seconds; rougher)"),
    name: str | None = typer.Option(None, "--name", help="the profile's name (default: cpu-calibrated...)"),
    repeat: int | None = typer.Option(None, "--repeat", min=1, help="repetitions of every timing (median)"),
) -> None:
    """Micro-benchmark this machine (op times by size, overheads, events, co-running streams) and
    write a device profile usable wherever a profile name is (--device FILE.json)."""
    from streamplan.app.calibrate import calibrate as run_calibration
    from streamplan.report.calibration import calibration_lines, drift_warning

    check_file(output, force=o.force)
    with progress_display(err) as progress:
        result = run_calibration(on, quick=quick, name=name, repeat=repeat, progress=progress)
    write_file(output, result.profile_json(), force=o.force)
    warning = drift_warning(result)
    if warning:
        err.print(warning, markup=False, soft_wrap=True)
    if o.as_json:
        emit_json({**result.to_dict(), "output": output})
        return
    for line in calibration_lines(result, output):
        out.print(line, markup=False, soft_wrap=True)
