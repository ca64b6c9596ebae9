"""The HTML report: one self-contained page (plotly's script, the styles and the data inline).

Opening the file needs no network: ``plotly.js`` is embedded, and nothing on the page
loads anything. Sections: the policy table, live memory over simulated time and over
the host's launches (one curve per policy, worst cases dashed), each schedule's stream
timeline (hover an op for its name, kind, launch, start and end times, new bytes and
FLOPs; drag to zoom, double-click to reset), for a training step the memory at each
policy's peak by role (parameters, gradients, optimizer state, saved activations...),
the latency/memory Pareto front of budgeted schedules beside the fixed policies, and
each policy's peaks explained. Each section is a function of the ``ModelReport``;
adding one is one more function in ``SECTIONS``.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from typing import Any

from streamplan.app.report import ModelReport, PolicyReport
from streamplan.errors import UnsupportedError
from streamplan.fusion.plan import fuses
from streamplan.memory.breakdown import CATEGORIES
from streamplan.report.units import MiB, fmt_bytes, fmt_count, fmt_ms
from streamplan.report.views import explain_lines

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
CONFIG = {"displaylogo": False, "responsive": True, "scrollZoom": False}
STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1200px;
       color: #222222; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
.summary { color: #555555; } .note { color: #666666; font-size: 0.9rem; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 0.3rem 0.7rem; text-align: right; border-bottom: 1px solid #eee; }
th:first-child, td:first-child { text-align: left; } thead th { border-bottom: 2px solid #999999; }
td.error { color: #b00; text-align: left; }
pre { background: #f7f7f7; padding: 0.8rem; overflow-x: auto; font-size: 0.85rem; }
.chart { width: 100%; }
"""


def plotly_js() -> str:
    """plotly.js, minified, from the installed plotly package (no CDN)."""
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        raise UnsupportedError(
            "the HTML report needs the optional package 'plotly'",
            hint="pip install plotly  (or: pip install 'streamplan[report]')",
        ) from None
    return get_plotlyjs().replace("</script", "<\\/script")  # must not end its own element


def render_html(report: ModelReport) -> str:
    """The report as one HTML document."""
    js = plotly_js()
    charts: list[tuple[str, dict[str, Any]]] = []
    body = [section(report, charts) for section in SECTIONS]
    scripts = "\n".join(
        f"Plotly.newPlot({json.dumps(cid)}, {_json(fig['data'])}, {_json(fig['layout'])}, {_json(CONFIG)});"
        for cid, fig in charts
    )
    title = f"streamplan: {report.model}"
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n"
        f"<script>{js}</script>\n</head>\n<body>\n" + "\n".join(body) + f"\n<script>\n{scripts}\n</script>\n"
        "</body>\n</html>\n"
    )


def _shown(text: Any) -> str:
    """A name from the graph or the run as plotly should show it: plotly reads its labels as a
    subset of HTML (links, styles), so ``<``, ``>`` and ``&`` are written as entities, which it
    shows as the characters they stand for (with no ``<`` there is no tag, so quotes stay)."""
    return html.escape(str(text), quote=False)


def _json(obj: Any) -> str:
    # inside <script>, "</" would end the element
    return json.dumps(obj, separators=(",", ":")).replace("</", "<\\/")


def _chart(charts: list, cid: str, data: list[dict], layout: dict, series: int) -> str:
    charts.append((cid, {"data": data, "layout": layout}))
    return f'<div class="chart" id="{html.escape(cid)}" data-series="{series}"></div>'


def _ok(report: ModelReport) -> list[PolicyReport]:
    return [p for p in report.policies if p.run is not None]


# -- sections ---------------------------------------------------------------------


def header(report: ModelReport, charts: list) -> str:
    g = report.graph
    shapes = ", ".join(f"{v} {list(g.values[v].shape)} {g.values[v].dtype}" for v in g.inputs[:4])
    return (
        f"<header><h1>{html.escape(report.model)}: streams, latency and memory</h1>"
        f'<p class="summary">{fmt_count(len(g.nodes))} ops, {fmt_count(g.param_count())} parameters, '
        f"inputs {html.escape(shapes)}; simulated on the <b>{html.escape(report.device)}</b> profile; "
        f"memory counts {html.escape(report.includes)}.</p>"
        + (
            f'<p class="summary">One <b>training step</b>: forward, loss ({html.escape(report.training)}), '
            "backward and update.</p>"
            if report.training
            else ""
        )
        + (
            f'<p class="summary">Fusion <b>{html.escape(report.fusion)}</b>: each policy runs '
            + ", ".join(f"{html.escape(p.policy)} {p.row.kernels} kernels" for p in _ok(report))
            + ".</p>"
            if fuses(report.fusion)
            else ""
        )
        + "</header>"
    )


