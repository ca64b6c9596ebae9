"""Sweep files: the axes and settings of a sweep in TOML (or YAML, when PyYAML is installed).

.. code-block:: toml

    models = ["inception_v3", "randwire", "nets.py:build"]
    batches = [1, 8, 32]
    policies = ["sequential", "asap", "ios"]
    devices = ["v100", "h100"]
    max_streams = [8]

    [settings]
    memory = true
    time_limit_s = 10

Keys are the axes' plural names (a single value may stand for a one-item list); file
paths among the models are relative to the sweep file's folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from streamplan.errors import FileFormatError, MissingDependencyError, ModelSpecError
from streamplan.sweep.spec import SweepSettings, axis


def load_sweep_file(path: str | Path) -> tuple[dict[str, list[Any]], SweepSettings | None]:
    """The axis values (by axis name, unchecked) and the settings a sweep file gives."""
    p = Path(path)
    data = _parse(p)
    if not isinstance(data, dict):
        raise FileFormatError("a sweep file is a table of axes and [settings]", where=str(p))
    settings = None
    axes: dict[str, list[Any]] = {}
    for key, value in data.items():
        if key == "settings":
            if not isinstance(value, dict):
                raise FileFormatError("[settings] must be a table", where=str(p))
            settings = SweepSettings.from_dict(value, where=f"{p} [settings]")
            continue
        try:
            a = axis(key)
        except ModelSpecError as e:
            raise FileFormatError(e.message, where=str(p), hint=e.hint) from None
        items = value if isinstance(value, list) else [value]
        if a.name == "model":
            items = [_relative_to(p.parent, v) for v in items]
        axes[a.name] = items
    return axes, settings


def _parse(p: Path) -> Any:
    try:
        text = p.read_text()
    except OSError as e:
        raise FileFormatError(f"cannot read the sweep file: {e.strerror or e}", where=str(p)) from None
    except UnicodeDecodeError:
        raise FileFormatError("the sweep file is not UTF-8 text", where=str(p)) from None
    if p.suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise MissingDependencyError(
                "reading a YAML sweep file needs PyYAML",
                where=str(p),
                hint="pip install pyyaml, or write it as TOML",
            ) from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise FileFormatError(f"not valid YAML: {e}", where=str(p)) from None
    if p.suffix != ".toml":
        raise FileFormatError("a sweep file is .toml (or .yaml)", where=str(p))
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise FileFormatError(f"not valid TOML: {e}", where=str(p)) from None


def _relative_to(folder: Path, spec: Any) -> Any:
    """A relative file among the models, as seen from the current folder."""
    if not isinstance(spec, str) or not (spec.endswith(".json") or ".py:" in spec):
        return spec
    path, sep, fn = spec.rpartition(":") if ".py:" in spec else (spec, "", "")
    if os.path.isabs(path) or str(folder) in ("", "."):
        return spec
    return os.path.join(folder, path) + sep + fn
