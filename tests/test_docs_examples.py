"""Every ```python block in README.md and docs/*.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCKS = [
    pytest.param(m.group(1), id=f"{path.name}:{path.read_text()[: m.start()].count(chr(10)) + 1}")
    for path in DOCS
    for m in re.finditer(r"```python\n(.*?)```", path.read_text(), re.S)
]


def test_the_docs_have_examples():
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("code", BLOCKS)
def test_example_runs(code, capsys):
    exec(compile(code, "<doc example>", "exec"), {"__name__": "__doc_example__"})
    assert capsys.readouterr().out.strip(), "an example should print what it shows"
