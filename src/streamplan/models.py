"""Resolve a model spec — zoo name, ``random:N[:seed]``, graph JSON, ``file.py:function``,
``model.onnx``, or a hub spec (``hf:NAME``, ``timm:NAME``, ``torchvision:NAME``: ``zoo/hub.py``)
— to a Graph."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamplan.errors import ModelSpecError
from streamplan.frontends.user_code import (
    directory_on_path,
    local_imports,
    running_user_code,
)
from streamplan.ir.graph import Graph
from streamplan.ir.verify import verify
from streamplan.model_files import (
    cast_floats,
    graph_name,
    load_user,
    python_functions_hint,
    python_path,
    rebatch,
)
from streamplan.progress import ProgressFn, no_progress

if TYPE_CHECKING:
    from streamplan.cache import CaptureCache

DTYPES = ("float32", "float16", "bfloat16", "float64")


@dataclass(frozen=True)
class ModelRequest:
    """Everything that decides which graph a model spec becomes (what a command was asked for).

    ``spec`` is a zoo name, ``random:N[:seed]``, a graph ``.json``, ``file.py:function``, ``.onnx``
    or a hub spec (``hf:llama-3-8b``, ``timm:resnet50``, ``torchvision:vit_b_16``);
    ``batch`` rebuilds the example inputs at that batch size; ``dtype`` casts the model;
    ``train`` asks for one training step (forward, loss, backward) instead of inference,
    with ``optimizer``'s update (``none``, ``sgd``, ``momentum``, ``adam``, ``adamw``);
    ``precision`` (``mixed-bf16``...) runs it in mixed precision with fp32 master weights and
    optimizer state; ``attention`` (``flash``, ``math``, ``eager``) chooses the attention kernel
    (``frontends/precision.py``); ``parallel`` (a ``ParallelPlan`` or its text, ``fsdp=8``)
    turns the step into one rank's program, and ``batch`` is then each rank's batch.
    Every field changes the graph, so the capture cache keys on all of them
    (``streamplan.cache``): a field added here is part of the key without further work. (A
    plan is applied to the cached step on every load: it is quick, and the captured step is
    shared by every plan.)
    """

    spec: str
    batch: int | None = None
    dtype: str | None = None
    train: bool = False
    optimizer: str = "none"
    precision: str | None = None
    attention: str | None = None
    parallel: Any = None  # ParallelPlan | None (parsed from text when made)

    def __post_init__(self) -> None:
        if self.parallel is not None:
            from streamplan.parallel.plan import ParallelPlan

            object.__setattr__(self, "parallel", ParallelPlan.parse(self.parallel))
            if not self.train:
                raise ModelSpecError(
                    f"a parallel plan ({self.parallel}) splits a training step over ranks",
                    where=self.spec,
                    hint="ask for the training step as well (--train, or train=True)",
                )

    def fields(self) -> dict[str, Any]:
        """Every field by name (what the capture cache keys on, once ``normalized``)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if out["parallel"] is None:
            del out["parallel"]  # keys of requests without a plan stay as they were
        else:
            out["parallel"] = out["parallel"].describe()
        return out

    def normalized(self) -> ModelRequest:
        """The same request with what is implied spelled out, so that two ways of asking for
        one graph are one request: a zoo model without a batch is at its default batch."""
        if self.batch is not None or not self.captures or ".py:" in self.spec or self.spec.endswith(".onnx"):
            return self
        from streamplan.zoo.registry import ZOO

        entry = ZOO.get(self.spec)
        return dataclasses.replace(self, batch=entry.default_batch) if entry is not None else self

    @property
    def captures(self) -> bool:
        """True when loading runs torch (a capture worth caching); graphs built without torch
        (seed examples, ``random:N``) and graph files are quicker to make than to cache."""
        if self.spec.startswith("random:") or self.spec.endswith(".json"):
            return False
        if ".py:" in self.spec:
            return True
        from streamplan.zoo.hub import is_hub_spec

        if is_hub_spec(self.spec):
            return True
        from streamplan.zoo.registry import ZOO

        entry = ZOO.get(self.spec)
        return entry is not None and entry.kind == "torch"

    def python_file(self) -> Path | None:
        """The file whose content decides the graph (part of the cache key): the ``file.py`` of a
        ``file.py:function`` spec, the ``config.json`` of an ``hf:PATH`` spec."""
        from streamplan.zoo.hub import is_hub_spec, parse_hub_spec

        if is_hub_spec(self.spec):
            return parse_hub_spec(self.spec).config_path
        return Path(self.spec.rpartition(":")[0]) if ".py:" in self.spec else None

    def load(self, *, cache: CaptureCache | None = None, progress: ProgressFn = no_progress) -> Graph:
        """The request's graph, verified; captures go through ``cache`` when one is given."""
        if self.parallel is not None:
            from streamplan.parallel import rank_program

            step = dataclasses.replace(self, parallel=None).load(cache=cache, progress=progress)
            progress(
                f"{self.spec}: one rank's program ({self.parallel.strategy}={self.parallel.ranks})",
                None,
                None,
            )
            return rank_program(step, self.parallel)
        check_request(self.spec, self.batch, self.dtype)
        check_run_options(
            self.spec, train=self.train, dtype=self.dtype, precision=self.precision, attention=self.attention
        )
        if cache is not None and self.captures:
            graph = cache.get(self)
            if graph is not None:
                progress(f"{self.spec}: from the capture cache", None, None)
                return graph
        progress(f"{self.spec}: {'capturing (torch.export)' if self.captures else 'loading'}", None, None)
        graph = load_model(
            self.spec,
            batch=self.batch,
            dtype=self.dtype,
            train=self.train,
            optimizer=self.optimizer,
            precision=self.precision,
            attention=self.attention,
        )
        if cache is not None and self.captures:
            cache.put(self, graph)
        return graph


