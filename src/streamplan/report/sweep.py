"""A sweep's summary table and plots: where multi-stream scheduling pays off, at what memory cost.

The table has one line per model, batch, device (and dtype and stream cap, when those
vary): the policy with the best simulated latency, its speedup over sequential, and its
worst-case peak against sequential's. The plots draw speedup and worst-case peak
against batch size, one panel per model, one line per policy (and budget) and device,
and each setting's Pareto front of latency against worst-case peak across policies
and budgets.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text

from streamplan.report.units import MiB, fmt_ms
from streamplan.schedule.registry import BASELINE_POLICY
from streamplan.sweep.rows import SweepRow
from streamplan.sweep.spec import AXIS_NAMES

FORMATS = ("png", "svg", "pdf")
PLOTS = ("speedup", "peak", "pareto")


# axes shown only when they vary across the rows (model, batch and device always are)
_OPTIONAL_AXES = ("dtype", "train", "optimizer", "cuda_graphs", "max_streams", "fusion")
# the axes a summary line or a Pareto front compares across (the sweep axes, not policy names)
_COMPARED_AXES = ("policy", "budget")


def _setting(row: SweepRow) -> tuple[Any, ...]:
    """Everything that identifies a row but its policy and budget (the rows a summary line,
    or a Pareto front, compares)."""
    return tuple(v for name, v in row.job.to_dict().items() if name not in _COMPARED_AXES)


def _varies(rows: Sequence[SweepRow], name: str) -> bool:
    return len({getattr(r.job, name) for r in rows}) > 1


def policy_label(row: SweepRow) -> str:
    """The row's policy, with its memory budget when it has one (``budget@0.8x``)."""
    return row.job.policy if row.job.budget is None else f"{row.job.policy}@{row.job.budget}"


def _value(name: str, v: Any) -> str:
    if isinstance(v, bool):
        return {"train": ("inference", "train"), "cuda_graphs": ("eager", "CUDA graphs")}[name][v]
    return str(v)


def model_label(spec: str) -> str:
    """A model spec as a table shows it: a file's name without its directories (the path is in
    the rows), so that the column stays narrow."""
    from pathlib import Path

    if ".py:" in spec:
        path, _, function = spec.rpartition(":")
        return f"{Path(path).name}:{function}"
    if spec.endswith((".json", ".onnx")):
        return Path(spec).name
    return spec


def _batch(b: int | None) -> str:
    return "default" if b is None else str(b)


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / MiB:.2f}"


def summary_table(rows: Sequence[SweepRow], *, title: str = "sweep") -> Table:
    """One line per setting: its best policy by simulated latency, the speedup and memory cost."""
    extra = [n for n in _OPTIONAL_AXES if _varies(rows, n)]
    t = Table(title=f"{title}: best policy per model, batch and device", show_edge=False)
    t.add_column("model", no_wrap=True, overflow="ellipsis")  # a name broken over lines is hard to read
    for col in ("batch", *extra, "device", "best policy", "latency", "speedup"):
        t.add_column(
            col, justify="right" if col in ("batch", "latency", "speedup", "max_streams") else "left"
        )
    for col in ("worst-case MiB", f"{BASELINE_POLICY} MiB", "memory ×", "failed"):
        t.add_column(col, justify="right")
    groups: dict[tuple[Any, ...], list[SweepRow]] = {}
    for r in rows:
        groups.setdefault(_setting(r), []).append(r)
    for group in groups.values():
        job = group[0].job
        ok = [r for r in group if r.ok and r.makespan_ms is not None]
        best = min(ok, key=lambda r: r.makespan_ms) if ok else None
        base = next((r for r in ok if r.job.policy == BASELINE_POLICY and r.job.budget is None), None)
        failed = sum(1 for r in group if not r.ok)
        ratio = "-"
        if best and base and best.worst_case_peak_bytes and base.worst_case_peak_bytes:
            ratio = f"{best.worst_case_peak_bytes / base.worst_case_peak_bytes:.2f}x"
        t.add_row(
            model_label(job.model),
            _batch(job.batch),
            *(_value(n, getattr(job, n)) for n in extra),
            job.device,
            policy_label(best) if best else "-",
            fmt_ms(best.makespan_ms) if best else "-",
            f"{best.speedup:.2f}x" if best and best.speedup else "-",
            _mib(best.worst_case_peak_bytes) if best else "-",
            _mib(base.worst_case_peak_bytes) if base else "-",
            ratio,
            Text(str(failed), style="red") if failed else "0",
        )
    return t


def failures(rows: Sequence[SweepRow], limit: int = 5) -> list[str]:
    """The first ``limit`` failed rows, one line each (job and error)."""
    bad = [r for r in rows if not r.ok]
    lines = [f"{r.job.describe()}: {r.error}" for r in bad[:limit]]
    if len(bad) > limit:
        lines.append(f"... and {len(bad) - limit} more (the rows' 'error' field)")
    return lines


