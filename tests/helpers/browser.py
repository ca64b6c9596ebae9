"""A real headless Chromium for the HTML report's tests: Debian's ``chromium`` driven by playwright.

``browser_or_skip()`` yields a launched browser, or skips the test saying what is missing
(``.ci/run`` installs the browser; ``make test`` shows the reason of every skip).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = os.environ.get("STREAMPLAN_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextlib.contextmanager
def browser_or_skip() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium browser at {CHROMIUM} (apt-get install chromium; .ci/run does)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright package is not installed (pip install -r requirements-dev.txt)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()