def check_request(spec: str, batch: int | None, dtype: str | None) -> None:
    """Refuse a request that cannot be loaded as asked, before any work."""
    if dtype is not None and dtype not in DTYPES:
        raise ModelSpecError(f"unsupported dtype {dtype!r}", hint=f"use one of {', '.join(DTYPES)}")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise ModelSpecError(f"batch must be an integer >= 1, got {batch!r}")
    if batch is not None and spec.endswith(".json"):
        raise ModelSpecError(
            "a graph file has fixed shapes: it cannot be rebuilt at another batch size",
            where=spec,
            hint="export the model again at that batch size, or drop the batch size",
        )
    _check_not_a_file(spec)
    if spec.endswith(".py") or spec.endswith(".py:"):
        raise ModelSpecError(
            f"a Python model spec names a function: {spec.rstrip(':')}:FUNCTION",
            hint=python_functions_hint(Path(spec.rstrip(":"))),
        )
    from streamplan.zoo.hub import is_hub_spec, parse_hub_spec

    if is_hub_spec(spec):
        parse_hub_spec(spec)  # a malformed hub spec fails before any import


def check_run_options(
    spec: str, *, train: bool, dtype: str | None, precision: str | None, attention: str | None
) -> None:
    """Refuse a precision or an attention choice that does not apply to ``spec`` as asked."""
    from streamplan.frontends.precision import check_attention, check_precision

    check_precision(precision, train=train, dtype=dtype)
    check_attention(attention)
    if attention is None:
        return
    from streamplan.zoo.hub import is_hub_spec

    torch_spec = ".py:" in spec or is_hub_spec(spec) or _is_torch_zoo(spec)
    if not torch_spec:
        raise ModelSpecError(
            f"--attention {attention} chooses how a torch model's attention runs; {spec} is not captured from torch",
            hint="leave --attention out",
        )
    if attention == "eager" and not spec.startswith("hf:"):
        raise ModelSpecError(
            "--attention eager asks a Hugging Face model for its own attention code: it applies to hf: specs",
            where=spec,
            hint="for other models choose the kernel of scaled_dot_product_attention: flash or math",
        )


def _is_torch_zoo(spec: str) -> bool:
    from streamplan.zoo.registry import ZOO

    entry = ZOO.get(spec)
    return entry is not None and entry.kind == "torch"


def input_files(*specs: str | Path | None) -> tuple[Path, ...]:
    """The files a request reads, which none of its outputs may overwrite: for a
    ``file.py:function`` spec the file and the modules beside it that it imports; for any
    other spec or file given (a graph ``.json``, an ``.onnx``, a ``--schedule`` or
    ``--measured`` table, a sweep file), the file itself when there is one."""
    out: list[Path] = []
    for spec in specs:
        if spec is None or str(spec) == "":
            continue
        text = str(spec)
        if ".py:" in text:
            out += [python_path(text), *local_imports(python_path(text))]
        elif Path(text).exists():
            out.append(Path(text))
    return tuple(dict.fromkeys(out))


