"""The HTML report: its data, one self-contained file from the CLI, and the page in a real browser."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("plotly")

from helpers.browser import browser_or_skip  # noqa: E402
from helpers.cli import assert_user_error, cli  # noqa: E402
from helpers.models import small_model  # noqa: E402
from streamplan.app.report import report_model  # noqa: E402
from streamplan.memory.host_order import host_order_trace  # noqa: E402
from streamplan.models import load_model  # noqa: E402
from streamplan.report.html import render_html  # noqa: E402
from streamplan.schedule.settings import Settings  # noqa: E402

ARTIFACTS = Path(__file__).resolve().parents[2] / "out"
CTX = Settings(max_streams=4, time_limit_s=2.0)


def test_report_data_follows_the_analyses() -> None:
    graph = load_model("seed-example2")
    report = report_model(graph, ["asap", "sequential"], CTX, pareto_points=3)
    assert [p.policy for p in report.policies] == ["sequential", "asap"]  # the baseline first
    seq, asap = report.policies
    assert seq.host_order_bytes == tuple(host_order_trace(graph, seq.run.schedule).trace_bytes())
    assert max(b for _, b in asap.simulated_samples) == asap.row.memory.simulated_peak_bytes == 4 << 20
    assert {t.stream for t in asap.timeline} == {0, 1} and len(asap.timeline) == len(graph.nodes)
    assert asap.row.speedup is not None and seq.explanation is not None
    assert "asap" in asap.explanation.to_dict().get("other", {}).get("policy", "asap")
    front = report.pareto
    assert front is not None and front.points and front.dominates_fixed()
    assert {f.policy for f in front.fixed} >= {"sequential", "asap"}
    page = render_html(report)
    assert page.startswith("<!doctype html>") and "Plotly.newPlot" in page
    assert 'id="pareto-front"' in page and 'id="memory-roles"' not in page  # inference: no roles
    assert "<script src=" not in page and "<link " not in page  # nothing loaded from elsewhere


def test_cli_writes_one_self_contained_file(tmp_path) -> None:
    out = tmp_path / "r.html"
    r = cli("report", "seed-example1", "--policies", "sequential,nimble", "-o", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert len(text) > 1_000_000  # plotly.js is inside
    assert 'id="timeline-nimble"' in text and "Why the peaks are where they are" in text
    assert_user_error(cli("report", "seed-example1", "-o", str(out)), "already exists")
    assert_user_error(
        cli("report", "seed-example1", "--policies", "fastest", "-o", str(tmp_path / "x.html")), "fastest"
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
        report = report_model(graph, ["sequential", "asap", "ios"], CTX, model="squeezenet", pareto_points=3)
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
        _check_pareto(page, report, charts)
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


def _check_pareto(page, report, charts: dict) -> None:
    """The front is drawn: a step line with one marker per budget point, one marker per fixed policy."""
    front = report.pareto
    assert front is not None and charts["pareto-front"]["series"] == 2 == charts["pareto-front"]["expected"]
    if len({(p.worst_case_peak_bytes, p.makespan_ms) for p in front.points}) > 1:
        assert charts["pareto-front"]["lines"] == 1  # the front's step line
    markers = page.evaluate(
        """() => Array.from(document.querySelectorAll('#pareto-front .scatterlayer .trace'))
            .map(t => t.querySelectorAll('.points .point').length)"""
    )
    assert markers == [len(front.points), len(front.fixed)], markers
    names = page.evaluate("() => document.getElementById('pareto-front').data.map(t => t.name)")
    assert names == ["budget policy (front)", "fixed policies"]


def test_training_report_in_a_real_browser(tmp_path) -> None:
    """A training step's page: memory by role, the Pareto front, no console error."""
    from helpers.training import mlp_graph

    with browser_or_skip() as browser:
        graph = mlp_graph("adam")
        ctx = CTX.replace(time_limit_s=0.3)
        report = report_model(graph, ["sequential", "asap"], ctx, model="mlp", pareto_points=3)
        assert report.training and "adam" in report.training
        page_text = render_html(report)
        assert "training step" in page_text and 'id="memory-roles"' in page_text
        path = tmp_path / "train.html"
        path.write_text(page_text)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(path.as_uri())
        page.wait_for_function(
            "Array.from(document.querySelectorAll('.chart')).every(d => d.querySelector('.main-svg'))",
            timeout=60_000,
        )
        charts = {c["id"]: c for c in _page_checks(page, report)}
        ok = [p for p in report.policies if p.run is not None]
        peak = ok[0].row.breakdown.peak("simulated").composition
        roles = [name for name, b in peak.bytes_by_category if b]
        assert "parameters" in roles and "optimizer_state" in roles
        assert charts["memory-roles"]["series"] >= len(roles)
        assert charts["memory-roles"]["bars"] == charts["memory-roles"]["series"] * len(ok)
        _check_pareto(page, report, charts)
        # hover a fixed policy: its name and figures appear
        page.locator("#pareto-front").scroll_into_view_if_needed()
        page.locator("#pareto-front .scatterlayer .trace").nth(1).locator(".points .point").first.hover(
            force=True
        )
        page.wait_for_selector(".hoverlayer .hovertext", timeout=10_000)
        tip = page.locator(".hoverlayer .hovertext").first.text_content()
        assert report.pareto.fixed[0].policy in tip and "latency" in tip, tip
        page.screenshot(path=str(tmp_path / "train.png"), full_page=True)
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(tmp_path / "train.png", ARTIFACTS / "report_training_test_screenshot.png")
        assert errors == [], errors


