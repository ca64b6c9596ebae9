"""Model specs that are Python files, ``path/to/file.py:function``: importing the file as
Python runs a script (its directory on ``sys.path``, what it prints on stderr), calling the
function, checking what it returns, and its example inputs at another batch size or dtype;
also the name any spec's graph gets (``graph_name``).

``models`` turns what this returns into graphs (inference captures, training steps).
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from streamplan.errors import ModelSpecError
from streamplan.frontends.user_code import USER_MODULE_PREFIX, directory_on_path, running_user_code


def python_functions_hint(path: Path) -> str:
    """Name the file's top-level functions (read, not run) so the user can pick one."""
    form = "the function takes no arguments and returns (module, example_inputs)"
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return form
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
    if not names:
        return form
    return f"{form}; {path.name} defines: {', '.join(f'{path}:{n}' for n in names[:5])}"


def python_path(spec: str) -> Path:
    return Path(spec.rpartition(":")[0])


def load_python_module(spec: str, *, batch: int | None = None) -> tuple[Any, Any]:
    """Import ``path/to/file.py`` and call ``function()`` -> ``(module, example_inputs)``
    (a third item, a loss function, is ignored here: it matters for training only)."""
    module, inputs, _ = load_user(spec, batch=batch)
    return module, inputs


def load_user(
    spec: str, *, batch: int | None = None, fake: bool = False, with_targets: bool = False
) -> tuple[Any, ...]:
    """Import ``path/to/file.py``, call ``function()``: ``(module, example_inputs[, loss_fn[,
    targets]])``; ``batch`` rebuilds the inputs at that batch size (as fakes, for a capture,
    with ``fake``); ``targets`` (a tuple of tensors the loss reads after the output, split with
    the batch when ranks share it) is returned only ``with_targets``."""
    path_text, _, func_name = spec.rpartition(":")
    path = Path(path_text)
    if not path.is_file():
        raise ModelSpecError(f"python file {path_text!r} does not exist", where=spec)
    with directory_on_path(path.parent):  # as Python runs a script: it can import its siblings
        user_mod = _import_user_file(path, spec)
        fn = getattr(user_mod, func_name, None)
        if not callable(fn):
            raise ModelSpecError(
                f"{path_text} has no function {func_name!r}",
                where=spec,
                hint="the function must return (module, example_inputs)",
            )
        try:
            with running_user_code(f"{func_name}()", spec):
                result = fn()
        except Exception as e:
            if isinstance(e, ModelSpecError) and e.where == spec:
                raise
            raise ModelSpecError(f"{func_name}() raised {type(e).__name__}: {e}", where=spec) from None
    if not (isinstance(result, tuple) and len(result) in (2, 3, 4)):
        raise ModelSpecError(
            f"{func_name}() must return (module, example_inputs), (module, example_inputs, loss_fn) or "
            f"(module, example_inputs, loss_fn, targets), got {type(result).__name__}",
            where=spec,
        )
    module, inputs, loss_fn, targets = (*result, None, ())[:4] if len(result) == 2 else (*result, ())[:4]
    if not isinstance(targets, (tuple, list)):
        targets = (targets,)
    if loss_fn is not None and not callable(loss_fn):
        raise ModelSpecError(f"the loss function {func_name}() returned is not callable", where=spec)
    if hasattr(module, "config"):
        from streamplan.frontends.torch_capture import drop_kv_cache

        drop_kv_cache(module)  # captured and run alike: tensors out, no KV cache object
    if batch is not None:
        inputs = rebatch(inputs, batch, fake=fake)
        targets = rebatch(tuple(targets), batch, fake=fake)
    if with_targets:
        return module, inputs, loss_fn, tuple(targets)
    return module, inputs, loss_fn


def _import_user_file(path: Path, spec: str) -> Any:
    mod_name = f"{USER_MODULE_PREFIX}{path.stem}"
    try:
        module_spec = importlib.util.spec_from_file_location(mod_name, path)
        assert module_spec is not None and module_spec.loader is not None
        user_mod = importlib.util.module_from_spec(module_spec)
        sys.modules[mod_name] = user_mod
        with running_user_code(f"importing {path}", spec):
            module_spec.loader.exec_module(user_mod)
    except ModelSpecError:
        raise
    except Exception as e:  # the user's file raised: report it, no traceback
        raise ModelSpecError(f"importing {path} raised {type(e).__name__}: {e}", where=spec) from None
    return user_mod


def rebatch(inputs: Any, batch: int, *, fake: bool = False) -> Any:
    """``inputs`` with every tensor's first dimension set to ``batch``: seeded random data, or
    with ``fake`` tensors that have a shape and no data (what a capture needs: it computes
    nothing, and a batch of a billion must not allocate)."""
    import torch

    mode = contextlib.nullcontext()
    if fake:
        from torch._subclasses.fake_tensor import FakeTensorMode

        mode = FakeTensorMode()

    def fix(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.dim() > 0:
            shape = (batch, *x.shape[1:])
            if fake:
                with mode:
                    return torch.empty(shape, dtype=x.dtype)
            if x.is_floating_point():
                return torch.randn(shape, dtype=x.dtype, device=x.device)
            return torch.zeros(shape, dtype=x.dtype, device=x.device)
        if isinstance(x, (list, tuple)):
            return type(x)(fix(y) for y in x)
        if isinstance(x, dict):
            return {k: fix(v) for k, v in x.items()}
        return x

    return fix(inputs)


def graph_name(spec: str) -> str:
    """The name a model spec's graph gets (what reports, generated class names and a saved
    schedule's record show): a ``file.py:function`` model is named after its function, since
    one file often holds many models; a model file (``.onnx``, graph ``.json``) after the
    file; any other spec (a zoo name) is its own name."""
    if ".py:" in spec:
        return spec.rpartition(":")[2] or Path(spec.rpartition(":")[0]).stem
    if spec.endswith((".onnx", ".json")):
        return Path(spec).stem
    return spec


def cast_floats(x: Any, tdt: Any) -> Any:
    """Every floating tensor in ``x`` (nested tuples, lists and dicts: ``(args, kwargs)``) cast to ``tdt``."""
    import torch

    if isinstance(x, torch.Tensor):
        return x.to(tdt) if x.is_floating_point() else x
    if isinstance(x, (tuple, list)):
        return type(x)(cast_floats(y, tdt) for y in x)
    if isinstance(x, dict):
        return {k: cast_floats(v, tdt) for k, v in x.items()}
    return x
