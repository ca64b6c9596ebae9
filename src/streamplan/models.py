"""Resolve a model spec — zoo name, ``random:N[:seed]``, graph JSON, or ``file.py:function`` — to a Graph."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamplan.errors import ModelSpecError
from streamplan.ir.graph import Graph
from streamplan.ir.verify import verify

DTYPES = ("float32", "float16", "bfloat16", "float64")


@dataclass(frozen=True)
class ModelRequest:
    """Everything that decides which graph a model spec becomes (what a command was asked for).

    ``spec`` is a zoo name, ``random:N[:seed]``, a graph ``.json`` or ``file.py:function``;
    ``batch`` rebuilds the example inputs at that batch size; ``dtype`` casts the model.
    Every field changes the graph, so the request is also what a cache of captures is keyed by.
    """

    spec: str
    batch: int | None = None
    dtype: str | None = None

    def load(self) -> Graph:
        """The request's graph, verified."""
        return load_model(self.spec, batch=self.batch, dtype=self.dtype)


def load_model(spec: str, *, batch: int | None = None, dtype: str | None = None) -> Graph:
    """Load ``spec`` as a verified graph.

    ``batch`` rebuilds the example inputs at that batch size; ``dtype`` casts the
    model and its floating inputs (torch models) or sets the element type (graphs).
    """
    if dtype is not None and dtype not in DTYPES:
        raise ModelSpecError(f"unsupported dtype {dtype!r}", hint=f"use one of {', '.join(DTYPES)}")
    if batch is not None and batch < 1:
        raise ModelSpecError(f"batch must be >= 1, got {batch}")
    if spec.startswith("random:"):
        from streamplan.zoo.random_dag import parse_spec, random_dag

        n, seed = parse_spec(spec)
        return random_dag(n, seed, batch=batch or 1, dtype=dtype or "float32")
    if spec.startswith("random-train:"):
        from streamplan.zoo.random_train import parse_spec as parse_train_spec
        from streamplan.zoo.random_train import random_train_dag

        n, seed = parse_train_spec(spec)
        return verify(random_train_dag(n, seed, batch=batch or 1, dtype=dtype or "float32"))
    if spec.endswith(".json"):
        from streamplan.ir.serialize import load

        if not Path(spec).exists():
            raise ModelSpecError(f"graph file {spec!r} does not exist")
        return verify(load(spec))
    if ".py:" in spec:
        return _load_python_spec(spec, batch=batch, dtype=dtype)
    from streamplan.zoo.registry import get_model

    entry = get_model(spec)
    if entry.kind == "graph":
        return entry.load_factory()(batch or entry.default_batch, dtype or "float32")
    if entry.requires:
        if importlib.util.find_spec(entry.requires) is None:
            raise ModelSpecError(
                f"model {spec!r} needs the optional package {entry.requires!r}",
                hint=f"pip install {entry.requires}  (or: pip install 'streamplan[{entry.requires}]')",
            )
    module, inputs = entry.load_factory()(batch or entry.default_batch)
    return _capture(module, inputs, name=spec, dtype=dtype)


def _load_python_spec(spec: str, *, batch: int | None, dtype: str | None) -> Graph:
    module, inputs = load_python_module(spec, batch=batch)
    return _capture(module, inputs, name=Path(spec.rpartition(":")[0]).stem, dtype=dtype)


def load_python_module(spec: str, *, batch: int | None = None) -> tuple[Any, Any]:
    """Import ``path/to/file.py`` and call ``function()`` -> ``(module, example_inputs)``."""
    path_text, _, func_name = spec.rpartition(":")
    path = Path(path_text)
    if not path.is_file():
        raise ModelSpecError(f"python file {path_text!r} does not exist", where=spec)
    mod_name = f"_streamplan_user_{path.stem}"
    try:
        module_spec = importlib.util.spec_from_file_location(mod_name, path)
        assert module_spec is not None and module_spec.loader is not None
        user_mod = importlib.util.module_from_spec(module_spec)
        sys.modules[mod_name] = user_mod
        module_spec.loader.exec_module(user_mod)
    except Exception as e:  # the user's file raised: report it, no traceback
        raise ModelSpecError(f"importing {path_text} raised {type(e).__name__}: {e}", where=spec) from None
    fn = getattr(user_mod, func_name, None)
    if not callable(fn):
        raise ModelSpecError(
            f"{path_text} has no function {func_name!r}",
            where=spec,
            hint="the function must return (module, example_inputs)",
        )
    try:
        result = fn()
    except Exception as e:
        raise ModelSpecError(f"{func_name}() raised {type(e).__name__}: {e}", where=spec) from None
    if not (isinstance(result, tuple) and len(result) == 2):
        raise ModelSpecError(
            f"{func_name}() must return (module, example_inputs), got {type(result).__name__}", where=spec
        )
    module, inputs = result
    if batch is not None:
        inputs = _rebatch(inputs, batch)
    return module, inputs


def _rebatch(inputs: Any, batch: int) -> Any:
    import torch

    def fix(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.dim() > 0:
            shape = (batch, *x.shape[1:])
            if x.is_floating_point():
                return torch.randn(shape, dtype=x.dtype)
            return torch.zeros(shape, dtype=x.dtype)
        if isinstance(x, (list, tuple)):
            return type(x)(fix(y) for y in x)
        return x

    return fix(inputs)


def _capture(module: Any, inputs: Any, *, name: str, dtype: str | None) -> Graph:
    import torch

    from streamplan.frontends.torch_capture import capture

    if dtype is not None and dtype != "float32":
        tdt = getattr(torch, dtype)
        module = module.to(tdt)
        inputs = tuple(
            x.to(tdt) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
            for x in (inputs if isinstance(inputs, (tuple, list)) else (inputs,))
        )
    return capture(module, inputs, name=name)
