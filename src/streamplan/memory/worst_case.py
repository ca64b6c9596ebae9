"""Worst-case device peak over every timing a schedule allows (DESIGN §4, figure 2).

At one instant the finished ops F and the started ops D are down-sets of
happens-before with F ⊆ D, and every op in D has all its HB-predecessors in F
(it started after they finished). A storage is live iff its creator is in D and
some HB-maximal user is not in F (outputs: creator in D). Every such (F, D) is
realised by some choice of op durations, so the worst case is the maximum of live
bytes over them.

Method: a witness (the host-order peak state, which is always realisable, and
sweeps of a few random timings) gives a lower bound; on one stream it is exact.
Otherwise CP-SAT maximises over (F, D) exactly; when it stops at its time limit,
or the graph is larger than ``max_exact_ops``, the answer is the proven interval
[best witness, best proven upper bound] with ``exact=False``. Upper bounds: the
solver's bound, a caller's bound (the static arena size is one: every live set is
a set of pairwise co-live storages), and the total of all counted bytes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from streamplan.ir.graph import Graph
from streamplan.memory.liveness import Includes, Liveness, liveness
from streamplan.memory.simulated import sweep_live_bytes
from streamplan.schedule.schedule import StreamSchedule

DEFAULT_TIME_LIMIT_S = 10.0
MAX_EXACT_OPS = 20000
RANDOM_TIMINGS = 4


@dataclass(frozen=True)
class WorstCasePeak:
    """The worst-case device peak: exact, or a proven interval ``[lower, upper]``.

    ``finished``/``running`` describe a timing instant (the witness) at which the
    storages ``live`` hold ``lower_bytes``.
    """

    lower_bytes: int
    upper_bytes: int
    exact: bool
    method: str
    finished: tuple[str, ...]
    running: tuple[str, ...]
    live: tuple[str, ...]
    includes: Includes

    @property
    def peak_bytes(self) -> int:
        """The peak when exact; otherwise the proven lower end."""
        return self.lower_bytes

    def to_dict(self) -> dict:
        return {"lower": self.lower_bytes, "upper": self.upper_bytes, "exact": self.exact,
                "method": self.method, "witness": {"finished": list(self.finished),
                                                   "running": list(self.running),
                                                   "live": list(self.live)},
                "includes": self.includes.describe()}

    def __str__(self) -> str:
        mib = 1 << 20
        if self.exact:
            fig = f"{self.lower_bytes / mib:.3f} MiB (exact, {self.method})"
        else:
            fig = f"[{self.lower_bytes / mib:.3f}, {self.upper_bytes / mib:.3f}] MiB (bounds, {self.method})"
        return (f"worst-case device peak {fig} ({self.includes.describe()}); "
                f"running {', '.join(self.running) or '-'}; live {', '.join(self.live)}")


def live_bytes_at(live: Liveness, finished: set[str], started: set[str]) -> tuple[int, tuple[str, ...]]:
    """Live bytes (and storages) when ``finished`` ops are done and ``started`` ops began."""
    total, names = 0, []
    for life in live.lives:
        if life.creator is None:
            ok = True
        elif life.creator not in started:
            ok = False
        else:
            ok = life.persistent or any(u not in finished for u in life.last_users)
        if ok:
            total += life.nbytes
            names.append(life.storage)
    return total, tuple(names)


def worst_case_peak(graph: Graph, schedule: StreamSchedule, *, include_inputs: bool = False,
                    include_params: bool = False, time_limit_s: float = DEFAULT_TIME_LIMIT_S,
                    max_exact_ops: int = MAX_EXACT_OPS, upper_bound_bytes: int | None = None,
                    live: Liveness | None = None, seed: int = 0) -> WorstCasePeak:
    """The largest live bytes at one instant over every timing ``schedule`` allows."""
    if live is None:
        live = liveness(graph, schedule, include_inputs=include_inputs, include_params=include_params)
    order = list(schedule.launch_order)
    best = _host_order_witness(live, order)
    for k in range(RANDOM_TIMINGS if schedule.num_streams > 1 else 0):
        cand = _random_timing_witness(live, order, random.Random(seed + k))
        if cand[0] > best[0]:
            best = cand
    total = sum(life.nbytes for life in live.lives)
    upper = min(total, upper_bound_bytes) if upper_bound_bytes is not None else total
    if schedule.num_streams <= 1 or best[0] >= upper:
        return _result(live, best, best[0], True,
                       "single-stream" if schedule.num_streams <= 1 else "witness meets bound")
    if len(order) > max_exact_ops:
        return _result(live, best, upper, False, f"witness+bound (over {max_exact_ops} ops)")
    return _solve(live, order, best, upper, time_limit_s)


def _result(live: Liveness, witness, upper: int, exact: bool, method: str) -> WorstCasePeak:
    _, finished, running = witness
    value, names = live_bytes_at(live, set(finished), set(finished) | set(running))
    return WorstCasePeak(value, value if exact else upper, exact, method, tuple(finished),
                         tuple(running), names, live.includes)


def _host_order_witness(live: Liveness, order: list[str]):
    """The host-order peak state: ops before launch i finished, op i running."""
    index = live.hb.launch_index
    delta = [0] * (len(order) + 1)
    base = 0
    for life in live.lives:
        if life.creator is None:
            base += life.nbytes
            continue
        birth = index[life.creator]
        death = len(order) if life.persistent else max(index[u] for u in life.users) + 1
        delta[birth] += life.nbytes
        delta[death] -= life.nbytes
    cur, best, at = base, base, -1
    for i in range(len(order)):
        cur += delta[i]
        if cur > best or at < 0:
            best, at = cur, i
    if at < 0:
        return best, (), ()
    return best, tuple(order[:at]), (order[at],)


def _random_timing_witness(live: Liveness, order: list[str], rng: random.Random):
    """Peak of one random timing (random durations, earliest starts under HB)."""
    start: dict[str, float] = {}
    end: dict[str, float] = {}
    for op in order:
        s = max((end[u] for u in live.hb.direct_preds[op]), default=0.0)
        start[op] = s
        end[op] = s + rng.choice((0.1, 1.0, 10.0)) * rng.random() + 1e-3
    step = sweep_live_bytes(live, order, start, end)
    return step.peak_bytes, step.finished, step.running


def _solve(live: Liveness, order: list[str], witness, upper: int, time_limit_s: float) -> WorstCasePeak:
    from ortools.sat.python import cp_model

    m = cp_model.CpModel()
    f = {op: m.NewBoolVar(f"f_{i}") for i, op in enumerate(order)}
    d = {op: m.NewBoolVar(f"d_{i}") for i, op in enumerate(order)}
    for op in order:
        m.AddImplication(f[op], d[op])
        for u in live.hb.direct_preds[op]:
            m.AddImplication(d[op], f[u])
    terms, base = [], 0
    for k, life in enumerate(live.lives):
        if life.creator is None:
            base += life.nbytes
            continue
        x = m.NewBoolVar(f"live_{k}")
        m.AddImplication(x, d[life.creator])
        if not life.persistent:
            m.AddBoolOr([f[u].Not() for u in life.last_users]).OnlyEnforceIf(x)
        terms.append((life.nbytes, x))
    m.Maximize(sum(w * x for w, x in terms))
    value, finished, running = witness
    fin, run = set(finished), set(running)
    for op in order:
        m.AddHint(f[op], op in fin)
        m.AddHint(d[op], op in fin or op in run)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit_s
    solver.parameters.num_workers = 1
    status = solver.Solve(m)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        got = int(round(solver.ObjectiveValue())) + base
        if got > value:
            fs = tuple(op for op in order if solver.Value(f[op]))
            rs = tuple(op for op in order if solver.Value(d[op]) and not solver.Value(f[op]))
            witness = (got, fs, rs)
        if status == cp_model.OPTIMAL:
            return _result(live, witness, witness[0], True, "cp-sat")
        upper = min(upper, int(solver.BestObjectiveBound() + 1e-6) + base)
    if witness[0] >= upper:
        return _result(live, witness, witness[0], True, "cp-sat")
    return _result(live, witness, upper, False, f"cp-sat stopped at {time_limit_s:g} s")
