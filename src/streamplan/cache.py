"""A cache of captured graphs, so that a session of commands on one model captures it once.

Capturing a torch model (importing torch, running ``torch.export``) takes seconds; the
graph it gives is plain data. Each capture is stored as graph JSON under
``$STREAMPLAN_CACHE_DIR``, else ``$XDG_CACHE_HOME/streamplan``, else
``~/.cache/streamplan``, named by a hash of everything that decides the graph:

- every field of the ``ModelRequest`` (spec, batch, dtype, and any field added later);
- for ``file.py:function`` specs, the file's resolved path and its content, and the content
  of every module in the file's directory tree that it imports, directly or through one
  another (read from the import statements: a module imported by a name computed at run
  time is not seen; after editing such a one, capture again with the command line's
  ``--no-cache``); for ``hf:PATH`` specs, the ``config.json``'s content;
- the versions of torch, streamplan and the optional package a zoo model needs, and a
  digest of streamplan's own capture code (so an edited checkout never reads stale graphs).

Loading a cached graph imports no torch.
Entries are written atomically; an unreadable or mismatching entry is a miss.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamplan.files import write_output
from streamplan.frontends.user_code import local_imports
from streamplan.ir.graph import Graph

SCHEMA = "streamplan.capture-cache"
SCHEMA_VERSION = 1
ENV_DIR = "STREAMPLAN_CACHE_DIR"
# streamplan's code that decides what a capture gives (relative to the package)
CAPTURE_CODE = ("frontends", "zoo", "ir", "models.py")


def default_cache_dir() -> Path:
    """Where captures are cached: ``$STREAMPLAN_CACHE_DIR``, ``$XDG_CACHE_HOME/streamplan``
    or ``~/.cache/streamplan``."""
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "streamplan"


@dataclass(frozen=True)
class CacheInfo:
    """What the cache holds: where, how many graphs, how many bytes."""

    path: str
    entries: int
    total_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "entries": self.entries, "total_bytes": self.total_bytes}


class CaptureCache:
    """Captured graphs on disk, keyed by a request (``streamplan.models.ModelRequest``)."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else default_cache_dir()

    @property
    def graphs_dir(self) -> Path:
        return self.root / "graphs"

    def key_of(self, request: Any) -> dict[str, Any]:
        """Everything that decides the request's graph, as plain JSON data."""
        key: dict[str, Any] = {"request": request.normalized().fields()}
        py = request.python_file()
        if py is not None:
            key["file"] = {
                "path": str(py.resolve()),
                "sha256": _file_digest(py),
                # the modules beside it that it imports: editing one captures again
                "imports": {str(p): _file_digest(p) for p in local_imports(py)},
            }
        key["versions"] = {
            "streamplan": _dist_version("streamplan"),
            "streamplan_code": _capture_code_digest(),
            "torch": _dist_version("torch"),
        }
        requires = _zoo_requirement(request.spec)
        if requires:
            key["versions"][requires] = _dist_version(requires)
        return key

    def path_of(self, key: dict[str, Any]) -> Path:
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
        return self.graphs_dir / f"{digest}.json"

    def get(self, request: Any) -> Graph | None:
        """The cached graph of ``request``, or None (absent, unreadable, or another key)."""
        from streamplan.ir.serialize import graph_from_dict

        key = self.key_of(request)
        path = self.path_of(key)
        try:
            data = json.loads(path.read_text())
            if data.get("schema") != SCHEMA or data.get("version") != SCHEMA_VERSION or data["key"] != key:
                return None
            return graph_from_dict(data["graph"], source=str(path))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None  # a missing or damaged entry is a miss: capture again and rewrite it

    def put(self, request: Any, graph: Graph) -> None:
        """Store ``graph`` for ``request``; a cache that cannot be written is skipped silently
        (the command still has its graph)."""
        from streamplan.errors import StreamplanError
        from streamplan.ir.serialize import graph_to_dict

        key = self.key_of(request)
        path = self.path_of(key)
        entry = {"schema": SCHEMA, "version": SCHEMA_VERSION, "key": key, "graph": graph_to_dict(graph)}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_output(path, json.dumps(entry), force=True)
        except (OSError, StreamplanError):
            return

    def info(self) -> CacheInfo:
        files = self._entries()
        return CacheInfo(str(self.root), len(files), sum(_size(p) for p in files))

    def clear(self) -> CacheInfo:
        """Remove every cached graph; returns what was removed."""
        removed = self.info()
        for p in self._entries():
            try:
                p.unlink()
            except FileNotFoundError:
                pass
        return removed

    def _entries(self) -> list[Path]:
        return sorted(self.graphs_dir.glob("*.json")) if self.graphs_dir.is_dir() else []


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0


def _file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _dist_version(name: str) -> str | None:
    """An installed distribution's version, read from its metadata (never imports it)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _zoo_requirement(spec: str) -> str | None:
    from streamplan.zoo.hub import PREFIXES, is_hub_spec
    from streamplan.zoo.registry import ZOO

    if is_hub_spec(spec):  # hf:, timm:, torchvision: models change with their package
        return PREFIXES[spec.partition(":")[0]]

    entry = ZOO.get(spec)
    return entry.requires if entry is not None else None


@functools.cache
def _capture_code_digest() -> str:
    """A digest of streamplan's capture code: an edited checkout keeps its version number."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for part in CAPTURE_CODE:
        p = root / part
        for f in sorted(p.rglob("*.py")) if p.is_dir() else [p]:
            h.update(str(f.relative_to(root)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]
