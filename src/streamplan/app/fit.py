"""``fit``: does this step fit on device X as PyTorch runs it, and what is the cheapest change
that makes it fit?

The answer is for the default PyTorch execution: one stream, the ops in program order
(forward, loss, backward, optimizer step), every tensor allocated through the CUDA caching
allocator. Its reserved peak (``max_memory_reserved``, the ``torch-cuda`` replay) is split
by role (``fit_memory.DevicePeak``) and checked against the device's usable memory: the
profile's total less the CUDA context (``cost.devices``), or ``Settings.device_memory_bytes``.
When it does not fit, the replay with that capacity says where PyTorch runs out of memory,
and ``fit_changes`` tries the cheapest changes, each with its predicted step time; they are
listed fastest first for the requested batch. When parameters, gradients and optimizer
state alone exceed the device, no change of order, recomputation or batch can help, and the
answer says so (with the sharding arithmetic) instead of searching.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

from streamplan.app.bounded import run_bounded
from streamplan.app.fit_changes import (
    Device,
    FitChange,
    budget_change,
    judge,
    micro_batch_change,
    policy_change,
    remat_change,
)
from streamplan.app.fit_memory import (
    ROLES,
    DevicePeak,
    gradient_bytes,
    resident_bytes,
    size_text,
    unit_of,
)
from streamplan.errors import ModelSpecError
from streamplan.frontends.precision import AttentionUse, attention_in
from streamplan.ir.training import training_step
from streamplan.memory.allocators.report import AllocatorOOM

GIB = 1 << 30
BASELINE = "sequential"


@dataclass(frozen=True)
class FitAnswer:
    """Whether a step fits a device as PyTorch runs it, why, and what would make it fit.

    ``usable_bytes`` is what the step may take; ``peak`` the default execution's device
    memory by role, ``step_ms`` its predicted time; ``oom`` where PyTorch runs out of
    memory (None when it fits); ``resident`` the bytes no order or plan can drop;
    ``changes`` the cheapest changes, fastest first for the requested batch (empty when it
    fits); ``notes`` everything else worth saying, in words.
    """

    model: str
    device: str
    device_summary: str
    memory_bytes: int | None
    usable_bytes: int
    batch: int | None
    training: dict[str, Any] | None
    attention: AttentionUse
    step_ms: float
    peak: DevicePeak
    fits: bool
    oom: AllocatorOOM | None
    resident: dict[str, int]
    changes: tuple[FitChange, ...]
    notes: tuple[str, ...]
    analysis_s: float

    @property
    def reserved_peak_bytes(self) -> int:
        return self.peak.reserved_peak_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "device": self.device,
            "device_summary": self.device_summary,
            "memory_bytes": self.memory_bytes,
            "usable_bytes": self.usable_bytes,
            "batch": self.batch,
            "training": self.training,
            "attention": self.attention.to_dict(),
            "policy": BASELINE,
            "fits": self.fits,
            "step_ms": self.step_ms,
            "peak": self.peak.to_dict(),
            "oom": self.oom.to_dict() if self.oom is not None else None,
            "resident_bytes": dict(self.resident),
            "changes": [c.to_dict() for c in self.changes],
            "notes": list(self.notes),
            "analysis_s": self.analysis_s,
        }

    def lines(self) -> list[str]:
        verdict = "fits" if self.fits else "does NOT fit"
        headroom = self.usable_bytes - self.reserved_peak_bytes
        out = [
            f"{self.model} ({_what(self)}) on {self.device}: {verdict}",
            f"  device: {self.device_summary}; usable {size_text(self.usable_bytes)}"
            + (f" of {size_text(self.memory_bytes)}" if self.memory_bytes else ""),
            "  PyTorch's default execution (one stream, program order) reserves "
            f"{size_text(self.reserved_peak_bytes)} at its peak ({'headroom' if headroom >= 0 else 'short by'} "
            f"{size_text(abs(headroom))}); predicted step {self.step_ms:.1f} ms",
        ]
        unit, scale = unit_of(self.reserved_peak_bytes)
        out.append(f"  peak by role, at {self.peak.peak_op} in the {self.peak.phase} ({unit}):")
        total = max(1, self.reserved_peak_bytes)
        for role, nbytes in self.peak.by_role():
            if role not in ("inputs", "buffers") or nbytes >= scale / 100:
                label = role.replace("_", " ")
                extra = ""
                if role == "optimizer_state" and self.resident.get("master_weights"):
                    master = self.resident["master_weights"]
                    extra = f"  ({size_text(master)} master weights, {size_text(nbytes - master)} moments)"
                out.append(f"    {label:<18} {nbytes / scale:9.2f}  {100 * nbytes / total:5.1f}%{extra}")
        out.append(f"    {'reserved peak':<18} {self.reserved_peak_bytes / scale:9.2f}")
        out += [f"  {n}" for n in self.notes]
        if self.changes:
            same = {c.detail for c in self.changes}
            if len(same) == 1 and all(
                c.fits is False and c.reserved_peak_bytes is None for c in self.changes
            ):
                out.append(f"  no change helps ({', '.join(c.kind for c in self.changes)}): {same.pop()}")
            else:
                out.append("  changes, fastest first for the batch:")
                out += [f"    {c.line()}" for c in self.changes]
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def fit_session(session: Any, *, search_batch: bool = True) -> FitAnswer:
    """The ``FitAnswer`` of ``session``'s graph on its settings' device (``Session.fit``).

    Each change's search runs with at most the settings' time limit; ``search_batch=False``
    skips the micro-batch search (it captures the model again at other batch sizes).
    """
    start = time.perf_counter()
    graph, settings = session.graph, session.settings
    profile = _profile(session)
    capacity = settings.device_memory_bytes or profile.usable_memory_bytes
    if capacity is None:
        raise ModelSpecError(
            f"the {profile.name} profile has no device memory size to fit against",
            hint="choose a GPU profile (--device h100, a100-80gb, l4...) or give the memory (--device-memory-gib)",
        )
    device = Device(capacity, profile.blas_workspace_bytes)
    session.progress(f"fit: {graph.name} on {profile.name}", None, None)
    run = session.schedule(BASELINE)
    graph = run.scheduled_graph(graph)  # the kernels, when the settings fuse
    peak, oom = judge(graph, run, device)
    fits = oom is None
    resident = resident_bytes(graph)
    notes = list(_notes(graph, peak, fits, oom, resident, device))
    changes: tuple[FitChange, ...] = ()
    if not fits:
        changes = _changes(session, peak, resident, device, search_batch, notes)
    step = training_step(graph)
    return FitAnswer(
        model=graph.name,
        device=profile.name,
        device_summary=profile.summary,
        memory_bytes=profile.memory_bytes,
        usable_bytes=capacity,
        batch=graph.meta.get("batch"),
        training=None
        if step is None
        else {"optimizer": step.optimizer, "master_dtype": step.master_dtype, "loss": step.loss_fn},
        attention=attention_in(graph),
        step_ms=run.makespan_ms,
        peak=peak,
        fits=fits,
        oom=oom,
        resident=resident,
        changes=changes,
        notes=tuple(notes),
        analysis_s=time.perf_counter() - start,
    )


def _profile(session: Any) -> Any:
    from streamplan.cost.devices import DeviceProfile, get_device

    device = getattr(session.cost, "device", None)
    if isinstance(device, DeviceProfile):
        return device
    return get_device(session.settings.device)


def _what(answer: FitAnswer) -> str:
    parts = []
    if answer.training is not None:
        t = answer.training
        master = f", {t['master_dtype']} master weights and state" if t["master_dtype"] else ""
        parts.append(f"training step, {t['optimizer']}{master}")
    else:
        parts.append("inference")
    if answer.batch is not None:
        parts.append(f"batch {answer.batch}")
    parts.append(answer.attention.text())
    return "; ".join(parts)


def _static_bytes(resident: dict[str, int]) -> int:
    return (
        resident["parameters"]
        + resident["master_weights"]
        + resident["optimizer_state"]
        + resident["buffers"]
    )


def _notes(graph, peak: DevicePeak, fits: bool, oom, resident: dict[str, int], device: Device) -> list[str]:
    out = []
    roles = dict(peak.by_role())
    big = max(ROLES, key=lambda r: roles.get(r, 0))
    out.append(
        f"what sets it: the peak is in the {peak.phase}, at {peak.peak_op}; its largest part is "
        f"{big.replace('_', ' ')} ({size_text(roles[big])}); parameters and optimizer state hold "
        f"{size_text(_static_bytes(resident))} for the whole step"
    )
    if peak.largest:
        biggest = ", ".join(
            f"{t.storage} {size_text(t.nbytes)} ({t.category.replace('_', ' ')})" for t in peak.largest[:3]
        )
        out.append(f"largest activations live at the peak: {biggest}")
    if fits and peak.reserved_peak_bytes > device.capacity_bytes:
        out.append(
            "it fits only because the caching allocator empties its cache and retries when a request fails "
            "(slower steps: each retry synchronises the device)"
        )
    if oom is not None:
        where = f"at {oom.op}" if oom.op else "before the first op (the parameters and state alone)"
        phase = ""
        step = training_step(graph)
        if step is not None and oom.op is not None:
            phase = f" in the {step.phase(graph, oom.op)}"
        out.append(
            f"PyTorch runs out of memory {where}{phase}: {size_text(oom.requested_bytes)} requested with "
            f"{size_text(oom.reserved_bytes)} of {size_text(oom.capacity_bytes)} reserved"
        )
    return out


def _changes(
    session,
    peak: DevicePeak,
    resident: dict[str, int],
    device: Device,
    search_batch: bool,
    notes: list[str],
) -> tuple[FitChange, ...]:
    static = _static_bytes(resident)
    if static + device.workspace_bytes > device.capacity_bytes:
        notes.append(_sharding_note(peak, static, gradient_bytes(session.graph), device))
        why = (
            f"parameters and optimizer state with the cuBLAS workspace ({size_text(static + device.workspace_bytes)}) "
            f"alone exceed the {size_text(device.capacity_bytes)} usable: no order, recomputation or batch "
            "size changes them"
        )
        return tuple(
            FitChange(kind, summary, False, detail=why)
            for kind, summary in (
                ("memory-order", "one stream, the order of least peak"),
                ("remat", "recompute activations in the backward"),
                ("budget", "the fastest schedule under the memory left"),
                ("micro-batch", "a smaller batch with gradient accumulation"),
            )
        )
    limit = session.settings.time_limit_s
    quiet = type(session)(session.graph, session.settings, source=session.source, _shared=session._shared)
    # what the tensors may take: the device less the workspace and the allocator's rounding (the
    # baseline's allocated peak beyond its tensors); cached free blocks are not subtracted, since the
    # allocator hands them back when a request fails (judge() checks each answer with that retry)
    rounding = max(0, peak.allocated_peak_bytes - peak.tensor_peak_bytes - peak.workspace_bytes)
    budget_bytes = max(0, device.capacity_bytes - device.workspace_bytes - rounding)
    works = [
        (
            "memory-order",
            lambda: policy_change(
                quiet, "memory", "memory-order", "one stream, the order of least peak", device
            ),
        ),
        ("remat", lambda: remat_change(quiet, budget_bytes, device)),
        ("budget", lambda: budget_change(quiet, budget_bytes, device)),
    ]
    changes = []
    for kind, work in works:
        session.progress(f"fit: {kind} (at most {limit:g} s)", None, None)
        done = run_bounded(work, limit)
        if done.result is not None:
            changes.append(
                dataclasses.replace(done.result, search_s=done.elapsed_s, cut_short=done.cut_short)
            )
        else:
            detail = (
                done.error or f"its search did not finish within the time limit ({limit:g} s; --time-limit)"
            )
            changes.append(
                FitChange(
                    kind,
                    _SUMMARIES[kind],
                    None if done.cut_short else False,
                    detail=detail,
                    cut_short=done.cut_short,
                    search_s=done.elapsed_s,
                )
            )
    changes.append(
        _micro_batch(session, peak, device, limit)
        if search_batch
        else FitChange("micro-batch", _SUMMARIES["micro-batch"], None, detail="not searched")
    )
    return tuple(sorted(changes, key=_rank))


_SUMMARIES = {
    "memory-order": "one stream, the order of least peak",
    "remat": "recompute activations in the backward",
    "budget": "the fastest schedule under the memory left",
    "micro-batch": "a smaller batch with gradient accumulation",
}


def _rank(c: FitChange) -> tuple:
    order = 0 if c.fits else 1 if c.fits is None else 2
    return (order, c.batch_ms if c.batch_ms is not None else math.inf)


def _micro_batch(session, peak: DevicePeak, device: Device, limit: float) -> FitChange:
    from streamplan.models import ModelRequest

    source = session.source
    batch = session.graph.meta.get("batch")
    if not isinstance(source, ModelRequest) or not batch:
        return FitChange(
            "micro-batch",
            _SUMMARIES["micro-batch"],
            None,
            detail="the session has no model spec to capture again at another batch size",
        )

    def evaluate(b: int) -> tuple[int, bool, float]:
        from streamplan.cache import CaptureCache

        session.progress(f"fit: capturing at batch {b}", None, None)
        request = dataclasses.replace(source, batch=b)
        graph = request.load(cache=CaptureCache(), progress=session.progress)
        other = type(session)(graph, session.settings, source=request)
        run = other.schedule(BASELINE)
        p, oom = judge(run.scheduled_graph(other.graph), run, device)
        return p.reserved_peak_bytes, oom is None, run.makespan_ms

    return micro_batch_change(
        batch,
        evaluate,
        time_limit_s=limit,
        baseline_reserved_bytes=peak.reserved_peak_bytes,
        capacity_bytes=device.capacity_bytes,
    )


def _sharding_note(peak: DevicePeak, static: int, gradients: int, device: Device) -> str:
    sharded = static + gradients
    rest = peak.reserved_peak_bytes - static - dict(peak.by_role())["gradients"]
    room = device.capacity_bytes - rest
    if room <= 0:
        return (
            "even without parameters, gradients and optimizer state the step's activations exceed the device: "
            "shard the sequence or the layers (tensor or pipeline parallelism)"
        )
    k = math.ceil(sharded / room)
    return (
        f"sharding arithmetic: FSDP/ZeRO-3 over {k} devices leaves each {size_text(sharded / k)} of parameters, "
        f"gradients and optimizer state beside this step's {size_text(rest)} of activations, workspace and "
        "slack (communication buffers not counted)"
    )