def test_cli_training_report_with_fusion(tmp_path) -> None:
    out = tmp_path / "t.html"
    r = cli(
        "report", "random:12", "--train", "--optimizer", "sgd", "--policies", "sequential,asap",
        "--fusion", "stream-aware", "--pareto-points", "2", "--time-limit", "0.3", "-o", str(out), "--json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    import json

    result = json.loads(r.stdout)
    assert result["training"] and result["fusion"] == "stream-aware" and result["pareto"]["points"]
    assert all("memory_breakdown" in p["row"] for p in result["policies"])
    text = out.read_text()
    assert 'id="pareto"' in text and 'id="memory-roles"' in text and "Fusion <b>stream-aware" in text


def test_names_from_the_graph_are_shown_as_text_in_a_real_browser(tmp_path) -> None:
    """Node ids and the graph's name are the file's data: no tag or script of theirs reaches the
    page, and a hovered op shows its id as it is written (plotly reads labels as HTML)."""
    import json

    from helpers.hostile import PAYLOADS, rename_node
    from streamplan.ir.serialize import dumps, graph_from_dict

    doc = json.loads(dumps(load_model("seed-example2")))
    hostile = [p for p in PAYLOADS if "<" in p] + ["it's & <ok>"]
    for old, new in zip(["a", "b", "c", "d", "f"], hostile, strict=False):
        doc = rename_node(doc, old, new)
    doc["name"] = "<script>window.PWNED=4</script>"
    graph = graph_from_dict(doc)
    page_text = render_html(report_model(graph, ["sequential"], CTX, pareto_points=0))
    with browser_or_skip() as browser:
        path = tmp_path / "report.html"
        path.write_text(page_text)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: errors.append(r.url) if not r.url.startswith("file:") else None)
        page.goto(path.as_uri())
        page.wait_for_selector("#timeline-sequential .main-svg", timeout=60_000)
        bars = page.locator("#timeline-sequential .barlayer .point path")
        shown = []
        for i in range(bars.count()):
            page.mouse.move(0, 0)
            page.wait_for_selector(".hoverlayer .hovertext", state="detached", timeout=10_000)
            bars.nth(i).hover(force=True)
            page.wait_for_selector(".hoverlayer .hovertext", timeout=10_000)
            tip = page.locator(".hoverlayer .hovertext").first
            shown.append(tip.text_content())
            assert tip.locator("a, img, script, tspan[style*='font-size']").count() == 0
        for name in hostile:
            assert any(t.startswith(name + " ") for t in shown), (name, shown)
        assert page.evaluate("() => window.PWNED") is None
        assert page.evaluate("() => document.querySelectorAll('body img, body a, body iframe').length") == 0
        assert page.title() == "streamplan: <script>window.PWNED=4</script>"
        assert errors == [], errors