def policy_table(report: ModelReport, charts: list) -> str:
    head = (
        "<tr><th>policy</th><th>streams</th><th>events</th><th>latency</th><th>speedup</th>"
        "<th>host-order</th><th>worst case</th><th>simulated</th><th>torch alloc</th><th>torch resv</th>"
        "<th>arena</th></tr>"
    )
    rows = []
    for p in report.policies:
        r = p.row
        if r.error or r.memory is None:
            rows.append(
                f'<tr><td>{html.escape(r.policy)}</td><td class="error" colspan="10">{html.escape(r.error or "")}</td></tr>'
            )
            continue
        m = r.memory
        wc = m.worst_case
        worst = _mib(wc.upper_bytes) if wc.exact else f"[{_mib(wc.lower_bytes)}, {_mib(wc.upper_bytes)}]"
        tc = m.torch_cuda
        cells = [
            str(r.streams),
            str(r.events),
            fmt_ms(r.makespan_ms),
            f"{r.speedup:.2f}x" if r.speedup else "-",
            _mib(m.host_order_peak_bytes),
            worst,
            _mib(m.simulated_peak_bytes),
            _mib(tc and tc.allocated_peak_bytes),
            _mib(tc and tc.reserved_peak_bytes),
            _mib(m.arena.arena_bytes),
        ]
        rows.append(
            f"<tr><td>{html.escape(r.policy)}</td>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"
        )
    return (
        '<section id="policies"><h2>Policies</h2>'
        f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
        '<p class="note">Memory in MiB (2<sup>20</sup> bytes). Host-order: allocations replayed in launch '
        "order (what a program-order estimator reports); worst case: the most that can be live at once over "
        "every timing the schedule allows (an interval when not proven exact); simulated: along the predicted "
        "timeline; torch alloc/resv: PyTorch's caching allocator replayed; arena: a static placement valid "
        "for every timing.</p></section>"
    )


def memory_charts(report: ModelReport, charts: list) -> str:
    ok = _ok(report)
    sim, host, shapes = [], [], []
    for i, p in enumerate(ok):
        color = COLORS[i % len(COLORS)]
        end_ms = p.run.makespan_ms if p.run else 0.0
        xs = [t for t, _ in p.simulated_samples] + [end_ms]
        ys = [b / MiB for _, b in p.simulated_samples]
        ys.append(ys[-1] if ys else 0.0)
        sim.append(_line(p.policy, xs, ys, color, "%{y:.3f} MiB at %{x:.4f} ms"))
        host_ys = [b / MiB for b in p.host_order_bytes]
        host.append(
            _line(p.policy, list(range(len(host_ys))), host_ys, color, "%{y:.3f} MiB after launch %{x}")
        )
        wc = p.row.memory.worst_case.upper_bytes / MiB if p.row.memory else 0.0
        shapes.append(
            {"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": wc, "y1": wc,
             "line": {"color": color, "dash": "dash", "width": 1}}
        )  # fmt: skip
    sim_layout = _layout(
        "Live activations over simulated time (dashed: worst case over all timings)",
        "simulated time (ms)",
        "MiB",
    )
    sim_layout["shapes"] = shapes
    sim_layout["height"] = 400
    host_layout = _layout(
        "Live activations in host launch order (a program-order estimator's view)", "launch", "MiB"
    )
    return (
        '<section id="memory"><h2>Memory over time</h2>'
        + _chart(charts, "memory-simulated", sim, sim_layout, len(sim))
        + _chart(charts, "memory-host-order", host, host_layout, len(host))
        + "</section>"
    )


