"""The exact solver: Checkmate's stage formulation as a mixed-integer program, solved by HiGHS.

Stage t runs the t-th op of the reference order, preceded by recomputations of earlier
ops (in reference order). Binaries: ``R[t,i]`` — op i is recomputed in stage t;
``S[t,s]`` — storage s is kept in memory into stage t. Constraints:

* an op that runs in stage t finds each storage it reads kept (``S[t,s]``) or
  recomputed earlier in the stage (``R[t,creator(s)]``);
* a storage can be kept into stage t+1 only if it was in memory during stage t
  (kept, recomputed or written there); graph outputs are kept to the end;
* memory, step by step inside each stage: the storages kept into the stage, plus what
  its earlier steps wrote, minus what they freed, plus what the step writes, within
  the target. ``F[t,s,i]`` (storage s freed after step i) may be 1 only when step i
  runs and reads s, no later step of the stage reads it and it is not kept into the
  next stage (Checkmate's FREE): the step totals are the plan's host-order live bytes;
* no waste: a recomputation is read in its stage or kept, a kept storage is read in
  the stage or kept further (as good, and a smaller search);
* a recomputation comes before the first in-place write to what its op reads.

Objective: the recomputations' total time. When the time limit stops the search,
HiGHS's proven gap ``(objective - bound) / objective`` is reported.

Candidates: ``R[t,i]`` exists for the creators of storages alive into stage t and,
``chain_depth`` levels back, for the creators of what those read — longer chains of
recomputation inside one stage are not offered, so the optimum is over plans whose
chains are at most that deep (``DEFAULT_CHAIN_DEPTH``). ``S[t,s]`` exists while some
candidate could still read s. A plan from a heuristic starts the search.
"""

from __future__ import annotations

import time
from collections import defaultdict

from streamplan.remat.milp import INF, Infeasible, Milp, solve_highs
from streamplan.remat.problem import RematProblem, normalize
from streamplan.remat.solution import SolverResult, heuristic_result

DEFAULT_CHAIN_DEPTH = 2


def solve_exact(
    problem: RematProblem,
    target_bytes: int,
    *,
    time_limit_s: float = 10.0,
    workers: int = 1,
    chain_depth: int = DEFAULT_CHAIN_DEPTH,
    hint: tuple[int, ...] | None = None,
    seed: int = 0,
    **_: object,
) -> SolverResult:
    """The plan of least added time under ``target_bytes``, or the best found before the time
    limit with its proven gap."""
    t0 = time.perf_counter()
    p = problem
    if hint is not None:
        hint = normalize(p, _originals_in_order(p, tuple(hint)), moves=False)
    try:
        model = _Formulation(p, target_bytes, chain_depth, hint)
    except Infeasible as e:
        note = str(e) or "a stage cannot fit whatever is recomputed"
        return SolverResult.none("exact", "infeasible", time.perf_counter() - t0, note=note)
    start = model.values_of(hint) if hint is not None else None  # None if it does not fit the model
    status, x, obj, bound = solve_highs(model.milp, time_limit_s, workers, seed, start)
    elapsed = time.perf_counter() - t0
    if status == "infeasible":
        return SolverResult.none("exact", "infeasible", elapsed, note="proven: no plan of the model fits")
    if x is None:
        return SolverResult.none("exact", "unknown", elapsed, note="no plan found within the time limit")
    seq = model.sequence(x)
    gap = 0.0 if status == "optimal" or obj <= 1e-12 else max(0.0, min(1.0, (obj - bound) / obj))
    return heuristic_result(
        p, normalize(p, seq), "exact", elapsed, target_bytes=target_bytes, status=status, optimality_gap=gap
    )


