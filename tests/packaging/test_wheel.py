"""A plain ``pip install`` works: the wheel, installed with its runtime dependencies only into a
fresh virtual environment (no system site-packages, nothing from the development venv), runs
the command line. Development venvs hide undeclared dependencies (``click`` came in through
other dev packages), so this builds and installs from scratch every time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TORCH_PIN = next(
    line.strip()
    for line in (ROOT / "requirements-dev.txt").read_text().splitlines()
    if line.strip().startswith("torch==")
)


def _run(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(cmd)} -> {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def _clean_env(tmp: Path) -> dict[str, str]:
    """The caller's environment minus anything that would let the dev tree leak in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "STREAMPLAN_"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_INPUT"] = "1"
    env["XDG_CACHE_HOME"] = str(tmp / "xdg-cache")  # the capture cache, not pip's (pip keeps its own)
    env["HOME"] = os.environ.get("HOME", str(tmp))
    return env


@pytest.mark.slow
def test_wheel_installs_and_runs_in_a_clean_venv(tmp_path):
    env = _clean_env(tmp_path)
    dist = tmp_path / "dist"
    build = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(dist), str(ROOT)],
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    # the license is an SPDX string: setuptools no longer warns about a license table
    assert "project.license` as a TOML table is deprecated" not in build.stdout + build.stderr
    (wheel,) = dist.glob("streamplan-*.whl")
    with zipfile.ZipFile(wheel) as z:
        meta = next(z.read(n).decode() for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    assert "License-Expression: Apache-2.0" in meta

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False, clear=True).create(env_dir)
    py = env_dir / "bin" / "python"
    # --no-compile: byte-compiling torch's thousands of files is most of an install and tests nothing here
    _run(
        [str(py), "-m", "pip", "install", "-q", "--no-compile", TORCH_PIN, str(wheel)],
        cwd=tmp_path,
        env=env,
        timeout=900,
    )
    exe = str(env_dir / "bin" / "streamplan")

    where = _run(
        [str(py), "-c", "import streamplan; print(streamplan.__file__)"], cwd=tmp_path, env=env, timeout=60
    )
    assert str(env_dir) in where.stdout, where.stdout  # the installed copy, not the source tree

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    r = _run([exe, "--version"], cwd=tmp_path, env=env, timeout=120)
    assert r.stdout.strip() == f"streamplan {version}"

    r = _run([exe, "zoo"], cwd=tmp_path, env=env, timeout=120)
    assert "inception_v3" in r.stdout and "seed-example2" in r.stdout

    r = _run(
        [exe, "memory", "seed-example2", "--policy", "asap", "--json"], cwd=tmp_path, env=env, timeout=300
    )
    d = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert d["worst_case_peak_bytes"]["upper"] == 4 << 20 and d["host_order_peak_bytes"] == 3 << 20
    assert "Traceback" not in r.stderr