FORMS_HINT = "a model is a zoo name (streamplan zoo), random:N, a graph .json, a .onnx or file.py:function"


def _check_not_a_file(spec: str) -> None:
    """A path that is no model spec is named for what it is (a directory, another file), not
    matched against the zoo's names."""
    if spec.endswith((".json", ".onnx", ".py", ".py:")) or ".py:" in spec or spec.startswith("random"):
        return
    from streamplan.zoo.registry import ZOO

    if spec in ZOO or not os.path.lexists(spec):
        return
    what = "a directory" if Path(spec).is_dir() else "a file streamplan cannot read as a model"
    raise ModelSpecError(f"is {what}, not a model", where=spec, hint=FORMS_HINT)


def load_model(
    spec: str,
    *,
    batch: int | None = None,
    dtype: str | None = None,
    train: bool = False,
    optimizer: str = "none",
    precision: str | None = None,
    attention: str | None = None,
) -> Graph:
    """Load ``spec`` as a verified graph with at least one op.

    ``batch`` rebuilds the example inputs at that batch size (not possible for graph
    files: their shapes are fixed); ``dtype`` casts the model and its floating inputs
    (torch models) or sets the element type (graphs). The graph's ``meta["batch"]``
    records the batch it was built at (a graph file's own record, if it has one).
    ``train`` loads one training step with ``optimizer``'s update, ``precision`` and
    ``attention`` say how it runs (see ``ModelRequest``).
    """
    check_request(spec, batch, dtype)
    check_run_options(spec, train=train, dtype=dtype, precision=precision, attention=attention)
    from streamplan.frontends.optimizers import check_optimizer

    check_optimizer(optimizer)
    if optimizer != "none" and not train:
        raise ModelSpecError(
            f"an optimizer update ({optimizer}) belongs to a training step",
            where=spec,
            hint="ask for the training step as well, or leave the optimizer out",
        )
    try:
        with _attention_kernel(attention):
            if train:
                graph = _load_training(
                    spec,
                    batch=batch,
                    dtype=dtype,
                    optimizer=optimizer,
                    precision=precision,
                    attention=attention,
                )
            else:
                graph = _load(spec, batch=batch, dtype=dtype, attention=attention)
    except (MemoryError, RuntimeError) as e:
        if not _out_of_host_memory(e):
            raise
        raise ModelSpecError(
            f"building the model's tensors ran out of memory ({type(e).__name__}: {str(e).splitlines()[0][:200]})",
            where=spec,
            hint="a smaller --batch (a training step builds its real example inputs and labels)",
        ) from None
    if not graph.nodes:
        raise ModelSpecError(
            "the model has no operators: its forward computes nothing on tensors (returning, say, "
            "x.shape[0]), so there is nothing to schedule or analyse",
            where=spec,
            hint="return a tensor computed from the inputs",
        )
    return graph


def _attention_kernel(attention: str | None) -> Any:
    """The SDPA kernel ``attention`` forces while capturing (nothing when None: no torch import)."""
    if attention is None:
        import contextlib

        return contextlib.nullcontext()
    from streamplan.frontends.fullsize import attention_backends

    return attention_backends(attention)


