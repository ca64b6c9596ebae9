"""Every notebook in docs/ is kept without outputs in git and runs top to bottom in a real kernel,
showing what it promises: the comparison as a table, the memory curve as an inline image."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "docs").glob("*.ipynb"))


def test_there_is_a_notebook():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_are_kept_without_outputs(path):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, f"{path.name}: strip the outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_run_in_a_kernel(path, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = nbformat.read(path, as_version=4)
    # the kernel is this interpreter, seeing the same sources and the session's capture cache
    src = str(ROOT / "src")
    env_path = os.pathsep.join(p for p in (src, *sys.path, os.environ.get("PYTHONPATH", "")) if p)
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = env_path
    try:
        client = nbclient.NotebookClient(
            nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
        )
        client.execute()
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    html = [
        o["data"]["text/html"]
        for cell in nb.cells
        if cell.cell_type == "code"
        for o in cell.outputs
        if "data" in o and "text/html" in o["data"]
    ]
    errors = [o for cell in nb.cells for o in cell.get("outputs", ()) if o.get("output_type") == "error"]
    assert not errors, errors
    assert any("<table" in h and "asap" in h for h in html), "the comparison shows as a table"
    assert any('<img alt="' in h and "data:image/svg+xml;base64," in h for h in html), "the curve as an image"
