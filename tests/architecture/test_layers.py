"""The package layout is the pipeline: imports point downwards, no file imports itself in a circle,
nothing branches on a policy's name outside the registry, and nothing cites tickets or outside files."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
ROOT = SRC / "streamplan"

# Each layer may import the layers listed before it (and itself), never those after it.
LAYERS = [
    {"errors", "progress", "files", "units"},
    {"ir"},
    {"cost", "frontends"},
    {"zoo", "models", "model_files", "training_models", "cache", "parallel"},
    {"schedule"},
    {"fusion"},
    {"memory"},
    {"budget"},
    {"remat"},
    {"runtime"},
    {"codegen"},
    {"app"},
    {"sweep"},
    {"report"},
    {"cli"},
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _modules() -> dict[str, Path]:
    mods = {}
    for p in ROOT.rglob("*.py"):
        rel = ".".join(p.relative_to(SRC).with_suffix("").parts)
        mods[rel.removesuffix(".__init__")] = p
    return mods


def _imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for m, p in mods.items():
        for n in ast.walk(ast.parse(p.read_text())):
            targets: list[str] = []
            if isinstance(n, ast.Import):
                targets = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
                targets = [n.module] + [f"{n.module}.{a.name}" for a in n.names]
            edges[m].update(t for t in targets if t in mods and t != m)
    return edges


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None  # the package facade (streamplan/__init__) is free


def test_imports_point_down_the_pipeline():
    mods = _modules()
    assert {_layer(m) for m in mods} - {None} <= set(RANK), "a new top-level module needs a layer here"
    upward = [
        f"{a} -> {b}"
        for a, bs in _imports(mods).items()
        for b in bs
        if _layer(a) in RANK and _layer(b) in RANK and RANK[_layer(b)] > RANK[_layer(a)]
    ]
    assert not upward, "\n".join(sorted(upward))


def test_no_import_circles_between_files():
    edges = _imports(_modules())
    seen: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(v: str, path: list[str]) -> list[str] | None:
        seen[v] = 1
        for w in sorted(edges.get(v, ())):
            if seen.get(w) == 1:
                return path[path.index(w) :] + [w] if w in path else [v, w]
            if w not in seen and (cycle := visit(w, [*path, w])):
                return cycle
        seen[v] = 2
        return None

    for v in sorted(edges):
        if v not in seen:
            cycle = visit(v, [v])
            assert cycle is None, " -> ".join(cycle)


def _policy_name_tests(tree: ast.AST, names: frozenset[str]) -> list[int]:
    """Lines where a comparison (``==``, ``!=``, ``in``, ``not in``) or a ``match`` case tests
    against a policy's name written out: a string, or a tuple, list or set of strings."""

    def named(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str) and node.value in names
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(named(e) for e in node.elts)
        return False

    lines = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Compare) and any(
            isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in n.ops
        ):
            if named(n.left) or any(named(c) for c in n.comparators):
                lines.append(n.lineno)
        elif isinstance(n, ast.MatchValue) and named(n.value):
            lines.append(n.lineno)
    return lines


def test_no_policy_name_tests_outside_the_registry():
    """Nothing branches on a policy's name outside the registry, whatever the variable is
    called: every name the registry knows, compared in any way, is caught."""
    from streamplan.schedule.registry import POLICIES

    names = frozenset(POLICIES)
    hits = [
        f"{p.relative_to(SRC)}:{line}"
        for p in ROOT.rglob("*.py")
        if p.relative_to(ROOT).as_posix() != "schedule/registry.py"
        for line in _policy_name_tests(ast.parse(p.read_text()), names)
    ]
    assert not hits, hits


def test_the_policy_name_check_sees_every_spelling():
    names = frozenset({"ios", "budget"})
    code = (
        "if p == 'ios': pass\n"
        "if 'budget' not in chosen: pass\n"
        "if x.source in ('a', 'ios'): pass\n"
        "match p:\n    case 'budget': pass\n"
        "if p == 'asap' or kind == 'memory figure': pass\n"
    )
    assert _policy_name_tests(ast.parse(code), names) == [1, 2, 3, 5]


def test_one_place_decides_what_a_fusion_mode_does():
    """Only ``fusion/plan.py`` maps a fusion mode to behaviour; nothing else tests for one."""
    hits = [
        f"{p.relative_to(SRC)}:{i}"
        for p in ROOT.rglob("*.py")
        if p.relative_to(ROOT).as_posix() != "fusion/plan.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"\b(fusion\w*|mode)\s*[!=]=\s*[\"']|[\"'](none|first|stream-aware)[\"']\s*[!=]=", line)
    ]
    assert not hits, hits


def test_no_ticket_numbers_or_outside_design_references():
    bad = re.compile(r"DESIGN §|issue \d+|ticket \d+|#\d{1,4}\b")
    hits = [
        f"{p.relative_to(SRC)}:{i}: {line.strip()}"
        for p in ROOT.rglob("*.py")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if bad.search(line)
    ]
    assert not hits, "\n".join(hits)
