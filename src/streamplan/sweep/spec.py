"""What a sweep asks: its axes (lists of values), the jobs they make, and the fixed settings.

A ``Job`` is one combination of axis values, a frozen dataclass whose fields are the
axes in ``AXES`` order; its ``key()`` names its row in the output, so a resumed sweep
knows which rows it already has. A new axis is a new ``Job`` field (with a default, so
old rows still read), an ``Axis`` entry saying how its values are written, and, where
it decides the graph or the scheduling context, a line in ``request()`` or ``context()``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamplan.errors import ModelSpecError
from streamplan.ir.frozen import FrozenDict
from streamplan.ir.includes import ACTIVATIONS, Includes
from streamplan.models import DTYPES, ModelRequest
from streamplan.schedule.context import FUSION_MODES, MemoryBudget, ScheduleContext
from streamplan.schedule.settings import Settings


@dataclass(frozen=True)
class Job:
    """One combination of axis values: one row of the sweep."""

    model: str
    batch: int | None = None  # None: the model's own example batch
    dtype: str = "float32"
    train: bool = False  # one training step (forward, loss, backward, update) instead of inference
    optimizer: str = "none"  # the training step's update ("none" for inference)
    device: str = "v100"
    cuda_graphs: bool = False  # the schedule replayed as one CUDA graph (no launch overhead)
    max_streams: int = 8
    fusion: str = "none"
    policy: str = "sequential"
    budget: str | None = None  # memory budget of a budget-aware policy ("0.8x", "12582912B"); None: none

    def key(self) -> tuple[Any, ...]:
        """The row's identity in the output: the axis values, in ``AXES`` order."""
        return tuple(getattr(self, a.name) for a in AXES)

    def request(self) -> ModelRequest:
        """Which graph the job analyses; jobs with equal requests share one capture."""
        return ModelRequest(
            self.model, batch=self.batch, dtype=self.dtype, train=self.train, optimizer=self.optimizer
        )

    def settings(self, shared: SweepSettings) -> Settings:
        """What the job's analysis runs under: its axes, and the settings every job shares."""
        return Settings(
            device=self.device,
            cuda_graphs=self.cuda_graphs,
            max_streams=self.max_streams,
            fusion=self.fusion,
            includes=shared.includes,
            budget=self.budget,
            time_limit_s=shared.time_limit_s,
            seed=shared.seed,
        )

    def context(self, shared: SweepSettings) -> ScheduleContext:
        """The scheduling context of the job's policy (no progress: it runs in a worker)."""
        return self.settings(shared).context(self.policy)

    def to_dict(self) -> dict[str, Any]:
        return {a.name: getattr(self, a.name) for a in AXES}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> Job:
        """The job a row was written for (axes a row lacks take their defaults)."""
        return Job(**{a.name: d[a.name] for a in AXES if a.name in d})

    def describe(self) -> str:
        batch = "default batch" if self.batch is None else f"batch {self.batch}"
        step = f", training step ({self.optimizer})" if self.train else ""
        policy = self.policy if self.budget is None else f"{self.policy} under {self.budget}"
        extras = "".join(
            (
                ", as CUDA graphs" if self.cuda_graphs else "",
                f", fusion {self.fusion}" if self.fusion != _field_default("fusion") else "",
            )
        )
        return (
            f"{self.model} ({batch}, {self.dtype}{step}) / {policy} on {self.device}, "
            f"{self.max_streams} streams{extras}"
        )

    def normalized(self) -> Job:
        """The job with the axes that do not apply to it at their neutral value: a policy that
        takes no memory budget has none, an inference graph no optimizer. ``SweepSpec.jobs``
        keeps one job per normalized combination."""
        changes: dict[str, Any] = {}
        if self.budget is not None and not budget_aware(self.policy):
            changes["budget"] = None
        if not self.train and self.optimizer != "none":
            changes["optimizer"] = "none"
        return dataclasses.replace(self, **changes) if changes else self


