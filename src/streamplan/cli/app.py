"""The typer application every command module registers on, and the options of ``streamplan`` itself."""

from __future__ import annotations

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Multi-stream schedules for PyTorch graphs: latency and peak memory before you run. "
    "Run `streamplan COMMAND --help` for a command's options; docs/memory.md explains the memory figures.",
)


def _print_version(value: bool) -> None:
    if value:
        from streamplan import __version__

        typer.echo(f"streamplan {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="print streamplan's version and exit",
    ),
) -> None:
    """Multi-stream schedules for PyTorch graphs: latency and peak memory before you run."""
