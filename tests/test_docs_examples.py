"""Every ```python block in README.md and docs/*.md runs as written, saved as a script: each is
written to a file and run as ``__main__`` from it (``runpy.run_path``), as ``python example.py``
runs it, so that what a script meets and ``exec`` does not (worker processes that import the
main script again) is met here too."""

from __future__ import annotations

import re
import runpy
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
def test_example_runs_as_a_saved_script(code, tmp_path, monkeypatch, capsys):
    script = tmp_path / "example.py"
    script.write_text(code)
    monkeypatch.chdir(tmp_path)  # files an example writes land beside it
    runpy.run_path(str(script), run_name="__main__")
    assert capsys.readouterr().out.strip(), "an example should print what it shows"
