"""A sweep's summary table and plots: where multi-stream scheduling pays off, at what memory cost.

The table has one line per model, batch, device (and dtype and stream cap, when those
vary): the policy with the best simulated latency, its speedup over sequential, and its
worst-case peak against sequential's. The plots draw speedup and worst-case peak
against batch size, one panel per model, one line per policy and device.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from rich.table import Table

from streamplan.report.units import MiB, fmt_ms
from streamplan.schedule.registry import BASELINE_POLICY
from streamplan.sweep.rows import SweepRow

FORMATS = ("png", "svg", "pdf")
PLOTS = ("speedup", "peak")


def _setting(row: SweepRow) -> tuple[Any, ...]:
    """Everything that identifies a row but its policy (the rows a summary line compares)."""
    return tuple(v for name, v in row.job.to_dict().items() if name != "policy")


def _varies(rows: Sequence[SweepRow], name: str) -> bool:
    return len({getattr(r.job, name) for r in rows}) > 1


def _batch(b: int | None) -> str:
    return "default" if b is None else str(b)


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / MiB:.2f}"


def summary_table(rows: Sequence[SweepRow], *, title: str = "sweep") -> Table:
    """One line per setting: its best policy by simulated latency, the speedup and memory cost."""
    extra = [n for n in ("dtype", "max_streams") if _varies(rows, n)]
    t = Table(title=f"{title}: best policy per model, batch and device", show_edge=False)
    t.add_column("model", overflow="fold")
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
        base = next((r for r in ok if r.job.policy == BASELINE_POLICY), None)
        failed = sum(1 for r in group if not r.ok)
        ratio = "-"
        if best and base and best.worst_case_peak_bytes and base.worst_case_peak_bytes:
            ratio = f"{best.worst_case_peak_bytes / base.worst_case_peak_bytes:.2f}x"
        t.add_row(
            job.model,
            _batch(job.batch),
            *(str(getattr(job, n)) for n in extra),
            job.device,
            best.job.policy if best else "-",
            fmt_ms(best.makespan_ms) if best else "-",
            f"{best.speedup:.2f}x" if best and best.speedup else "-",
            _mib(best.worst_case_peak_bytes) if best else "-",
            _mib(base.worst_case_peak_bytes) if base else "-",
            ratio,
            f"[red]{failed}[/red]" if failed else "0",
        )
    return t


def failures(rows: Sequence[SweepRow], limit: int = 5) -> list[str]:
    """The first ``limit`` failed rows, one line each (job and error)."""
    bad = [r for r in rows if not r.ok]
    lines = [f"{r.job.describe()}: {r.error}" for r in bad[:limit]]
    if len(bad) > limit:
        lines.append(f"... and {len(bad) - limit} more (the rows' 'error' field)")
    return lines


def render(rows: Sequence[SweepRow], what: str, *, fmt: str = "png") -> bytes:
    """The ``what`` plot (``speedup`` or ``peak``: worst-case peak MiB) against batch size,
    one panel per model, one line per policy and device, as ``fmt`` bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if r.ok]
    models = list(dict.fromkeys(r.job.model for r in rows))
    batches = sorted({r.job.batch for r in rows}, key=lambda b: -1 if b is None else b)
    label_axes = ["policy", "device"] + [n for n in ("dtype", "max_streams") if _varies(rows, n)]
    cols = min(3, len(models))
    nrows = -(-len(models) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5 * cols, 3.6 * nrows), squeeze=False)
    for i, model in enumerate(models):
        ax = axes[i // cols][i % cols]
        lines: dict[tuple[Any, ...], dict[int | None, float]] = {}
        for r in ok:
            if r.job.model != model:
                continue
            y = r.speedup if what == "speedup" else r.worst_case_peak_bytes
            if y is None:
                continue
            key = tuple(getattr(r.job, n) for n in label_axes)
            lines.setdefault(key, {})[r.job.batch] = y if what == "speedup" else y / MiB
        for key, points in lines.items():
            xs = [batches.index(b) for b in batches if b in points]
            ys = [points[b] for b in batches if b in points]
            ax.plot(xs, ys, marker="o", label=" ".join(str(k) for k in key))
        if what == "speedup":
            ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        ax.set_xticks(range(len(batches)))
        ax.set_xticklabels([_batch(b) for b in batches])
        ax.set_title(model)
        ax.set_xlabel("batch")
        ax.set_ylabel("speedup over sequential" if what == "speedup" else "worst-case peak (MiB)")
        if lines:
            ax.legend(fontsize=7)
    for j in range(len(models), nrows * cols):
        axes[j // cols][j % cols].axis("off")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110)
    plt.close(fig)
    return buf.getvalue()