def timelines(report: ModelReport, charts: list) -> str:
    parts = ['<section id="timelines"><h2>Stream timelines (simulated)</h2>'
             '<p class="note">Hover an op for its details; drag to zoom, double-click to reset.</p>']  # fmt: skip
    for p in _ok(report):
        streams = sorted({t.stream for t in p.timeline})
        data = []
        for k, s in enumerate(streams):
            ops = [t for t in p.timeline if t.stream == s]
            data.append(
                {
                    "type": "bar",
                    "orientation": "h",
                    "name": f"stream {s}",
                    "y": [f"s{s}"] * len(ops),
                    "x": [max(t.end_ms - t.start_ms, 1e-9) for t in ops],
                    "base": [t.start_ms for t in ops],
                    "marker": {"color": COLORS[k % len(COLORS)], "line": {"width": 0.5, "color": "#fff"}},
                    "customdata": [
                        [
                            _shown(t.op),
                            _shown(t.kind),
                            t.launch_ms,
                            t.start_ms,
                            t.end_ms,
                            fmt_bytes(t.output_bytes),
                            fmt_count(t.flops),
                        ]
                        for t in ops
                    ],
                    "hovertemplate": "<b>%{customdata[0]}</b> %{customdata[1]}<br>stream %{y}, launched at "
                    "%{customdata[2]:.4f} ms<br>runs %{customdata[3]:.4f} to %{customdata[4]:.4f} ms<br>"
                    "new memory %{customdata[5]}, %{customdata[6]} FLOPs<extra></extra>",
                }
            )
        title = (
            f"{_shown(p.policy)}: {len(streams)} stream{'s' if len(streams) > 1 else ''}, "
            f"{fmt_ms(p.run.makespan_ms if p.run else None)}"
        )
        layout = _layout(title, "simulated time (ms)", "")
        layout["yaxis"].update({"autorange": "reversed", "fixedrange": True, "type": "category"})
        layout["barmode"] = "overlay"
        layout["height"] = 160 + 28 * len(streams)
        parts.append(_chart(charts, f"timeline-{p.policy}", data, layout, len(data)))
    return "".join(parts) + "</section>"


def role_memory(report: ModelReport, charts: list) -> str:
    """A training step's memory at each policy's simulated peak (residents included), by role."""
    ok = [p for p in _ok(report) if p.row.breakdown is not None]
    if not ok:
        return ""
    peaks = []
    for p in ok:
        b = p.row.breakdown
        peaks.append(b.peak("simulated") or b.peak("host-order"))
    used = [c for c in CATEGORIES if any(pk is not None and pk.composition[c] for pk in peaks)]
    data = []
    for k, c in enumerate(used):
        ys = [pk.composition[c] / MiB if pk is not None else 0.0 for pk in peaks]
        data.append(
            {
                "type": "bar",
                "name": c.replace("_", " "),
                "x": [_shown(p.policy) for p in ok],
                "y": ys,
                "marker": {"color": COLORS[k % len(COLORS)]},
                "hovertemplate": f"{c.replace('_', ' ')}: %{{y:.3f}} MiB<extra>%{{x}}</extra>",
            }
        )
    layout = _layout("Memory at each policy's simulated peak, by role (residents included)", "policy", "MiB")
    layout["barmode"] = "stack"
    layout["xaxis"]["type"] = "category"
    return (
        '<section id="roles"><h2>Memory by role</h2>'
        + _chart(charts, "memory-roles", data, layout, len(data))
        + '<p class="note">What is live at the simulated peak: parameters, their gradients, the optimizer '
        "state, activations the forward saved for the backward, temporaries, the batch and buffers.</p>"
        "</section>"
    )