@dataclass(frozen=True)
class SweepSettings:
    """What every job of a sweep shares (not axes): which memory figures, search limits.

    Rows record them; a sweep resumed with other settings is refused, since its rows
    would not be comparable with those already written.
    """

    memory: bool = True
    includes: Includes = ACTIVATIONS
    time_limit_s: float = 10.0
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        """As rows and sweep files write them (the includes as their two flags)."""
        return {
            "memory": self.memory,
            **self.includes.flags(),
            "time_limit_s": self.time_limit_s,
            "seed": self.seed,
        }

    @staticmethod
    def from_dict(d: Mapping[str, Any], *, where: str = "settings") -> SweepSettings:
        names = set(SweepSettings().to_dict())
        unknown = sorted(set(d) - names)
        if unknown:
            raise ModelSpecError(
                f"unknown sweep setting {unknown[0]!r}",
                where=where,
                hint=f"settings are {', '.join(sorted(names))}",
            )
        flags = {k: v for k, v in d.items() if k in ACTIVATIONS.flags()}
        for name, value in {"memory": d.get("memory", True), **flags}.items():
            if not isinstance(value, bool):
                raise ModelSpecError(f"setting {name!r} must be true or false", where=where)
        rest = {k: v for k, v in d.items() if k not in flags}
        s = SweepSettings(**rest, includes=Includes.from_flags(flags))
        if (
            isinstance(s.time_limit_s, bool)
            or not isinstance(s.time_limit_s, (int, float))
            or not 0 < s.time_limit_s < math.inf  # TOML and YAML can spell nan and inf
        ):
            raise ModelSpecError("setting 'time_limit_s' must be a number > 0", where=where)
        if isinstance(s.seed, bool) or not isinstance(s.seed, int):
            raise ModelSpecError("setting 'seed' must be an integer", where=where)
        return s


def _text(name: str) -> Callable[[Any], str]:
    def parse(v: Any) -> str:
        if not isinstance(v, str) or not v.strip():
            raise ModelSpecError(f"{name} must be a non-empty name, got {v!r}")
        return v.strip()

    return parse


def _positive_int(name: str) -> Callable[[Any], int]:
    def parse(v: Any) -> int:
        try:
            n = int(v) if isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool)) else None
        except ValueError:
            n = None
        if n is None or n < 1:
            raise ModelSpecError(f"{name} must be an integer >= 1, got {v!r}")
        return n

    return parse


def _batch(v: Any) -> int | None:
    if isinstance(v, str) and v.strip() == "default":
        return None
    return _positive_int("a batch size")(v)


def _dtype(v: Any) -> str:
    if v not in DTYPES:
        raise ModelSpecError(f"unsupported dtype {v!r}", hint=f"use one of {', '.join(DTYPES)}")
    return v


def _device(v: Any) -> str:
    from streamplan.cost.devices import get_device

    name = _text("a device")(v).lower()
    get_device(name)  # raises naming the profiles
    return name


def _policy(v: Any) -> str:
    from streamplan.schedule.registry import policy_info

    name = _text("a policy")(v)
    policy_info(name)  # raises naming the policies
    return name


def _flag(name: str) -> Callable[[Any], bool]:
    def parse(v: Any) -> bool:
        if isinstance(v, bool):
            return v
        text = str(v).strip().lower()
        if text in ("true", "yes", "on", "1"):
            return True
        if text in ("false", "no", "off", "0"):
            return False
        raise ModelSpecError(f"{name} must be true or false, got {v!r}")

    return parse


def _optimizer(v: Any) -> str:
    from streamplan.ir.training import OPTIMIZERS

    name = _text("an optimizer")(v).lower()
    if name not in OPTIMIZERS:
        raise ModelSpecError(f"unknown optimizer {name!r}", hint=f"use one of {', '.join(OPTIMIZERS)}")
    return name


def _fusion(v: Any) -> str:
    name = _text("a fusion mode")(v)
    if name not in FUSION_MODES:
        raise ModelSpecError(f"unknown fusion mode {name!r}", hint=f"use one of {', '.join(FUSION_MODES)}")
    return name


def _budget(v: Any) -> str | None:
    """A memory budget in one spelling per value (so that ``1.0x`` and ``1x`` are one row):
    a factor of the sequential peak as ``0.8x``, a size as bytes (``12582912B``); ``none``: no budget."""
    if v is None or (isinstance(v, str) and v.strip().lower() == "none"):
        return None
    budget = MemoryBudget.parse(str(v))
    return f"{budget.factor:g}x" if budget.factor is not None else f"{budget.limit_bytes}B"


def budget_aware(policy: str) -> bool:
    """Whether ``policy`` reads the context's memory budget (its registry entry says so)."""
    from streamplan.schedule.registry import policy_info

    return policy_info(policy).budgeted


def _model(v: Any) -> str:
    spec = _text("a model")(v)
    check_model_spec(spec)
    return spec


@dataclass(frozen=True)
class Axis:
    """One axis: the ``Job`` field it sets, its plural (the sweep file's key), how one
    written value becomes a value, and the values a sweep that does not name it takes."""

    name: str
    plural: str
    parse: Callable[[Any], Any] = field(compare=False)
    default: tuple[Any, ...] | None  # None: the axis must be given


