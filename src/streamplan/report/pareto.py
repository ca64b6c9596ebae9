"""The ``pareto`` command's table and figure: budget points beside the fixed policies."""

from __future__ import annotations

import io

from rich.console import Group
from rich.table import Table

from streamplan.budget.pareto import ParetoFront
from streamplan.report.units import MiB, fmt_ms


def front_tables(front: ParetoFront) -> Group:
    """The front (one row per budget) and the fixed policies (dominated ones marked)."""
    what = "worst-case peak" if front.figure == "worst_case" else "static arena"
    mode = " as CUDA graphs" if front.cuda_graphs else ""
    t = Table(
        title=f"{front.graph} on {front.device}{mode}: fastest schedule per budget ({what}, MiB)",
        show_edge=False,
    )
    for col in ("budget", "latency", "speedup", what, "streams"):
        t.add_column(col, justify="right")
    t.add_column("found by")
    for p in front.points:
        t.add_row(
            f"{p.budget_bytes / MiB:.2f}",
            fmt_ms(p.makespan_ms),
            f"{front.sequential_ms / p.makespan_ms:.2f}x" if p.makespan_ms else "-",
            f"{p.worst_case_peak_bytes / MiB:.2f}" + ("" if p.worst_case_exact else " (upper)"),
            str(p.streams),
            p.source,
        )
    t.caption = (
        f"floor {front.floor_bytes / MiB:.2f} MiB (memory-optimal one-stream order; only rematerialization "
        f"goes lower); sequential {front.sequential_peak_bytes / MiB:.2f} MiB, {fmt_ms(front.sequential_ms)}"
    )
    f = Table(title="fixed policies", show_edge=False)
    f.add_column("policy")
    for col in ("latency", what, "streams"):
        f.add_column(col, justify="right")
    f.add_column("")
    for x in front.fixed:
        f.add_row(
            x.policy,
            fmt_ms(x.makespan_ms),
            f"{x.worst_case_peak_bytes / MiB:.2f}",
            str(x.streams),
            "dominated by the front" if x.dominated else "on the front",
        )
    return Group(t, f)


def render_front(front: ParetoFront, *, fmt: str = "png") -> bytes:
    """Latency against the budgeted figure: the front as a staircase, fixed policies as markers
    (hollow grey when a front point is both no slower and no larger)."""
    import matplotlib.pyplot as plt

    fig = front_figure(front)
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110)
    plt.close(fig)
    return buf.getvalue()


def front_figure(front: ParetoFront):  # noqa: ANN201 - a matplotlib Figure (imported lazily)
    """The figure ``render_front`` saves; no two of its labels overlap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    xs = [p.worst_case_peak_bytes / MiB for p in front.points]
    ys = [p.makespan_ms for p in front.points]
    ax.step(xs, ys, where="post", color="tab:blue", linewidth=1.5, label="budget front")
    ax.plot(xs, ys, "o", color="tab:blue")
    labels = []
    streams = None
    for p, x, y in zip(front.points, xs, ys, strict=True):
        if p.streams != streams:  # a label where the stream count changes, not one per point
            labels.append(
                ax.annotate(f"{p.streams} str", (x, y), textcoords="offset points", xytext=(3, 4), fontsize=7)
            )
        streams = p.streams
    at: dict[tuple[float, float], list[str]] = {}  # policies at the same point share one label
    for f in sorted(front.fixed, key=lambda f: (f.makespan_ms, f.worst_case_peak_bytes)):
        x, y = f.worst_case_peak_bytes / MiB, f.makespan_ms
        if f.dominated:
            ax.plot(x, y, "s", markerfacecolor="none", markeredgecolor="grey")
        else:
            ax.plot(x, y, "s", color="tab:red")
        at.setdefault((x, y), []).append(f"{f.policy} (dominated)" if f.dominated else f.policy)
    for (x, y), names in at.items():
        labels.append(
            ax.annotate(", ".join(names), (x, y), textcoords="offset points", xytext=(4, 5), fontsize=8)
        )
    ax.axvline(front.floor_bytes / MiB, color="black", linestyle=":", linewidth=0.8)
    floor = ax.annotate("floor", (front.floor_bytes / MiB, max(ys or [0])), fontsize=8, rotation=90, va="top")
    what = "worst-case peak over all timings" if front.figure == "worst_case" else "static arena"
    ax.set_xlabel(f"{what} (MiB)")
    ax.set_ylabel(f"simulated latency on {front.device}{' (CUDA graph)' if front.cuda_graphs else ''} (ms)")
    ax.set_title(f"{front.graph}: fastest schedule per memory budget (str: streams)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    _separate(fig, [floor, *labels])
    return fig


def _separate(fig, labels: list, *, tries: int = 12) -> None:  # noqa: ANN001
    """Move each label that overlaps one placed before it below (then above) its point, a little
    further each try, until it overlaps none: points close together otherwise print their labels
    over one another."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    placed = []
    for label in labels:
        dx, dy = label.xyann
        box = label.get_window_extent(renderer)
        step_pt = box.height * 72 / fig.dpi + 2
        for k in range(1, tries + 1):
            if not any(box.overlaps(other) for other in placed):
                break
            shift = step_pt * ((k + 1) // 2) * (-1 if k % 2 else 1)
            label.xyann = (dx, dy + shift)
            box = label.get_window_extent(renderer)
        placed.append(box)
