"""``Comparison``: every policy's row on one graph under one ``Settings`` (``Session.compare``)."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from streamplan.app.analysis import PolicyRow
from streamplan.app.display import Shown, html_table
from streamplan.app.training import TrainingAnswer
from streamplan.schedule.settings import Settings

MIB = 1 << 20


@dataclass(frozen=True)
class Comparison(Shown):
    """Every policy's row (the baseline first; one per fusion mode compared, then one per saved
    schedule); for a training step, ``answer`` says whether and where each policy raises the
    peak. ``notes`` are what loading the saved schedules said. In a notebook it shows as a table."""

    model: str
    settings: Settings
    rows: tuple[PolicyRow, ...]
    answer: TrainingAnswer | None = None
    notes: tuple[str, ...] = ()

    def row(self, policy: str, fusion: str | None = None) -> PolicyRow:
        """The row of ``policy`` (of the fusion mode ``fusion`` when several were compared;
        ``KeyError`` when it was not compared)."""
        for r in self.rows:
            if r.policy == policy and (fusion is None or r.fusion == fusion):
                return r
        raise KeyError(policy)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"model": self.model, "rows": [r.to_dict() for r in self.rows]}
        if self.answer is not None:
            d["answer"] = self.answer.to_dict()
        if self.notes:
            d["notes"] = list(self.notes)
        return d

    def _fused(self) -> bool:
        return any(r.fused for r in self.rows)

    def __str__(self) -> str:
        lines = [f"{self.model} on {self.settings.device_name}: policy, streams, makespan, worst-case peak"]
        fused = self._fused()
        for r in self.rows:
            label = f"{r.policy} ({r.fusion})" if fused else r.policy
            if r.error:
                lines.append(f"  {label:<12} failed: {r.error}")
                continue
            wc = r.memory.worst_case.upper_bytes / MIB if r.memory is not None else float("nan")
            speed = f" ({r.speedup:.2f}x)" if r.speedup else ""
            lines.append(
                f"  {label:<12} {r.streams:>2} streams  {r.makespan_ms:9.3f} ms{speed}  {wc:10.2f} MiB"
            )
        if self.answer is not None:
            lines += [f"  {line}" for line in self.answer.lines]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        header = ["policy", "fusion", "kernels", "streams", "events", "makespan (ms)", "speedup"]
        memory = any(r.memory is not None for r in self.rows)
        if memory:
            header += ["host-order (MiB)", "worst case (MiB)", "simulated (MiB)", "arena (MiB)"]
        rows = []
        for r in self.rows:
            if r.error:
                rows.append([r.policy, r.fusion, "failed: " + r.error] + [""] * (len(header) - 3))
                continue
            cells: list[object] = [
                r.policy,
                r.fusion,
                r.kernels,
                r.streams,
                r.events,
                f"{r.makespan_ms:.3f}",
                f"{r.speedup:.2f}x" if r.speedup else "-",
            ]
            if memory:
                m = r.memory
                if m is None:
                    cells += ["-"] * 4
                else:
                    wc = m.worst_case
                    worst = (
                        f"{wc.upper_bytes / MIB:.2f}"
                        if wc.exact
                        else f"[{wc.lower_bytes / MIB:.2f}, {wc.upper_bytes / MIB:.2f}]"
                    )
                    sim = "-" if m.simulated_peak_bytes is None else f"{m.simulated_peak_bytes / MIB:.2f}"
                    cells += [
                        f"{m.host_order_peak_bytes / MIB:.2f}",
                        worst,
                        sim,
                        f"{m.arena.arena_bytes / MIB:.2f}",
                    ]
            rows.append(cells)
        caption = f"{self.model} on {self.settings.device_name} ({self.settings.includes.brief()})"
        extra = "".join(f"<p>{html.escape(line)}</p>" for line in (self.answer.lines if self.answer else ()))
        extra += "".join(f"<p>note: {html.escape(n)}</p>" for n in self.notes)
        return html_table(header, rows, caption=caption) + extra
