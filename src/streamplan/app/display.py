"""How a result shows itself in a notebook: an HTML table, a memory curve as an inline image.

Every result the session verbs return has a readable ``__str__``; in Jupyter, ``_repr_html_``
shows it richly. ``Shown`` gives a result its ``_repr_html_`` (its text in a ``<pre>``,
unless the result draws something better). The memory curve is drawn here as a small SVG
step chart (live MiB over simulated milliseconds, the worst-case peak as a dashed line),
embedded as an ``<img>`` data URI: no plotting library and no file, so a notebook shows it
wherever it is opened. The full figures with streams beneath are ``streamplan plot``'s.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence

MIB = 1 << 20
_WIDTH, _HEIGHT, _PAD = 560, 220, 44
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


class Shown:
    """A result that shows its text in a notebook (subclasses may draw more)."""

    __slots__ = ()

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(str(self))}</pre>"


def html_table(header: Sequence[str], rows: Sequence[Sequence[object]], *, caption: str = "") -> str:
    """A plain HTML table, every cell escaped (numbers right-aligned)."""

    def cell(tag: str, v: object) -> str:
        align = ' style="text-align:right"' if isinstance(v, (int, float)) or _numeric(v) else ""
        return f"<{tag}{align}>{html.escape(str(v))}</{tag}>"

    head = "".join(cell("th", h) for h in header)
    body = "".join("<tr>" + "".join(cell("td", v) for v in r) + "</tr>" for r in rows)
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _numeric(v: object) -> bool:
    text = str(v).replace(".", "", 1).replace("x", "").replace(",", "").strip()
    return text.isdigit()


def curve_image(
    curves: Sequence[tuple[str, Sequence[tuple[float, int]], int | None]], *, title: str = ""
) -> str:
    """An ``<img>`` of live memory over time: one step line per ``(label, samples, worst_case_bytes)``
    (samples are ``(time_ms, live_bytes)`` steps), each worst case a dashed line in its colour."""
    svg = curve_svg(curves, title=title)
    data = base64.b64encode(svg.encode()).decode()
    return f'<img alt="{html.escape(title or "live memory")}" src="data:image/svg+xml;base64,{data}"/>'


def curve_svg(
    curves: Sequence[tuple[str, Sequence[tuple[float, int]], int | None]], *, title: str = ""
) -> str:
    """The SVG that ``curve_image`` embeds."""
    t_max = max((t for _, samples, _ in curves for t, _ in samples), default=0.0) or 1.0
    y_max = max(
        [b for _, samples, _ in curves for _, b in samples] + [w or 0 for _, _, w in curves], default=0
    )
    y_max = y_max or 1
    w, h = _WIDTH - 2 * _PAD, _HEIGHT - 2 * _PAD

    def x(t: float) -> float:
        return _PAD + w * t / t_max

    def y(b: float) -> float:
        return _PAD + h * (1 - b / y_max)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{_HEIGHT}" font-family="sans-serif" '
        'font-size="11">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<line x1="{_PAD}" y1="{_PAD + h}" x2="{_PAD + w}" y2="{_PAD + h}" stroke="black"/>',
        f'<line x1="{_PAD}" y1="{_PAD}" x2="{_PAD}" y2="{_PAD + h}" stroke="black"/>',
        f'<text x="{_PAD}" y="{_PAD - 24}" font-size="13">{html.escape(title)}</text>',
        f'<text x="{_PAD + w}" y="{_HEIGHT - 8}" text-anchor="end">simulated time, {t_max:.3g} ms</text>',
        f'<text x="4" y="{_PAD - 6}">{y_max / MIB:.4g} MiB</text>',
        f'<text x="4" y="{_PAD + h}">0</text>',
    ]
    for i, (label, samples, worst) in enumerate(curves):
        colour = _COLOURS[i % len(_COLOURS)]
        points: list[str] = []
        last = 0
        for t, b in samples:
            points.append(f"{x(t):.1f},{y(last):.1f} {x(t):.1f},{y(b):.1f}")
            last = b
        points.append(f"{x(t_max):.1f},{y(last):.1f}")
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{" ".join(points)}"/>'
        )
        if worst is not None:
            parts.append(
                f'<line x1="{_PAD}" y1="{y(worst):.1f}" x2="{_PAD + w}" y2="{y(worst):.1f}" stroke="{colour}" '
                'stroke-dasharray="4 3"/>'
            )
        legend = f"{label}" + (f" (worst case {worst / MIB:.4g} MiB)" if worst is not None else "")
        parts.append(
            f'<text x="{_PAD + 8 + 200 * (i % 2)}" y="{_PAD - 8 + 12 * (i // 2)}" fill="{colour}">'
            f"{html.escape(legend)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