class _Formulation:
    def __init__(self, p: RematProblem, target_bytes: int, chain_depth: int, hint: tuple[int, ...] | None):
        self.p = p
        self.milp = lp = Milp()
        self.cands = _candidates(p, chain_depth, _recomputations_of(hint) if hint else ())
        unit = _gcd_unit(p)
        cap = (target_bytes - p.resident_bytes) // unit
        if cap < 0:
            raise Infeasible("the resident bytes alone exceed the target")
        self.size = [b // unit for b in p.size]
        self.R: dict[tuple[int, int], int] = {}
        for t, ops in enumerate(self.cands.recompute):
            for i in ops:
                self.R[(t, i)] = lp.var(0, 1, p.cost_ms[i], True)
        self.S: dict[tuple[int, int], int | None] = {}  # None: certainly kept (a graph output)
        for s in range(len(p.storage_ids)):
            for t in range(p.creator[s] + 1, self.cands.need_until[s] + 1):
                self.S[(t, s)] = None if p.persistent[s] else lp.var(0, 1, 0.0, True)
        self._reads()
        self._keeping()
        self._no_waste()
        self.F: dict[tuple[int, int, int], int] = {}
        for t in range(p.n):
            self._stage_memory(t, cap)

    # -- pieces of the model -----------------------------------------------------------
    def _avail(self, t: int, s: int, reader: int) -> tuple[dict[int, float], float]:
        """Terms (and constant) saying storage s is in memory for step ``reader`` of stage t."""
        terms: dict[int, float] = {}
        const = 0.0
        if (t, s) in self.S:
            v = self.S[(t, s)]
            if v is None:
                const = 1.0
            else:
                terms[v] = 1.0
        c = self.p.creator[s]
        if c < reader and (t, c) in self.R:
            terms[self.R[(t, c)]] = 1.0
        return terms, const

    def _reads(self) -> None:
        p, lp = self.p, self.milp
        for t in range(p.n):
            for s in p.reads[t]:
                terms, const = self._avail(t, s, t)
                if const < 1:
                    if not terms:
                        raise Infeasible(f"{p.order[t]} reads what no plan can keep")
                    lp.row(terms, 1 - const, INF)
            for i in self.cands.recompute[t]:
                r = self.R[(t, i)]
                for s in p.reads[i]:
                    terms, const = self._avail(t, s, i)
                    if const >= 1:
                        continue
                    terms[r] = terms.get(r, 0.0) - 1.0
                    lp.row(terms, 0, INF)

    def _keeping(self) -> None:
        p, lp = self.p, self.milp
        for (t, s), keep in self.S.items():
            if keep is None or t == p.creator[s] + 1:
                continue
            terms = {keep: 1.0}
            prev = self.S.get((t - 1, s))
            if prev is not None:
                terms[prev] = -1.0
            c = p.creator[s]
            if (t - 1, c) in self.R:
                terms[self.R[(t - 1, c)]] = -1.0
            lp.row(terms, -INF, 0)

    def _no_waste(self) -> None:
        p, lp = self.p, self.milp
        readers_at: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
        for t in range(p.n):
            for i in self.cands.recompute[t]:
                for u in p.reads[i]:
                    readers_at[(t, u)].append((i, self.R[(t, i)]))
        for (t, i), r in self.R.items():
            if any(w in p.reads[t] for w in p.writes[i]):
                continue
            terms = {r: -1.0}
            for w in p.writes[i]:
                for j, lit in readers_at.get((t, w), ()):
                    if j > i:
                        terms[lit] = terms.get(lit, 0.0) + 1.0
                nxt = self.S.get((t + 1, w))
                if nxt is not None:
                    terms[nxt] = terms.get(nxt, 0.0) + 1.0
            lp.row(terms, 0, INF)
        for (t, s), keep in self.S.items():
            if keep is None or s in p.reads[t]:
                continue
            terms = {keep: -1.0}
            for _, lit in readers_at.get((t, s), ()):
                terms[lit] = terms.get(lit, 0.0) + 1.0
            nxt = self.S.get((t + 1, s))
            if nxt is not None:
                terms[nxt] = terms.get(nxt, 0.0) + 1.0
            lp.row(terms, 0, INF)

    def _stage_memory(self, t: int, cap: int) -> None:
        """Live bytes at every step of stage t (its recomputations in reference order, then its op)."""
        p, lp, size = self.p, self.milp, self.size
        ops = self.cands.recompute[t]
        steps = [*ops, t]
        order = {i: k for k, i in enumerate(steps)}
        readers: dict[int, list[int]] = defaultdict(list)
        for i in steps:
            for u in p.reads[i]:
                readers[u].append(i)
        if any(size[w] > cap for w in p.writes[t]):
            raise Infeasible(f"the outputs of {p.order[t]} alone exceed the target")
        # the running total is a column per step (sparse rows): total = kept + written - freed
        total = lp.var(0, cap)
        terms: dict[int, float] = {total: 1.0}
        const = 0.0
        for s, keep in self._kept_into(t):
            if keep is None:
                const += size[s]
            else:
                terms[keep] = terms.get(keep, 0.0) - size[s]
        lp.row(terms, const, const)
        for k, i in enumerate(steps):
            written = sum(size[w] for w in p.writes[i])
            if i == t:
                lp.row({total: 1.0}, -INF, cap - written)
                break
            r = self.R[(t, i)]
            if written:
                lp.row({total: 1.0, r: float(written)}, -INF, cap)
            nxt_total = lp.var(0, cap)
            terms = {nxt_total: 1.0, total: -1.0}
            if written:
                terms[r] = -float(written)
            for u in p.reads[i]:
                if p.persistent[u] or t in readers[u]:
                    continue  # never freed, or the stage's own op reads it later
                f = lp.var(0, 1)
                self.F[(t, u, i)] = f
                lp.row({f: 1.0, r: -1.0}, -INF, 0)
                for j in readers[u]:
                    if order[j] > k:
                        lp.row({f: 1.0, self.R[(t, j)]: 1.0}, -INF, 1)
                nxt = self.S.get((t + 1, u), -1)
                if nxt is None:
                    lp.row({f: 1.0}, -INF, 0)
                elif nxt >= 0:
                    lp.row({f: 1.0, nxt: 1.0}, -INF, 1)
                terms[f] = terms.get(f, 0.0) + size[u]
            lp.row(terms, 0, 0)
            total = nxt_total

    def _kept_into(self, t: int):
        if not hasattr(self, "_kept_index"):
            index: dict[int, list[tuple[int, int | None]]] = defaultdict(list)
            for (tt, s), keep in self.S.items():
                index[tt].append((s, keep))
            self._kept_index = index
        return self._kept_index.get(t, [])

    # -- solutions -----------------------------------------------------------------------
    def sequence(self, x: list[float]) -> tuple[int, ...]:
        seq: list[int] = []
        for t in range(self.p.n):
            seq.extend(i for i in self.cands.recompute[t] if x[self.R[(t, i)]] > 0.5)
            seq.append(t)
        return tuple(seq)

    def values_of(self, plan: tuple[int, ...]) -> list[float] | None:
        """A full starting solution from a plan whose originals keep the reference order (None
        when the plan does not fit the model's candidates)."""
        p = self.p
        x = [0.0] * len(self.milp.lb)
        stage, seen = -1, set()
        current: dict[int, int] = {}  # storage -> the stage its current copy was written in
        last: dict[tuple[int, int], int] = {}
        for k in plan:
            if k in seen:
                st = stage + 1
                key = (st, k)
                if key not in self.R:
                    return None
                x[self.R[key]] = 1.0
            else:
                seen.add(k)
                stage = st = k
            for s in p.reads[k]:
                last[(s, current[s])] = st
            for s in p.writes[k]:
                current[s] = st
                last.setdefault((s, st), st)
        for (s, born), until in last.items():
            for t in range(born + 1, until + 1):
                v = self.S.get((t, s), -1)
                if v == -1:
                    return None
                if v is not None:
                    x[v] = 1.0
        for (t, u, i), f in self.F.items():  # free whatever may be freed
            ok = x[self.R[(t, i)]] > 0.5 and all(
                x[self.R[(t, j)]] < 0.5 for j in self.cands.recompute[t] if j > i and u in p.reads[j]
            )
            nxt = self.S.get((t + 1, u), -1)
            if nxt is None or (nxt >= 0 and x[nxt] > 0.5):
                ok = False
            x[f] = 1.0 if ok else 0.0
        return x


def _gcd_unit(p: RematProblem) -> int:
    from math import gcd

    g = 0
    for b in p.size:
        g = gcd(g, b)
    return max(1, g)


class _Candidates:
    def __init__(self, recompute: list[list[int]], need_until: list[int]):
        self.recompute = recompute  # stage -> ops that may be recomputed there (ascending)
        self.need_until = need_until  # storage -> last stage some op may read it


def _originals_in_order(p: RematProblem, plan: tuple[int, ...]) -> tuple[int, ...]:
    """The plan with every op's first run back at its place in the reference order (an op the
    plan moved later runs at its place and again where it was moved to): the model's form."""
    out: list[int] = []
    ran: set[int] = set()
    nxt = 0
    for k in plan:
        if k in ran:
            out.append(k)
            continue
        while nxt <= k:
            if nxt not in ran:
                out.append(nxt)
                ran.add(nxt)
            nxt += 1
    return tuple(out)


def _recomputations_of(plan: tuple[int, ...]) -> list[tuple[int, int]]:
    """(stage, op) of every recomputation in a plan whose originals keep the reference order."""
    out, stage, seen = [], -1, set()
    for k in plan:
        if k in seen:
            out.append((stage + 1, k))
        else:
            seen.add(k)
            stage = k
    return out


def _candidates(p: RematProblem, depth: int, extra: list[tuple[int, int]] | tuple = ()) -> _Candidates:
    """Recomputations offered at stage t: the creators of what its op reads, and ``depth - 1``
    levels of the creators of what those read. A recomputation that nothing in its stage
    reads can always wait for the stage that does (no more memory, the same time), so
    these are all a plan needs, up to the chain depth. ``extra`` (stage, op) pairs are
    offered too (a starting plan's, so that the search can start from it)."""
    more: dict[int, set[int]] = defaultdict(set)
    for t, i in extra:
        more[t].add(i)
    n = p.n
    last_read = [max(r) if r else p.creator[s] for s, r in enumerate(p.readers)]
    need_until = [n - 1 if p.persistent[s] else last_read[s] for s in range(len(p.storage_ids))]
    recompute: list[list[int]] = []
    for t in range(n):
        chosen: set[int] = set()
        frontier = {p.creator[s] for s in p.reads[t] if p.droppable[s]}
        for _ in range(max(1, depth)):
            nxt: set[int] = set()
            for i in frontier:
                if i in chosen or i >= t or not p.recomputable[i] or p.deadline[i] < t:
                    continue
                chosen.add(i)
                nxt.update(p.creator[u] for u in p.reads[i] if p.droppable[u])
            frontier = nxt
        ops = sorted(chosen | {i for i in more.get(t, ()) if i < t and p.recomputable[i]})
        recompute.append(ops)
        for i in ops:
            for u in p.reads[i]:
                need_until[u] = max(need_until[u], t)
    return _Candidates(recompute, need_until)


def solve_exact_started(
    problem: RematProblem,
    target_bytes: int,
    *,
    time_limit_s: float = 10.0,
    hint: tuple[int, ...] | None = None,
    **kwargs: object,
) -> SolverResult:
    """``solve_exact`` started from the scalable solver's plan (or ``hint``): the search begins
    at a good plan and the proven gap measures how far that plan, or a better one, can be."""
    if hint is None:
        from streamplan.remat.scalable import solve_scalable

        start = solve_scalable(problem, target_bytes, time_limit_s=max(0.1, time_limit_s / 4))
        hint = start.sequence
    return solve_exact(problem, target_bytes, time_limit_s=time_limit_s, hint=hint, **kwargs)
