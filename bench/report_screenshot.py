"""The README's picture of the HTML report: write a report, open it in headless Chromium, screenshot it.

    python bench/report_screenshot.py                       # inception_v3, docs/report.png
    python bench/report_screenshot.py --model squeezenet --out /tmp/r.png
    python bench/report_screenshot.py --model googlenet --train --optimizer adam --section pareto \
        --out docs/report_pareto.png                         # one section: a training step's front

Needs plotly, playwright and Debian's chromium (as the report's browser tests do).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="inception_v3")
    ap.add_argument("--policies", default="sequential,asap,ios")
    ap.add_argument("--device", default="v100")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "report.png"))
    ap.add_argument("--height", type=int, default=1500, help="pixels of the page's top to keep")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--train", action="store_true", help="one training step instead of inference")
    ap.add_argument("--optimizer", default="none")
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--pareto-points", type=int, default=6)
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--section", default=None, help="screenshot this section (its id: pareto, roles...) only")
    args = ap.parse_args(argv)

    from playwright.sync_api import sync_playwright

    from streamplan.app.report import report_model
    from streamplan.models import load_model
    from streamplan.report.html import render_html
    from streamplan.schedule.settings import Settings

    graph = load_model(args.model, batch=args.batch, train=args.train, optimizer=args.optimizer)
    settings = Settings(device=args.device, max_streams=4, time_limit_s=args.time_limit)
    report = report_model(
        graph, args.policies.split(","), settings, model=args.model, pareto_points=args.pareto_points
    )
    with tempfile.TemporaryDirectory() as tmp:
        page_path = Path(tmp) / "report.html"
        page_path.write_text(render_html(report))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, args=ARGS)
            page = browser.new_page(viewport={"width": 1200, "height": args.height})
            page.goto(page_path.as_uri())
            page.wait_for_function(
                "Array.from(document.querySelectorAll('.chart')).every(d => d.querySelector('.main-svg'))"
            )
            if args.section:
                page.locator(f"section#{args.section}").screenshot(path=args.out)
            else:
                page.locator("#timelines").scroll_into_view_if_needed()
                page.evaluate("window.scrollTo(0, 0)")
                page.screenshot(path=args.out, clip={"x": 0, "y": 0, "width": 1200, "height": args.height})
            browser.close()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