AXES: tuple[Axis, ...] = (
    Axis("model", "models", _model, None),
    Axis("batch", "batches", _batch, (None,)),
    Axis("dtype", "dtypes", _dtype, ("float32",)),
    Axis("train", "train", _flag("train"), (False,)),
    Axis("optimizer", "optimizers", _optimizer, ("none",)),
    Axis("device", "devices", _device, ("v100",)),
    Axis("cuda_graphs", "cuda_graphs", _flag("cuda_graphs"), (False,)),
    Axis("max_streams", "max_streams", _positive_int("max_streams"), (8,)),
    Axis("fusion", "fusion", _fusion, ("none",)),
    Axis("policy", "policies", _policy, ("sequential", "asap", "ios")),
    Axis("budget", "budgets", _budget, (None,)),
)
AXIS_NAMES: tuple[str, ...] = tuple(a.name for a in AXES)


def axis(name: str) -> Axis:
    """The axis called ``name`` (singular or plural)."""
    for a in AXES:
        if name in (a.name, a.plural):
            return a
    raise ModelSpecError(f"unknown sweep axis {name!r}", hint=f"axes are {', '.join(a.plural for a in AXES)}")


def check_model_spec(spec: str) -> None:
    """Reject a model spec that cannot load, cheaply (no capture): an unknown zoo name, a bad
    ``random:`` spec, a missing file. A sweep checks every model before its first job."""
    from pathlib import Path

    from streamplan.zoo.hub import is_hub_spec, parse_hub_spec

    if spec.startswith("random:"):
        from streamplan.zoo.random_dag import parse_spec

        parse_spec(spec)
    elif spec.endswith(".json") or ".py:" in spec:
        path = spec.rpartition(":")[0] if ".py:" in spec else spec
        if not Path(path).is_file():
            raise ModelSpecError(f"file {path!r} does not exist", where=spec)
    elif is_hub_spec(spec):
        parse_hub_spec(spec)
    else:
        from streamplan.zoo.registry import get_model

        get_model(spec)


def split_values(texts: Iterable[str]) -> list[str]:
    """Comma-separated values from one or more texts, blanks dropped."""
    return [p.strip() for t in texts for p in str(t).split(",") if p.strip()]


@dataclass(frozen=True)
class SweepSpec:
    """The values of every axis (in ``AXES`` order); ``jobs()`` is their product."""

    values: Mapping[str, tuple[Any, ...]]

    @staticmethod
    def of(**axes: Sequence[Any] | str | Any) -> SweepSpec:
        """A spec from axis values by name (singular or plural): lists, or comma-separated text.

        ``SweepSpec.of(models="inception_v3,randwire", batches=[1, 8], policies=["asap"])``;
        axes not named take their defaults. Every value is checked here.
        """
        given: dict[str, tuple[Any, ...]] = {}
        for name, raw in axes.items():
            a = axis(name)
            if a.name in given:
                raise ModelSpecError(f"axis {a.plural!r} given twice")
            items = split_values([raw]) if isinstance(raw, str) else list(raw if _is_list(raw) else [raw])
            if not items:
                raise ModelSpecError(f"no {a.plural} given")
            given[a.name] = tuple(dict.fromkeys(a.parse(v) for v in items))
        values = {}
        for a in AXES:
            if a.name in given:
                values[a.name] = given[a.name]
            elif a.default is None:
                raise ModelSpecError(f"a sweep needs {a.plural}", hint=f"name at least one of its {a.plural}")
            else:
                values[a.name] = a.default
        _check_applies(values)
        return SweepSpec(FrozenDict(values))

    def jobs(self) -> list[Job]:
        """Every combination, models outermost (so jobs sharing a capture are adjacent); an axis
        that does not apply to a job (a budget to a policy that takes none, an optimizer to
        inference) does not multiply it: such a job appears once, at the axis's neutral value."""
        names = [a.name for a in AXES]
        combos = itertools.product(*(self.values[n] for n in names))
        return list(dict.fromkeys(Job(**dict(zip(names, combo))).normalized() for combo in combos))

    def __len__(self) -> int:
        return len(self.jobs())

    def to_dict(self) -> dict[str, list[Any]]:
        return {a.plural: list(self.values[a.name]) for a in AXES}


def _check_applies(values: Mapping[str, tuple[Any, ...]]) -> None:
    """Refuse budgets without a budget-aware policy, optimizers without training steps: they
    would silently make no rows of their own."""
    if any(b is not None for b in values["budget"]) and not any(budget_aware(p) for p in values["policy"]):
        from streamplan.schedule.registry import POLICIES

        aware = ", ".join(p for p in POLICIES if budget_aware(p))
        raise ModelSpecError(
            "memory budgets only apply to budget-aware policies",
            hint=f"add one of them to the policies: {aware}",
        )
    if any(o != "none" for o in values["optimizer"]) and True not in values["train"]:
        raise ModelSpecError(
            "an optimizer only applies to training steps", hint="sweep training steps (train)"
        )


def _is_list(v: Any) -> bool:
    return isinstance(v, (list, tuple, set, frozenset))


def _field_default(name: str) -> Any:
    """A ``Job`` field's default (its neutral value)."""
    return Job.__dataclass_fields__[name].default