def pareto_chart(report: ModelReport, charts: list) -> str:
    """The fastest budgeted schedule per memory budget (a step line) beside the fixed policies."""
    front = report.pareto
    if front is None:
        if report.pareto_error is None:
            return ""
        return (
            '<section id="pareto"><h2>Latency against memory</h2>'
            f'<p class="note">No Pareto front: {html.escape(report.pareto_error)}</p></section>'
        )
    what = "worst-case peak" if front.figure == "worst_case" else "static arena"
    points = sorted(front.points, key=lambda p: p.worst_case_peak_bytes)
    budget = {
        "type": "scatter",
        "mode": "lines+markers",
        "name": "budget policy (front)",
        "line": {"shape": "hv", "color": COLORS[0], "width": 2},
        "marker": {"size": 8},
        "x": [p.worst_case_peak_bytes / MiB for p in points],
        "y": [p.makespan_ms for p in points],
        "customdata": [[p.budget_bytes / MiB, p.streams, _shown(p.source)] for p in points],
        "hovertemplate": f"{what} %{{x:.3f}} MiB (budget %{{customdata[0]:.3f}} MiB)<br>"
        "latency %{y:.4f} ms on %{customdata[1]} streams<br>found by %{customdata[2]}<extra></extra>",
    }
    fixed = {
        "type": "scatter",
        "mode": "markers+text",
        "name": "fixed policies",
        "marker": {"size": 10, "symbol": "diamond", "color": COLORS[1]},
        "x": [f.worst_case_peak_bytes / MiB for f in front.fixed],
        "y": [f.makespan_ms for f in front.fixed],
        "text": [_shown(f.policy) for f in front.fixed],
        "textposition": "top center",
        "customdata": [
            [f.streams, "dominated by the front" if f.dominated else "on the front"] for f in front.fixed
        ],
        "hovertemplate": f"<b>%{{text}}</b><br>{what} %{{x:.3f}} MiB, latency %{{y:.4f}} ms<br>"
        "%{customdata[0]} streams, %{customdata[1]}<extra></extra>",
    }
    layout = _layout(
        f"Fastest schedule per memory budget ({what})", f"{what} (MiB)", "simulated latency (ms)"
    )
    floor = front.floor_bytes / MiB
    layout["shapes"] = [
        {"type": "line", "yref": "paper", "x0": floor, "x1": floor, "y0": 0, "y1": 1,
         "line": {"color": "#999999", "dash": "dot", "width": 1}}
    ]  # fmt: skip
    layout["height"] = 420
    where = ", for the ops as captured" if fuses(report.fusion) else ""
    return (
        '<section id="pareto"><h2>Latency against memory</h2>'
        + _chart(charts, "pareto-front", [budget, fixed], layout, 2)
        + f'<p class="note">The budget policy\'s fastest schedule for each budget from the floor '
        f"({floor:.2f} MiB, dotted: the memory-optimal one-stream order; only rematerialization goes lower) "
        f"to the fastest fixed policy's figure, found in {front.search_time_s:.1f} s{where}. "
        "A fixed policy above and to the right of a front point is slower and larger: dominated.</p></section>"
    )


def explanations(report: ModelReport, charts: list) -> str:
    parts = ['<section id="explain"><h2>Why the peaks are where they are</h2>']
    for p in _ok(report):
        if p.explanation is None:
            continue
        text = "\n".join(explain_lines(p.explanation))
        parts.append(
            f"<details open><summary>{html.escape(p.policy)}</summary><pre>{html.escape(text)}</pre></details>"
        )
    return "".join(parts) + "</section>"


def footer(report: ModelReport, charts: list) -> str:
    from streamplan import __version__

    return f'<footer class="note"><p>Made by streamplan {__version__} (<code>streamplan report</code>).</p></footer>'


SECTIONS: tuple[Callable[[ModelReport, list], str], ...] = (
    header,
    policy_table,
    memory_charts,
    role_memory,
    pareto_chart,
    timelines,
    explanations,
    footer,
)


def _mib(b: int | None) -> str:
    return "-" if b is None else f"{b / MiB:.2f}"


def _line(name: str, xs: list, ys: list, color: str, hover: str) -> dict[str, Any]:
    name = _shown(name)
    return {
        "type": "scatter",
        "mode": "lines",
        "line": {"shape": "hv", "color": color, "width": 2},
        "name": name,
        "x": xs,
        "y": ys,
        "hovertemplate": f"{name}: {hover}<extra></extra>",
    }


def _layout(title: str, xtitle: str, ytitle: str) -> dict[str, Any]:
    return {
        "title": {"text": title, "font": {"size": 15}},
        "xaxis": {"title": {"text": xtitle}, "zeroline": False},
        "yaxis": {"title": {"text": ytitle}, "rangemode": "tozero"},
        "margin": {"l": 60, "r": 20, "t": 50, "b": 45},
        "legend": {"orientation": "h", "y": -0.25},
        "hovermode": "closest",
        "dragmode": "zoom",
    }