@dataclass(frozen=True)
class FrontPoint:
    """One row on a Pareto front: its policy (and budget), worst-case peak and latency."""

    label: str
    peak_bytes: int
    makespan_ms: float


def pareto_fronts(rows: Sequence[SweepRow]) -> dict[tuple[Any, ...], list[FrontPoint]]:
    """Per setting (every axis but policy and budget), the rows no other row beats on both
    latency and worst-case peak, by increasing peak (so by decreasing latency)."""
    groups: dict[tuple[Any, ...], list[FrontPoint]] = {}
    for r in rows:
        if r.ok and r.makespan_ms is not None and r.worst_case_peak_bytes is not None:
            point = FrontPoint(policy_label(r), r.worst_case_peak_bytes, r.makespan_ms)
            groups.setdefault(_setting(r), []).append(point)
    fronts = {}
    for key, points in groups.items():
        front: list[FrontPoint] = []
        for p in sorted(points, key=lambda p: (p.peak_bytes, p.makespan_ms)):
            if not front or p.makespan_ms < front[-1].makespan_ms:
                front.append(p)
        fronts[key] = front
    return fronts


def render(rows: Sequence[SweepRow], what: str, *, fmt: str = "png") -> bytes:
    """The ``what`` plot as ``fmt`` bytes, one panel per model: ``speedup`` or ``peak``
    (worst-case peak MiB) against batch size, a line per policy (and budget) and device;
    ``pareto``: latency against worst-case peak, every row a dot, each setting's front a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if what not in PLOTS:
        raise ValueError(f"unknown sweep plot {what!r}")
    models = list(dict.fromkeys(r.job.model for r in rows))
    cols = min(3, max(1, len(models)))
    nrows = max(1, -(-len(models) // cols))
    fig, axes = plt.subplots(nrows, cols, figsize=(5 * cols, 3.6 * nrows), squeeze=False)
    for i, model in enumerate(models):
        ax = axes[i // cols][i % cols]
        mine = [r for r in rows if r.job.model == model]
        drawn = _pareto_panel(ax, mine, rows) if what == "pareto" else _batch_panel(ax, mine, rows, what)
        ax.set_title(model)
        if drawn:
            ax.legend(fontsize=7)
    for j in range(len(models), nrows * cols):
        axes[j // cols][j % cols].axis("off")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110)
    plt.close(fig)
    return buf.getvalue()


def _batch_panel(ax: Any, mine: Sequence[SweepRow], rows: Sequence[SweepRow], what: str) -> bool:
    batches = sorted({r.job.batch for r in rows}, key=lambda b: -1 if b is None else b)
    label_axes = ["device"] + [n for n in _OPTIONAL_AXES if _varies(rows, n)]
    lines: dict[tuple[Any, ...], dict[int | None, float]] = {}
    for r in mine:
        y = r.speedup if what == "speedup" else r.worst_case_peak_bytes
        if not r.ok or y is None:
            continue
        key = (policy_label(r), *(_value(n, getattr(r.job, n)) for n in label_axes))
        lines.setdefault(key, {})[r.job.batch] = y if what == "speedup" else y / MiB
    for key, points in lines.items():
        xs = [batches.index(b) for b in batches if b in points]
        ys = [points[b] for b in batches if b in points]
        ax.plot(xs, ys, marker="o", label=" ".join(str(k) for k in key))
    if what == "speedup":
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(batches)))
    ax.set_xticklabels([_batch(b) for b in batches])
    ax.set_xlabel("batch")
    ax.set_ylabel("speedup over sequential" if what == "speedup" else "worst-case peak (MiB)")
    return bool(lines)


def _pareto_panel(ax: Any, mine: Sequence[SweepRow], rows: Sequence[SweepRow]) -> bool:
    names = ["batch", "device"] + [n for n in _OPTIONAL_AXES if _varies(rows, n)]
    fronts = pareto_fronts(mine)
    for r in mine:  # every row, faint: what the front was chosen from
        if r.ok and r.makespan_ms is not None and r.worst_case_peak_bytes is not None:
            ax.scatter(r.worst_case_peak_bytes / MiB, r.makespan_ms, s=10, color="lightgrey", zorder=1)
    for key, front in fronts.items():
        setting = dict(zip([n for n in AXIS_NAMES if n not in _COMPARED_AXES], key))
        label = " ".join(_batch(setting[n]) if n == "batch" else _value(n, setting[n]) for n in names)
        xs = [p.peak_bytes / MiB for p in front]
        ys = [p.makespan_ms for p in front]
        ax.step(xs, ys, where="post", marker="o", label=f"batch {label}", zorder=2)
        for p, x, y in zip(front, xs, ys):
            ax.annotate(p.label, (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("worst-case peak (MiB)")
    ax.set_ylabel("simulated latency (ms)")
    return bool(fronts)
