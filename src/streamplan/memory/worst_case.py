"""Worst-case device peak over every timing a schedule allows (``docs/memory.md``, figure 2).

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
a set of pairwise co-live storages), the launch-order position bound
(``memory.position_bound``, up to ``POSITION_BOUND_MAX_OPS`` ops), and the total of
all counted bytes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from streamplan.cost.timeline import Timeline
from streamplan.ir.graph import Graph
from streamplan.ir.includes import ACTIVATIONS, Includes
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.liveness import Liveness, StorageLife, liveness
from streamplan.memory.simulated import sweep_arrays
from streamplan.progress import ProgressFn, no_progress

DEFAULT_TIME_LIMIT_S = 10.0
MAX_EXACT_OPS = 20000
RANDOM_TIMINGS = 4
POSITION_BOUND_MAX_OPS = 20000  # the position bound costs O(ops x live storages)
STOPPED_METHOD = "a timing over the limit"  # the method when ``stop_above_bytes`` ended the analysis


@dataclass(frozen=True)
class Witness:
    """A realisable timing instant: ``finished`` ops done, ``running`` ops started, not done."""

    live_bytes: int
    finished: tuple[str, ...]
    running: tuple[str, ...]


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
        return {
            "lower": self.lower_bytes,
            "upper": self.upper_bytes,
            "exact": self.exact,
            "method": self.method,
            "witness": {
                "finished": list(self.finished),
                "running": list(self.running),
                "live": list(self.live),
            },
            "includes": self.includes.describe(),
        }

    def __str__(self) -> str:
        mib = 1 << 20
        if self.exact:
            fig = f"{self.lower_bytes / mib:.3f} MiB (exact, {self.method})"
        else:
            fig = f"[{self.lower_bytes / mib:.3f}, {self.upper_bytes / mib:.3f}] MiB (bounds, {self.method})"
        return (
            f"worst-case device peak {fig} ({self.includes.describe()}); "
            f"running {', '.join(self.running) or '-'}; live {', '.join(self.live)}"
        )


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


def worst_case_peak(
    graph: Graph,
    schedule: StreamSchedule,
    *,
    includes: Includes = ACTIVATIONS,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    max_exact_ops: int = MAX_EXACT_OPS,
    upper_bound_bytes: int | None = None,
    live: Liveness | None = None,
    seed: int = 0,
    progress: ProgressFn = no_progress,
    stop_above_bytes: int | None = None,
    timeline: Timeline | None = None,
) -> WorstCasePeak:
    """The largest live bytes at one instant over every timing ``schedule`` allows.

    ``max_exact_ops`` caps the ops of one independent segment handed to the solver
    (segments lie between *cut* ops, which are ordered with every other op).
    ``progress`` hears of the search: segments solved out of those to solve, and the
    solver's time limit. ``stop_above_bytes``: a caller who only needs to know whether the
    peak fits that many bytes; once a realisable timing exceeds it, the answer is that
    timing's live bytes as the lower end of the interval (no solver runs). ``timeline``: a
    predicted timing of the schedule (``cost.simulate``), one more witness.
    """
    if live is None:
        live = liveness(graph, schedule, includes=includes)
    order = list(schedule.launch_order)
    best = _host_order_witness(live, order)
    preds = _pred_positions(live, order) if schedule.num_streams > 1 else []
    for k in range(RANDOM_TIMINGS if schedule.num_streams > 1 else 0):
        cand = _random_timing_witness(live, order, random.Random(seed + k), preds)
        if cand.live_bytes > best.live_bytes:
            best = cand
    if timeline is not None and schedule.num_streams > 1:
        cand = _timeline_witness(live, order, timeline)
        if cand.live_bytes > best.live_bytes:
            best = cand
    total = sum(life.nbytes for life in live.lives)
    upper = min(total, upper_bound_bytes) if upper_bound_bytes is not None else total
    if stop_above_bytes is not None and schedule.num_streams > 1 and best.live_bytes > stop_above_bytes:
        exact = best.live_bytes >= upper
        return _result(live, best, max(best.live_bytes, upper), exact, STOPPED_METHOD)
    if 1 < schedule.num_streams and len(order) <= POSITION_BOUND_MAX_OPS and best.live_bytes < upper:
        from streamplan.memory.position_bound import position_bound

        inc = live.includes
        upper = min(
            upper,
            position_bound(graph, schedule, includes=inc).peak_bytes,
        )
    if schedule.num_streams <= 1 or best.live_bytes >= upper:
        method = "single-stream" if schedule.num_streams <= 1 else "witness meets bound"
        return _result(live, best, best.live_bytes, True, method)
    return _solve_segments(live, order, best, upper, time_limit_s, max_exact_ops, progress, stop_above_bytes)


def cut_positions(live: Liveness, order: list[str]) -> list[int]:
    """Launch positions of ops ordered (by HB) with every other op.

    Ancestors are counted from the forward vector clock; descendants from a
    backward one (the first op of each stream that must follow).
    """
    hb = live.hb
    n, k = len(order), hb.num_slots
    count = [0] * k
    slot, index, before = hb.slot, hb.index, hb.before
    for op in order:
        count[slot[op]] += 1
    succs: dict[str, list[str]] = {op: [] for op in order}
    for op in order:
        for u in hb.direct_preds[op]:
            succs[u].append(op)
    first_after: dict[str, tuple[int, ...]] = {}  # incl. the op itself
    cuts = []
    none = tuple(c + 1 for c in count)
    total = sum(count) + k  # sum(count[t] - cur[t] + 1) = total - sum(cur)
    for pos in range(n - 1, -1, -1):
        op = order[pos]
        cur = none
        for w in succs[op]:
            cur = tuple(map(min, cur, first_after[w]))
        desc = total - sum(cur)
        if sum(before[op]) + desc == n - 1:
            cuts.append(pos)
        nxt = list(cur)
        nxt[slot[op]] = index[op]
        first_after[op] = tuple(nxt)
    return cuts[::-1]


def _solve_segments(
    live: Liveness,
    order: list[str],
    best: Witness,
    upper: int,
    time_limit_s: float,
    max_exact_ops: int,
    progress: ProgressFn = no_progress,
    stop_above_bytes: int | None = None,
) -> WorstCasePeak:
    """Solve each stretch between cut ops on its own; a cut op alone is a host-order state."""
    import time

    deadline = time.perf_counter() + time_limit_s
    entries = _host_order_entries(live, order)
    cuts = cut_positions(live, order)
    for p in cuts:
        if entries[p] > best.live_bytes:
            best = Witness(live_bytes=entries[p], finished=tuple(order[:p]), running=(order[p],))
    bounds = [(lo + 1, hi) for lo, hi in zip([-1] + cuts, cuts + [len(order)], strict=False) if hi > lo + 1]
    members = _segment_members(live, bounds)
    caps = [sum(live.lives[i].nbytes for i in m) for m in members]
    segs = sorted(zip(caps, range(len(bounds)), strict=True), reverse=True)
    seg_upper, stopped = 0, []
    step = f"worst-case peak: CP-SAT over {_plural(len(segs), 'segment')} (at most {time_limit_s:g} s)"
    for done, (cap, j) in enumerate(segs):
        progress(step, done, len(segs))
        lo, hi = bounds[j]
        if cap <= best.live_bytes:
            break  # no remaining segment can beat the witness
        left = deadline - time.perf_counter()
        if hi - lo > max_exact_ops or left <= 0:
            seg_upper = max(seg_upper, cap)
            stopped.append("size" if hi - lo > max_exact_ops else "time")
            continue
        sol = _solve_segment(live, order, lo, hi, left, best, members[j], stop_above_bytes)
        if sol.value > best.live_bytes:
            best = sol.witness
        if stop_above_bytes is not None and best.live_bytes > stop_above_bytes:
            return _result(live, best, max(best.live_bytes, upper), False, STOPPED_METHOD)
        seg_upper = max(seg_upper, sol.upper_bytes)
        if sol.upper_bytes > sol.value:
            stopped.append("time")
    hi_bound = min(upper, max(best.live_bytes, seg_upper))
    if best.live_bytes >= hi_bound:
        return _result(live, best, best.live_bytes, True, f"cp-sat over {_plural(len(bounds), 'segment')}")
    why = "segment over max_exact_ops" if "size" in stopped else f"cp-sat stopped at {time_limit_s:g} s"
    return _result(live, best, hi_bound, False, why)


def _plural(k: int, noun: str) -> str:
    return f"{k} {noun}" + ("" if k == 1 else "s")


def _host_order_entries(live: Liveness, order: list[str]) -> list[int]:
    """Live bytes at each launch of the host-order replay (after allocs, before frees)."""
    lt = live.lifetimes
    delta = [0] * (len(order) + 2)  # persistent storages "die" past the end, never read
    base = 0
    for life, birth, death in zip(live.lives, lt.birth, lt.death, strict=True):
        if life.creator is None:
            base += life.nbytes
            continue
        delta[birth] += life.nbytes
        delta[death + 1] -= life.nbytes
    out, cur = [], base
    for i in range(len(order)):
        cur += delta[i]
        out.append(cur)
    return out


def _segment_members(live: Liveness, bounds: list[tuple[int, int]]) -> list[list[int]]:
    """For each segment (launch range), the positions in ``live.lives`` of the storages born
    before its end and not dead before it."""
    import bisect

    lt = live.lifetimes
    los = [lo for lo, _ in bounds]
    his = [hi for _, hi in bounds]
    out: list[list[int]] = [[] for _ in bounds]
    for i, (birth, death) in enumerate(zip(lt.birth, lt.death, strict=True)):
        first_seg = bisect.bisect_right(his, birth)  # first segment ending after the birth
        last_seg = bisect.bisect_right(los, death) - 1  # last segment starting at or before the end
        for j in range(first_seg, last_seg + 1):
            out[j].append(i)
    return out


@dataclass(frozen=True, slots=True)
class _SegmentLife:
    """A storage that can be live while a segment runs, as the segment's model sees it.

    ``born_inside``: its creator is in the segment (liveness needs the creator started);
    ``last_inside``: its HB-maximal users in the segment; ``always``: not dead before the
    segment ends whatever the segment's ops do.
    """

    life: StorageLife
    born_inside: bool
    last_inside: tuple[str, ...]
    always: bool


def _segment_lives(live: Liveness, lo: int, hi: int, members: list[int]) -> list[_SegmentLife]:
    """The storages (positions ``members`` in ``live.lives``) that can be live while ops
    ``lo..hi-1`` run."""
    index = live.hb.launch_index
    lt = live.lifetimes
    out = []
    for i in members:
        life, birth, death = live.lives[i], lt.birth[i], lt.death[i]
        if birth >= hi:
            continue
        born_inside = birth >= lo
        if life.creator is None or life.persistent:
            out.append(_SegmentLife(life, born_inside, (), True))
            continue
        if death < lo:
            continue  # dead before the segment starts
        inside = tuple(u for u in life.last_users if lo <= index[u] < hi)
        out.append(_SegmentLife(life, born_inside, inside, death >= hi))
    return out


@dataclass(frozen=True)
class SegmentSolution:
    """CP-SAT's answer for one segment: the best live bytes found, its witness, and the
    proven upper bound (equal to ``value`` when solved to optimality)."""

    value: int
    witness: Witness
    upper_bytes: int


def _solve_segment(
    live: Liveness,
    order: list[str],
    lo: int,
    hi: int,
    time_limit_s: float,
    best: Witness,
    members: list[int] | None = None,
    stop_above_bytes: int | None = None,
) -> SegmentSolution:
    """CP-SAT over one segment (``members``: positions in ``live.lives``, default all); with
    ``stop_above_bytes``, it stops at the first timing found above that."""
    from ortools.sat.python import cp_model

    from streamplan.memory.cp_sat import solve

    ops = order[lo:hi]
    inside = set(ops)
    m = cp_model.CpModel()
    f = {op: m.NewBoolVar(f"f_{i}") for i, op in enumerate(ops)}
    d = {op: m.NewBoolVar(f"d_{i}") for i, op in enumerate(ops)}
    for op in ops:
        m.AddImplication(f[op], d[op])
        for u in live.hb.direct_preds[op]:
            if u in inside:
                m.AddImplication(d[op], f[u])
    terms, base = [], 0
    if members is None:
        members = list(range(len(live.lives)))
    for k, s in enumerate(_segment_lives(live, lo, hi, members)):
        if not s.born_inside and s.always:
            base += s.life.nbytes
            continue
        x = m.NewBoolVar(f"live_{k}")
        if s.born_inside:
            m.AddImplication(x, d[s.life.creator])
        if not s.always:
            m.AddBoolOr([f[u].Not() for u in s.last_inside]).OnlyEnforceIf(x)
        terms.append((s.life.nbytes, x))
    m.Maximize(sum(w * x for w, x in terms))
    fin, run = set(best.finished), set(best.running)
    for op in ops:
        m.AddHint(f[op], op in fin)
        m.AddHint(d[op], op in fin or op in run)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(time_limit_s, 0.01)
    solver.parameters.num_workers = 1
    callback = None
    if stop_above_bytes is not None:
        callback = _stop_above(stop_above_bytes - base)
    status = solve(solver, m, callback)  # Ctrl-C stops the command, not only the search
    cap = base + sum(w for w, _ in terms)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return SegmentSolution(value=0, witness=best, upper_bytes=cap)
    value = int(round(solver.ObjectiveValue())) + base
    fs = tuple(order[:lo]) + tuple(op for op in ops if solver.Value(f[op]))
    rs = tuple(op for op in ops if solver.Value(d[op]) and not solver.Value(f[op]))
    bound = value if status == cp_model.OPTIMAL else min(cap, int(solver.BestObjectiveBound() + 1e-6) + base)
    witness = Witness(live_bytes=value, finished=fs, running=rs)
    return SegmentSolution(value=value, witness=witness, upper_bytes=bound)


def _stop_above(limit: int):
    """A CP-SAT callback that stops the search at the first solution above ``limit``."""
    from ortools.sat.python import cp_model

    class StopAbove(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            if self.ObjectiveValue() > limit:
                self.StopSearch()

    return StopAbove()


def _result(live: Liveness, witness: Witness, upper: int, exact: bool, method: str) -> WorstCasePeak:
    finished, running = witness.finished, witness.running
    value, names = live_bytes_at(live, set(finished), set(finished) | set(running))
    return WorstCasePeak(
        value, value if exact else upper, exact, method, tuple(finished), tuple(running), names, live.includes
    )


def _host_order_witness(live: Liveness, order: list[str]) -> Witness:
    """The host-order peak state: ops before launch i finished, op i running."""
    entries = _host_order_entries(live, order)
    if not entries:
        resident = sum(life.nbytes for life in live.lives if life.creator is None)
        return Witness(live_bytes=resident, finished=(), running=())
    at = max(range(len(entries)), key=entries.__getitem__)  # the first launch at the peak
    return Witness(live_bytes=entries[at], finished=tuple(order[:at]), running=(order[at],))


def _random_timing_witness(
    live: Liveness, order: list[str], rng: random.Random, preds: list[list[int]] | None = None
) -> Witness:
    """Peak of one random timing (random durations, earliest starts under HB)."""
    preds = _pred_positions(live, order) if preds is None else preds
    n = len(order)
    start = [0.0] * n
    end = [0.0] * n
    choice, rand = rng.choice, rng.random
    scales = (0.1, 1.0, 10.0)
    for i in range(n):
        s = max([end[u] for u in preds[i]], default=0.0)
        start[i] = s
        end[i] = s + choice(scales) * rand() + 1e-3
    launch = np.array([live.hb.launch_index[op] for op in order], dtype=np.int64)
    step = sweep_arrays(
        live, order, launch, np.array(start, dtype=np.float64), np.array(end, dtype=np.float64), samples=False
    )
    return Witness(live_bytes=step.peak_bytes, finished=step.finished, running=step.running)


def _timeline_witness(live: Liveness, order: list[str], timeline: Timeline) -> Witness:
    """Peak of a predicted timing (every timing the simulator predicts is one the schedule allows)."""
    span = {s.op: s for s in timeline.spans}
    launch = np.array([live.hb.launch_index[op] for op in order], dtype=np.int64)
    start = np.array([span[op].start_ms for op in order], dtype=np.float64)
    end = np.array([span[op].end_ms for op in order], dtype=np.float64)
    step = sweep_arrays(live, order, launch, start, end, samples=False)
    return Witness(live_bytes=step.peak_bytes, finished=step.finished, running=step.running)


def _pred_positions(live: Liveness, order: list[str]) -> list[list[int]]:
    """For each op of ``order``, the positions in ``order`` of its direct HB predecessors."""
    at = {op: i for i, op in enumerate(order)}
    preds = live.hb.direct_preds
    return [[at[u] for u in preds[op]] for op in order]
