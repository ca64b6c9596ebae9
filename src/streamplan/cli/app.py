"""The typer application every command module registers on."""

from __future__ import annotations

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Multi-stream schedules for PyTorch graphs: latency and peak memory before you run.",
)
