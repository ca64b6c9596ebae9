"""Generated rank programs run as a user would run them: ``Case`` captures a small training step
on one rank's share of the batch, makes the rank program, schedules it (fused, if asked) and
writes the module; ``run_generated_ranks`` runs it in ``RANKS`` gloo processes that import
torch only (``codegen_rank_worker.py``); ``eager_step`` is the reference the runtime's gloo ranks are
held to (one eager step of the whole model on the whole batch)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import torch

from helpers.parallel_models import stack_problem
from streamplan.codegen import generate_module, weight_names
from streamplan.frontends.training import capture_training
from streamplan.fusion import schedule_with_fusion
from streamplan.ir.training import training_step
from streamplan.parallel import rank_program
from streamplan.runtime.distributed import _eager_reference, _rank_params, split_problem
from streamplan.runtime.training import run_inputs, run_state
from streamplan.schedule.context import DEFAULT_CONTEXT
from streamplan.schedule.registry import make_schedule

RANKS = 2
WORKER = Path(__file__).parent / "codegen_rank_worker.py"


class Case:
    """A training problem, its captured step on one rank's batch, the rank program and its schedule."""

    def __init__(self, plan: str, optimizer: str, policy: str = "overlap", fusion: str = "none"):
        self.problem = stack_problem(8)
        local = split_problem(self.problem, RANKS, 0)
        self.step_graph = capture_training(local, optimizer=optimizer, name="stack")
        graph = rank_program(self.step_graph, plan)
        if fusion == "none":
            self.graph, self.schedule = graph, make_schedule(graph, policy)
        else:  # the kernels' graph and its schedule (collectives stay ops of their own)
            planned = schedule_with_fusion(graph, policy, DEFAULT_CONTEXT.replace(fusion=fusion))
            self.graph, self.schedule = planned.graph, planned.schedule
        self.source = generate_module(self.graph, self.schedule)


def whole_optimizer_state(case: Case) -> dict[tuple[str, str], torch.Tensor]:
    """The optimizer state of the whole parameters (the runtime's seeded state), by (name, slot)."""
    step = training_step(case.step_graph)
    return {
        (case.step_graph.param_names[p], slot): t
        for v, t in run_state(case.step_graph).items()
        for p, slot in [step.optimizer_state[v]]
    }


def run_generated_ranks(case: Case, tmp_path: Path, whole: bool) -> list[dict[str, torch.Tensor]]:
    """Each rank's outputs (by value id) from the generated module run in ``RANKS`` gloo
    processes that import torch only (``helpers/codegen_rank_worker.py``) on their share of the batch.
    ``whole``: each rank is given the whole model's weights and optimizer state, by the names
    ``load_weights`` takes, and cuts its FSDP shards itself; else the runtime's weights of each
    rank (``weight_names``)."""
    full_state = whole_optimizer_state(case)
    module_state = {k: v.detach().clone() for k, v in case.problem.module.state_dict().items()}
    names = weight_names(case.graph)
    (tmp_path / "module.py").write_text(case.source)
    for r in range(RANKS):
        if whole:
            weights = module_state | {f"optimizer_state.{p}.{slot}": t for (p, slot), t in full_state.items()}
        else:
            params = _rank_params(case.graph, module_state, full_state, r, RANKS)
            weights = {names[v]: t for v, t in params.items() if v in names}
        given = {"inputs": run_inputs(case.graph, split_problem(case.problem, RANKS, r)), "weights": weights}
        with open(tmp_path / f"rank{r}.in.pt", "wb") as f:
            pickle.dump(given, f)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(r), str(RANKS), str(tmp_path)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(RANKS)
    ]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-3000:]
    outputs = []
    for r in range(RANKS):
        with open(tmp_path / f"rank{r}.out.pt", "rb") as f:
            outputs.append(dict(zip(case.graph.outputs, pickle.load(f), strict=True)))
    return outputs


def eager_step(case: Case) -> tuple[dict[str, torch.Tensor], float]:
    """The updated parameters (by name) and the loss of one eager step of the whole model on
    the whole batch, from the same optimizer state."""
    return _eager_reference(
        case.problem, training_step(case.step_graph), case.step_graph, whole_optimizer_state(case)
    )
