"""Run one rank's program for real: a process per rank, ``torch.distributed`` with gloo.

``run_ranks(problem, plan, ...)`` takes a training problem whose inputs and targets hold
the *global* batch (every rank's batch, one after the other). It

1. captures the step on one rank's share of the batch and turns it into the rank
   program of ``plan`` (``streamplan.parallel``), schedules it with ``policy``;
2. computes the reference: one eager step (``torch.optim``, ``foreach=False``) of the
   whole module on the whole batch, from the same optimizer state;
3. starts ``plan.ranks`` processes; each joins a gloo group, takes its slice of the batch
   and its shard of every flat unit (FSDP) or the whole parameters (DDP), runs the
   schedule with the CPU runtime (one thread per stream, its collectives on a process
   group of their own) and counts the storages its kernels allocate;
4. puts the ranks' updated shards back together and compares every parameter with the
   reference.

The loss must average over the batch (a mean), so that the ranks' averaged gradients are
the whole batch's gradient; batch statistics (batch norm) differ per rank, as in any data
parallelism without synchronised statistics.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import pickle
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from streamplan.errors import ExecutionError, ModelSpecError
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.ir.serialize import dumps, loads
from streamplan.ir.training import training_step


@dataclass(frozen=True)
class RankMeasurement:
    """What one rank measured: its loss, step time and the peak its kernels allocated; on one
    stream, also the prediction of that peak (the ``exact`` replay plus measured op scratch)."""

    rank: int
    loss: float
    measured_ms: float
    tracked_peak_bytes: int | None
    predicted_peak_bytes: int | None = None  # the exact replay with this rank's measured op scratch


@dataclass(frozen=True)
class DistributedRun:
    """Ranks run for real against the single-process eager step on the whole batch.

    ``max_abs_error`` is the largest difference of an updated parameter (or gradient,
    without an optimizer) from the reference, ``max_rel_error`` relative to the largest
    reference magnitude; ``matches`` says every parameter is within ``rtol``/``atol``.
    """

    graph: Graph
    schedule: StreamSchedule
    ranks: tuple[RankMeasurement, ...]
    loss: float
    reference_loss: float
    max_abs_error: float
    max_rel_error: float
    matches: bool
    compared: int  # parameters compared

    def lines(self) -> list[str]:
        mib = 1 << 20
        verdict = "equal to eager" if self.matches else "DIFFERENT from eager"
        out = [
            f"ran {self.graph.name} ({self.schedule.policy}, {self.schedule.num_streams} streams) on "
            f"{len(self.ranks)} gloo ranks, against one eager step of the whole batch:",
            f"  loss {self.loss:.6g} (eager {self.reference_loss:.6g}); {self.compared} updated parameters "
            f"{verdict}: max |error| {self.max_abs_error:.3g} (relative {self.max_rel_error:.3g})",
        ]
        for r in self.ranks:
            tracked = "-" if r.tracked_peak_bytes is None else f"{r.tracked_peak_bytes / mib:.3f} MiB"
            pred = (
                ""
                if r.predicted_peak_bytes is None
                else f" (predicted {r.predicted_peak_bytes / mib:.3f} MiB)"
            )
            out.append(f"  rank {r.rank}: {r.measured_ms:.1f} ms, kernels allocated at most {tracked}{pred}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "graph": self.graph.name,
            "policy": self.schedule.policy,
            "ranks": [dataclasses.asdict(r) for r in self.ranks],
            "loss": self.loss,
            "reference_loss": self.reference_loss,
            "max_abs_error": self.max_abs_error,
            "max_rel_error": self.max_rel_error,
            "matches": self.matches,
            "parameters_compared": self.compared,
        }


def split_problem(problem: Any, ranks: int, rank: int) -> Any:
    """``problem`` with rank ``rank``'s share of the global batch (dimension 0 of every input
    and target tensor, split in ``ranks`` equal parts)."""
    from streamplan.frontends.torch_capture import _split_inputs

    def part(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.dim() > 0:
            if x.shape[0] % ranks:
                raise ModelSpecError(
                    f"a global batch of {x.shape[0]} does not split over {ranks} ranks",
                    hint=f"use a batch that is a multiple of {ranks}",
                )
            return x.chunk(ranks, dim=0)[rank].contiguous()
        if isinstance(x, (tuple, list)):
            return type(x)(part(y) for y in x)
        if isinstance(x, dict):
            return {k: part(v) for k, v in x.items()}
        return x

    args, kwargs = _split_inputs(problem.inputs)
    inputs = (tuple(part(a) for a in args), part(kwargs)) if kwargs else tuple(part(a) for a in args)
    return dataclasses.replace(problem, inputs=inputs, targets=tuple(part(t) for t in problem.targets))


def run_ranks(
    problem: Any,
    plan: Any,
    *,
    optimizer: str = "sgd",
    policy: str = "overlap",
    ctx: Any = None,
    seed: int = 0,
    repeat: int = 1,
    chaos: bool = False,
    rtol: float = 1e-4,
    atol: float = 1e-6,
) -> DistributedRun:
    """Run ``problem``'s training step under ``plan`` on ``plan.ranks`` gloo processes and
    compare with eager PyTorch on the whole batch (module docstring)."""
    from streamplan.frontends.training import capture_training
    from streamplan.parallel import ParallelPlan, rank_program
    from streamplan.runtime.training import run_state
    from streamplan.schedule.registry import make_schedule

    plan = ParallelPlan.parse(plan)
    n = plan.ranks
    local = split_problem(problem, n, 0)
    step_graph = capture_training(local, optimizer=optimizer, name=type(problem.module).__name__)
    graph = rank_program(step_graph, plan)
    schedule = make_schedule(graph, policy, ctx)
    state = run_state(step_graph, seed)  # optimizer state of the whole parameters, by value id
    step = training_step(step_graph)
    assert step is not None
    by_fqn = {step_graph.param_names[p]: p for p in step.gradients}
    full_state = {
        (step_graph.param_names[p], slot): state[v] for v, (p, slot) in step.optimizer_state.items()
    }
    reference, reference_loss = _eager_reference(problem, step, step_graph, full_state)
    with tempfile.TemporaryDirectory(prefix="streamplan-ranks-") as tmp:
        job = Path(tmp)
        (job / "graph.json").write_text(dumps(graph))
        (job / "schedule.json").write_text(schedule.dumps())
        # non-persistent buffers (rotary frequencies) are not in the state dict
        tensors = {**problem.module.state_dict(), **dict(problem.module.named_buffers())}
        module_state = {k: v.detach().clone() for k, v in tensors.items()}
        for r in range(n):
            share = split_problem(problem, n, r)
            with open(job / f"rank{r}.in.pt", "wb") as f:
                pickle.dump(
                    {
                        "inputs": _input_tensors(graph, share),
                        "params": _rank_params(graph, module_state, full_state, r, n),
                    },
                    f,
                )
        torch.multiprocessing.start_processes(
            _rank_main,
            args=(n, str(job), repeat, chaos, seed),
            nprocs=n,
            join=True,
            start_method="spawn",
        )
        results = []
        for r in range(n):
            with open(job / f"rank{r}.out.pt", "rb") as f:
                results.append(pickle.load(f))
    updated = _assemble(graph, [res["outputs"] for res in results], by_fqn, n)
    errors = {k: (updated[k] - reference[k]).abs().max().item() for k in reference}
    scale = max((reference[k].abs().max().item() for k in reference), default=1.0) or 1.0
    matches = all(torch.allclose(updated[k], reference[k], rtol=rtol, atol=atol) for k in reference)
    ranks = tuple(
        RankMeasurement(r, float(res["loss"]), float(res["measured_ms"]), res["tracked"], res["predicted"])
        for r, res in enumerate(results)
    )
    return DistributedRun(
        graph=graph,
        schedule=schedule,
        ranks=ranks,
        loss=sum(r.loss for r in ranks) / n,
        reference_loss=reference_loss,
        max_abs_error=max(errors.values(), default=0.0),
        max_rel_error=max(errors.values(), default=0.0) / scale,
        matches=matches,
        compared=len(reference),
    )


def _eager_reference(problem, step, graph, full_state) -> tuple[dict[str, torch.Tensor], float]:
    """One eager step of the whole module on the whole batch: updated parameters (or gradients
    without an optimizer) by ``state_dict`` name, and the loss."""
    from streamplan.frontends.torch_capture import _split_inputs
    from streamplan.runtime.execute import one_thread
    from streamplan.runtime.training import _optimizer

    module = copy.deepcopy(problem.module).train()
    named = dict(module.named_parameters())
    args, kwargs = _split_inputs(problem.inputs)
    with one_thread(), torch.enable_grad():
        module.zero_grad(set_to_none=True)
        loss = problem.compute_loss(module(*args, **kwargs))
        loss.backward()
        fqns = [graph.param_names[p] for p in step.gradients]
        if step.optimizer == "none":
            return {k: named[k].grad.detach().clone() for k in fqns}, loss.item()
        opt = _optimizer(step, [named[k] for k in fqns])
        for (fqn, slot), t in full_state.items():
            opt.state[named[fqn]][slot] = t.clone()
        if step.optimizer == "adam":
            for k in fqns:
                opt.state[named[k]]["step"] = torch.tensor(step.hyperparameters["step"] - 1.0)
        opt.step()
    return {k: named[k].detach().clone() for k in fqns}, loss.item()


def _input_tensors(graph: Graph, problem: Any) -> list[torch.Tensor]:
    from streamplan.runtime.training import run_inputs

    return [t.detach().clone() for t in run_inputs(graph, problem)]


def _rank_params(graph: Graph, module_state, full_state, rank: int, ranks: int) -> dict[str, torch.Tensor]:
    """The rank's leaves: whole buffers and unsharded parameters; for FSDP each unit's shard
    of the flat (padded) parameters and of the optimizer state."""
    par = graph.meta["parallel"]
    step = training_step(graph)
    assert step is not None
    out: dict[str, torch.Tensor] = {}
    for vid, fqn in graph.param_names.items():
        if fqn in module_state:
            out[vid] = module_state[fqn].detach().clone()
    if "units" not in par:  # DDP: whole parameters and state
        for vid, (p, slot) in step.optimizer_state.items():
            out[vid] = full_state[(graph.param_names[p], slot)].clone()
        return out
    slots_of: dict[str, list[tuple[str, str]]] = {}
    for vid, (p, slot) in step.optimizer_state.items():
        slots_of.setdefault(p, []).append((vid, slot))
    for unit in par["units"]:
        flat = _flatten_unit(unit, lambda fqn: module_state[fqn])
        shard = flat.chunk(ranks)[rank].clone()
        out[unit["shard"]] = shard
        for vid, slot in slots_of.get(unit["shard"], ()):
            out[vid] = (
                _flatten_unit(unit, lambda fqn, s=slot: full_state[(fqn, s)]).chunk(ranks)[rank].clone()
            )
    return out


def _flatten_unit(unit: dict, tensor_of) -> torch.Tensor:
    dtype = getattr(torch, unit["dtype"])
    flat = torch.zeros(unit["padded_numel"], dtype=dtype)
    for _, fqn, _shape, offset in unit["params"]:
        t = tensor_of(fqn).detach().reshape(-1).to(dtype)
        flat[offset : offset + t.numel()] = t
    return flat


def _assemble(
    graph: Graph, outputs: list[dict[str, torch.Tensor]], by_fqn, ranks: int
) -> dict[str, torch.Tensor]:
    """Every parameter after the step (by name) from the ranks' outputs."""
    par = graph.meta["parallel"]
    step = training_step(graph)
    assert step is not None
    result = step.updates if step.optimizer != "none" else step.gradients
    out: dict[str, torch.Tensor] = {}
    if "units" not in par:
        for p, v in result.items():
            out[graph.param_names[p]] = outputs[0][v]
        return out
    for unit in par["units"]:
        flat = torch.cat([outputs[r][result[unit["shard"]]].reshape(-1) for r in range(ranks)])
        for _, fqn, shape, offset in unit["params"]:
            count = 1
            for d in shape:
                count *= d
            out[fqn] = flat[offset : offset + count].reshape(shape)
    return out


