"""``cache info`` and ``cache clear``: the cache of captured graphs."""

from __future__ import annotations

import typer

from streamplan.cli.app import app
from streamplan.cli.common import emit_json, out
from streamplan.cli.options import Given, takes
from streamplan.report.units import fmt_bytes

cache_app = typer.Typer(
    no_args_is_help=True,
    help="The cache of captured graphs: a model captured once is read back by later commands "
    "without importing torch. Set STREAMPLAN_CACHE_DIR to move it; --no-cache skips it.",
)
app.add_typer(cache_app, name="cache")


@cache_app.command("info")
@takes("as_json")
def cache_info(o: Given) -> None:
    """Where the cache is, how many captured graphs it holds, and their size."""
    from streamplan.cache import CaptureCache

    info = CaptureCache().info()
    if o.as_json:
        emit_json(info.to_dict())
        return
    out.print(f"{info.path}: {info.entries} captured graph(s), {fmt_bytes(info.total_bytes)}", markup=False)


@cache_app.command("clear")
@takes("as_json")
def cache_clear(o: Given) -> None:
    """Remove every captured graph from the cache (the next command captures again)."""
    from streamplan.cache import CaptureCache

    removed = CaptureCache().clear()
    if o.as_json:
        emit_json({"removed": removed.entries, "freed_bytes": removed.total_bytes, "path": removed.path})
        return
    out.print(
        f"removed {removed.entries} captured graph(s), {fmt_bytes(removed.total_bytes)}, from {removed.path}",
        markup=False,
    )
