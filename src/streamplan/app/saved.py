"""Saved schedules (``streamplan schedule -o FILE``) checked against the graph they are used on.

A schedule names ops by id and records the fingerprint of the graph it was made for and,
when fused, the record that rebuilds its kernels. The rules, in one place for the command
line and for Python users alike:

- made for another graph and not fitting this one: a ``ScheduleError`` saying so in one line;
- made for another batch (or dtype) of the same ops: used as it is, with a note;
- made under another fusion mode than the one asked for: refused, since a schedule runs the
  kernels it was made for (asking for no fusion takes the schedule's own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamplan.app.analysis import PolicyRun, run_schedule
from streamplan.app.display import Shown
from streamplan.errors import ScheduleError
from streamplan.fusion.plan import fuses, graph_for_schedule
from streamplan.ir.fingerprint import fingerprint_mismatch
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import Fusion, StreamSchedule, structure_problems
from streamplan.schedule.context import ScheduleContext
from streamplan.schedule.verify import schedule_problems


@dataclass(frozen=True)
class LoadedSchedule(Shown):
    """A saved schedule checked against a graph: its run, and the notes the check made (made
    for another batch of the same graph, say)."""

    run: PolicyRun
    notes: tuple[str, ...] = ()
    path: str = ""

    def __str__(self) -> str:
        return "\n".join([f"{self.path}: {self.run}", *(f"note: {n}" for n in self.notes)])

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "run": self.run.to_dict(), "notes": list(self.notes)}


@dataclass(frozen=True)
class ScheduleCheck(Shown):
    """Whether a saved schedule is valid for a graph, and every problem found."""

    path: str
    schedule: StreamSchedule
    problems: tuple[str, ...]

    @property
    def valid(self) -> bool:
        return not self.problems

    def __str__(self) -> str:
        s = self.schedule
        if self.valid:
            return f"valid: {len(s.launch_order)} ops, {s.num_streams} streams, {s.num_events} events"
        return "\n".join([f"invalid schedule {self.path}:", *(f"  {p}" for p in self.problems)])

    def to_dict(self) -> dict[str, Any]:
        return {"valid": self.valid, "problems": list(self.problems)}


def load_saved(
    graph: Graph, path: str, ctx: ScheduleContext, *, fusion: Fusion = Fusion.NONE, any_fusion: bool = False
) -> LoadedSchedule:
    """The saved schedule in ``path``, checked against ``graph`` and run (simulated) on ``ctx``'s
    cost model. ``fusion`` is the mode asked for: a fused mode the schedule was not made with is
    refused, unless ``any_fusion`` (a comparison, where each schedule keeps its own)."""
    s = StreamSchedule.load(path)
    made = s.fusion_mode
    if not any_fusion and fuses(fusion) and made != fusion:
        raise ScheduleError(
            f"the schedule was made with --fusion {made}, not {fusion}",
            where=path,
            hint=f"a saved schedule keeps its own fusion: drop --fusion, or save one with --fusion {fusion}",
        )
    notes: list[str] = []
    mismatch = fingerprint_mismatch(s.meta, graph)
    if mismatch is not None:
        if structure_problems(graph, s):
            raise ScheduleError(
                mismatch, where=path, hint="make a schedule for this model with `streamplan schedule`"
            )
        notes.append(f"{mismatch}; its ops are the same, so it is used as it is")
    return LoadedSchedule(run_schedule(graph, s, ctx), tuple(notes), path)


def check_saved(graph: Graph, path: str) -> ScheduleCheck:
    """Every problem of the saved schedule in ``path`` on ``graph`` (on the kernels its fusion
    record rebuilds, when fused); made for another graph, that in one line rather than a list of
    unknown ops."""
    s = StreamSchedule.load(path)
    mismatch = fingerprint_mismatch(s.meta, graph)
    if mismatch and structure_problems(graph, s) and s.fusion is None:
        problems = [mismatch]
    else:
        problems = schedule_problems(graph_for_schedule(graph, s).graph, s)
    return ScheduleCheck(path, s, tuple(problems))