def _rank_main(rank: int, ranks: int, job: str, repeat: int, chaos: bool, seed: int) -> None:
    """One rank: join the group, run the schedule, write what it computed and measured."""
    import torch.distributed as dist

    from streamplan.runtime.collectives import Communicator, installed
    from streamplan.runtime.execute import run

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    path = Path(job)
    dist.init_process_group("gloo", rank=rank, world_size=ranks, init_method=f"file://{path / 'store'}")
    try:
        graph = loads((path / "graph.json").read_text())
        schedule = StreamSchedule.from_dict(json.loads((path / "schedule.json").read_text()))
        with open(path / f"rank{rank}.in.pt", "rb") as f:
            given = pickle.load(f)
        with installed(Communicator(graph, schedule)):
            result = run(
                graph,
                schedule,
                given["inputs"],
                params=given["params"],
                repeat=repeat,
                chaos=chaos,
                seed=seed,
                track_allocations=True,
            )
            predicted = None
            if schedule.num_streams == 1:  # the kernels' allocations are then exactly predictable
                predicted = _predicted_peak(graph, schedule, given)
        step = training_step(graph)
        assert step is not None
        outputs = dict(zip(graph.outputs, result.outputs, strict=True))
        with open(path / f"rank{rank}.out.pt", "wb") as f:
            pickle.dump(
                {
                    "outputs": {k: v.detach().clone() for k, v in outputs.items()},
                    "loss": float(outputs[step.loss]),
                    "measured_ms": result.measured_ms,
                    "tracked": result.tracked_peak_bytes,
                    "predicted": predicted,
                },
                f,
            )
    except BaseException as e:
        raise ExecutionError(f"rank {rank}: {type(e).__name__}: {e}") from e
    finally:
        dist.destroy_process_group()


def _predicted_peak(graph: Graph, schedule: StreamSchedule, given: dict) -> int:
    """The ``exact`` replay of ``schedule`` with this rank's op scratch, measured by running
    each op once more (collectives too: every rank does the same, in the same order)."""
    from streamplan.cost.measured import MeasuredTable
    from streamplan.memory.allocators import OpMemory, replay
    from streamplan.runtime.interpret import initial_env
    from streamplan.runtime.op_timing import op_scratch_bytes

    env = initial_env(graph, given["inputs"], given["params"])
    scratch = op_scratch_bytes(graph, {k: v.clone() for k, v in env.items()})
    extra = OpMemory.from_table(graph, MeasuredTable("cpu", {}, scratch))
    return replay(graph, schedule, "exact", op_memory=extra).allocated_peak_bytes
