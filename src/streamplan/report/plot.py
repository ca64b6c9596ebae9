"""``streamplan plot``: live memory over simulated time per policy, with a stream timeline beneath."""

from __future__ import annotations

import io
from collections.abc import Sequence

from streamplan.app.analysis import MemoryCurve
from streamplan.ir.graph import Graph
from streamplan.report.units import MiB

FORMATS = ("png", "svg", "pdf")


def image_format(path: str) -> str:
    """The image format an output path's suffix names; another suffix is an output-file error,
    like every other output path the commands refuse."""
    from pathlib import Path

    from streamplan.files import OutputFileError

    fmt = Path(path).suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise OutputFileError(
            "cannot tell the image format from the file name",
            where=str(path),
            hint=f"end the file name with .{', .'.join(FORMATS)}",
        )
    return fmt


def render(graph: Graph, data: Sequence[MemoryCurve], device: str, *, fmt: str = "png") -> bytes:
    """The figure as ``fmt`` (png, svg or pdf) bytes: top panel live activation MiB vs simulated
    ms (peaks marked), then one stream timeline per policy. The worst-case peak over all timings
    is drawn as a dashed level so the simulated curve can be read against it. Recomputations
    (nodes a rematerialization added) are hatched on the stream timelines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [(d.run.policy, d.run.schedule, d.run.timeline, d.memory, d.worst_case) for d in data]
    heights = [3.0] + [0.35 * max(1, s.num_streams) + 0.6 for _, s, *_ in runs]
    fig, axes = plt.subplots(
        len(runs) + 1,
        1,
        figsize=(11, sum(heights) + 0.8),
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    top = axes[0][0]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (p, _s, tl, mem, wc) in enumerate(runs):
        c = colors[i % len(colors)]
        xs = [t for t, _ in mem.samples] + [tl.makespan_ms]
        ys = [b / MiB for _, b in mem.samples]
        ys = ys + [ys[-1] if ys else 0.0]
        top.step(
            xs,
            ys,
            where="post",
            color=c,
            label=f"{p}: sim peak {mem.peak_bytes / MiB:.2f} MiB, {tl.makespan_ms:.3f} ms",
        )
        top.plot([mem.peak_ms], [mem.peak_bytes / MiB], "o", color=c)
        top.axhline(wc.upper_bytes / MiB, color=c, linestyle="--", linewidth=0.8)
    top.set_ylabel("live activations (MiB)")
    top.set_xlabel(f"simulated time on {device} (ms); dashed: worst-case peak over all timings")
    top.set_title(f"{graph.name}: live memory per policy")
    top.legend(loc="upper right", fontsize=8)
    recomputed = {n.id for n in graph.nodes if n.recompute_of is not None}
    for row, (p, s, tl, _mem, _wc) in enumerate(runs, start=1):
        ax = axes[row][0]
        for span in tl.spans:
            again = span.op in recomputed  # recomputations are hatched and outlined in black
            ax.broken_barh(
                [(span.start_ms, max(span.end_ms - span.start_ms, 1e-6))],
                (span.stream - 0.4, 0.8),
                color=colors[(row - 1) % len(colors)],
                alpha=0.8,
                hatch="///" if again else None,
                edgecolor="black" if again else None,
            )
        if recomputed:
            ax.set_title(f"{p}: hatched = recomputation", fontsize=7, loc="right")
        ax.set_yticks(range(s.num_streams))
        ax.set_yticklabels([f"s{k}" for k in range(s.num_streams)], fontsize=7)
        ax.set_xlim(top.get_xlim())
        ax.set_ylabel(p, rotation=0, ha="right", va="center", fontsize=8)
        ax.invert_yaxis()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110)
    plt.close(fig)
    return buf.getvalue()