def _load(spec: str, *, batch: int | None, dtype: str | None, attention: str | None = None) -> Graph:
    from streamplan.zoo.hub import is_hub_spec

    if is_hub_spec(spec):  # hf:, timm:, torchvision: — full size on the meta device
        from streamplan.zoo.hub_models import hub_model

        module, inputs, name = hub_model(spec, batch=batch, device="meta", attention=attention)
        return with_batch(_capture(module, inputs, name=name, dtype=dtype), batch or 1)
    if spec.startswith("random:"):
        from streamplan.zoo.random_dag import parse_spec, random_dag

        n, seed = parse_spec(spec)
        return random_dag(n, seed, batch=batch or 1, dtype=dtype or "float32")
    if spec.startswith("random-train:"):
        from streamplan.zoo.random_backward import parse_spec as parse_train_spec
        from streamplan.zoo.random_backward import random_train_dag

        n, seed = parse_train_spec(spec)
        return verify(random_train_dag(n, seed, batch=batch or 1, dtype=dtype or "float32"))
    if spec.endswith(".json"):
        from streamplan.ir.serialize import load

        if not Path(spec).exists():
            raise ModelSpecError(f"graph file {spec!r} does not exist")
        return _of_dtype(verify(load(spec)), dtype, spec)
    if ".py:" in spec:
        return with_batch(_load_python_spec(spec, batch=batch, dtype=dtype), batch)
    if spec.endswith(".onnx"):
        from streamplan.frontends.onnx_import import load_onnx

        return load_onnx(spec, batch=batch, dtype=dtype)
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
    target = batch or entry.default_batch
    # inputs are built small and given to the capture as fakes of the batch asked for: a capture
    # computes nothing, and a large batch must not allocate its real inputs
    module, inputs = entry.load_factory()(1)
    return with_batch(_capture(module, rebatch(inputs, target, fake=True), name=spec, dtype=dtype), target)


def _of_dtype(graph: Graph, dtype: str | None, spec: str) -> Graph:
    """A graph file as it is: asking for the dtype it already has is fine (a sweep always asks for
    one), any other is refused rather than ignored (its shapes and types are fixed)."""
    floating = {v.dtype for v in graph.values.values() if v.dtype in DTYPES}
    if dtype is None or floating <= {dtype}:
        return graph
    raise ModelSpecError(
        f"a graph file has fixed element types ({', '.join(sorted(floating))}): it cannot be cast to {dtype}",
        where=spec,
        hint="export the model again with that dtype, or drop the dtype",
    )


def _out_of_host_memory(e: BaseException) -> bool:
    text = str(e)
    return isinstance(e, MemoryError) or "can't allocate memory" in text or "DefaultCPUAllocator" in text


def with_batch(graph: Graph, batch: int | None) -> Graph:
    """Record the batch a graph was built at (None: the example inputs' own)."""
    if batch is None or graph.meta.get("batch") == batch:
        return graph
    return graph.replace(meta={**graph.meta, "batch": batch})


def _load_training(
    spec: str,
    *,
    batch: int | None,
    dtype: str | None,
    optimizer: str,
    precision: str | None = None,
    attention: str | None = None,
) -> Graph:
    if spec.startswith("random:"):
        from streamplan.zoo.random_dag import parse_spec
        from streamplan.zoo.random_train import random_training_dag

        n, seed = parse_spec(spec)
        return random_training_dag(n, seed, batch=batch or 1, dtype=dtype or "float32", optimizer=optimizer)
    if spec.endswith(".json"):
        from streamplan.ir.training import training_step

        graph = load_model(spec, batch=batch, dtype=dtype)
        step = training_step(graph)
        if step is None:
            raise ModelSpecError(
                f"{spec} holds an inference graph: a training step cannot be derived from a saved graph",
                hint="export the training step of the model instead",
            )
        if step.optimizer != optimizer:
            raise ModelSpecError(
                f"{spec} is a training step with the {step.optimizer!r} update, not {optimizer!r}",
                hint=f"ask for the {step.optimizer!r} update, or export the step again",
            )
        return graph
    from streamplan.training_models import capture_training_step

    graph, batch = capture_training_step(
        spec, batch=batch, dtype=dtype, optimizer=optimizer, precision=precision, attention=attention
    )
    # recorded as for inference: JSON reports it, and a saved schedule's fingerprint names it
    return with_batch(graph, batch)


def _load_python_spec(spec: str, *, batch: int | None, dtype: str | None) -> Graph:
    with directory_on_path(python_path(spec).parent):  # forward may import a sibling lazily
        module, inputs, _ = load_user(spec, batch=batch, fake=True)
        with running_user_code(f"{graph_name(spec)}'s model, while traced,", spec):
            return _capture(module, inputs, name=graph_name(spec), dtype=dtype)


def _capture(module: Any, inputs: Any, *, name: str, dtype: str | None) -> Graph:
    import torch

    from streamplan.frontends.torch_capture import capture

    if dtype is not None and dtype != "float32":
        tdt = getattr(torch, dtype)
        module = module.to(tdt)
        inputs = cast_floats(inputs if isinstance(inputs, (tuple, list)) else (inputs,), tdt)
    return capture(module, inputs, name=name)
