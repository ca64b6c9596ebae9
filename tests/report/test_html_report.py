"""The HTML report: its data, one self-contained file from the CLI, and the page in a real browser."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("plotly")

from helpers.browser import browser_or_skip  # noqa: E402
from helpers.cli import assert_user_error, sp  # noqa: E402
from helpers.models import small_model  # noqa: E402
from streamplan.app.report import report_model  # noqa: E402
from streamplan.memory.host_order import host_order_trace  # noqa: E402
from streamplan.models import load_model  # noqa: E402
from streamplan.report.html import render_html  # noqa: E402
from streamplan.schedule.context import ScheduleContext  # noqa: E402

ARTIFACTS = Path(__file__).resolve().parents[2] / "out"
CTX = ScheduleContext(max_streams=4, time_limit_s=2.0)


def test_report_data_follows_the_analyses() -> None:
    graph = load_model("seed-example2")
    report = report_model(graph, ["asap", "sequential"], CTX)
    assert [p.policy for p in report.policies] == ["sequential", "asap"]  # the baseline first
    seq, asap = report.policies
    assert seq.host_order_bytes == tuple(host_order_trace(graph, seq.run.schedule).trace_bytes())
    assert max(b for _, b in asap.simulated_samples) == asap.row.memory.simulated_peak_bytes == 4 << 20
    assert {t.stream for t in asap.timeline} == {0, 1} and len(asap.timeline) == len(graph.nodes)
    assert asap.row.speedup is not None and seq.explanation is not None
    assert "asap" in asap.explanation.to_dict().get("other", {}).get("policy", "asap")
    page = render_html(report)
    assert page.startswith("<!doctype html>") and "Plotly.newPlot" in page
    assert "<script src=" not in page and "<link " not in page  # nothing loaded from elsewhere


def test_cli_writes_one_self_contained_file(tmp_path) -> None:
    out = tmp_path / "r.html"
    r = sp("report", "seed-example1", "--policies", "sequential,nimble", "-o", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert len(text) > 1_000_000  # plotly.js is inside
    assert 'id="timeline-nimble"' in text and "Why the peaks are where they are" in text
    assert_user_error(sp("report", "seed-example1", "-o", str(out)), "already exists")
    assert_user_error(
        sp("report", "seed-example1", "--policies", "fastest", "-o", str(tmp_path / "x.html")), "fastest"
    )


def _page_checks(page, report) -> dict:
    return page.evaluate(
        """() => Array.from(document.querySelectorAll('.chart')).map(d => ({
            id: d.id,
            series: d.data ? d.data.length : -1,
            expected: +d.dataset.series,
            svgs: d.querySelectorAll('.main-svg').length,
            lines: Array.from(d.querySelectorAll('.scatterlayer path.js-line'))
                .filter(p => (p.getAttribute('d') || '').length > 10).length,
            bars: d.querySelectorAll('.barlayer .point path').length,
        }))"""
    )


def test_page_in_a_real_browser(tmp_path) -> None:
    with browser_or_skip() as browser:
        _, _, graph = small_model("squeezenet")
        report = report_model(graph, ["sequential", "asap", "ios"], CTX, model="squeezenet")
        path = tmp_path / "report.html"
        path.write_text(render_html(report))
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        requests: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(path.as_uri())
        page.wait_for_function(
            "document.querySelectorAll('.chart').length > 0 && Array.from(document.querySelectorAll('.chart'))"
            ".every(d => d.querySelector('.main-svg'))",
            timeout=60_000,
        )
        charts = {c["id"]: c for c in _page_checks(page, report)}
        ok = [p for p in report.policies if p.run is not None]
        assert charts["memory-simulated"]["series"] == len(ok) == charts["memory-simulated"]["lines"]
        assert charts["memory-host-order"]["series"] == len(ok) == charts["memory-host-order"]["lines"]
        for p in ok:
            chart = charts[f"timeline-{p.policy}"]
            assert chart["series"] == p.run.schedule.num_streams == chart["expected"]
            assert chart["bars"] == len(graph.nodes)  # one bar per op
        # hover over an op of a multi-stream timeline: its details appear
        timeline = page.locator("#timeline-asap")
        timeline.scroll_into_view_if_needed()
        first = report.policies[1].timeline[0]
        timeline.locator(".barlayer .point path").first.hover(force=True)
        page.wait_for_selector("#timeline-asap .hovertext, .hoverlayer .hovertext", timeout=10_000)
        tip = page.locator(".hoverlayer .hovertext").first.text_content()
        assert first.op in tip and first.kind in tip and "ms" in tip and "new memory" in tip, tip
        # drag across the timeline: the time axis zooms in
        box = timeline.locator(".nsewdrag").first.bounding_box()
        before = page.evaluate(
            "() => document.getElementById('timeline-asap')._fullLayout.xaxis.range.slice()"
        )
        y = box["y"] + box["height"] / 2
        page.mouse.move(box["x"] + box["width"] * 0.2, y)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.5, y, steps=8)
        page.mouse.up()
        after = page.evaluate(
            "() => document.getElementById('timeline-asap')._fullLayout.xaxis.range.slice()"
        )
        assert after[1] - after[0] < 0.6 * (before[1] - before[0]), (before, after)
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(tmp_path / "report.png", ARTIFACTS / "report_test_screenshot.png")
        assert errors == [], errors
        assert [u for u in requests if not u.startswith("file:")] == []  # no network
