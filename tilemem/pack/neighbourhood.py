"""Large tiles by neighbourhoods: improve a valid allocation by solving parts of it exactly.

A Mk2 tile holds thousands of variables; an exact model of the whole tile is out of reach
(CP-SAT's no-overlap cliques alone hold a million references), but a neighbourhood of it is
not. ``improve_by_neighbourhoods`` lowers an allocation's highest end (or, on a tile that
overflows although its live data fits, brings the overflowed variables into memory) by
large neighbourhood search:

- a *cap* ``C`` a step below the current end (the step an eighth of the gap at first,
  ``SolverParams.ease``); every variable ending above
  ``C`` is *high*;
- a neighbourhood of one high variable ``v``: the variables that conflict with ``v`` (are
  live while it is) and end highest, ``v`` included, up to ``max_free`` of them; everything
  else keeps its address;
- the freed variables placed (``solve_neighbourhood``), every one of them ending at or below
  ``C``; each one's domain is its legal windows minus the addresses the fixed variables rule
  out (their bytes, where they conflict; their memory elements and regions, where they are
  partners). Two solvers: the search's short descents on the freed variables with those
  domains (``tilemem.pack.search.restrict``, the default), or CP-SAT, the freed variables
  kept apart by no-overlap cliques and zone Booleans;
- a placement is accepted only when it passes the guard (``tilemem.pack.guard.self_check``)
  on the whole tile and makes nothing worse: one high variable fewer. A neighbourhood that
  fails is tried again larger (another high variable first); when no high variable is left
  the end is at or below ``C``, and the next cap steps down twice as far; a cap that resists
  every high variable twice comes back halfway up (a step below 4 bytes ends the search).
  On a tile that overflows although its bound fits, the cap is tileMemory until it fits.

The neighbourhoods are chosen from the conflict graph alone (who is live with whom, where
each variable is now), never from an arrangement of the interference graph in time, so the
stage does the same on any presentation of a report.

>>> from tilemem.model import Report
>>> from tilemem.pack.problem import TileProblem
>>> r = Report.from_columns(var_id=range(4), tile=[0] * 4, size=[8, 8, 8, 8],
...     alignment=[4] * 4, offset=[0] * 4, category=["variable"] * 4,
...     eq_class=[0, 1, 2, 3], interference=[[1], [0, 2], [1, 3], [2]])
>>> p = TileProblem.from_report(r, 0)
>>> res = improve_by_neighbourhoods(p, np.array([0, 8, 16, 24]), bound=16, time_limit=5)
>>> int((res.offsets + p.size).max()), res.improved > 0
(16, True)
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..rules import MIN_ALIGNMENT
from .cpsat import greedy_class_cliques, solve_hinted, zone_touch
from .guard import element_bounds, self_check
from .params import DEFAULT_PARAMS, SolverParams
from .problem import TileProblem
from .result import objective
from .search.restrict import fixed_bans, solve_restricted

#: The solvers of a neighbourhood (``solve_neighbourhood``), named where their sizes and
#: seconds are (``SolverParams.neighbourhood``). The search's descents place a few hundred
#: variables in milliseconds (20-50 neighbourhoods of a Mk2 tile a second, their models
#: built included, against CP-SAT's 2-4); CP-SAT settles a hinted model of 120 in a
#: fraction of a second.
SOLVERS = DEFAULT_PARAMS.solvers


@dataclass(frozen=True)
class NeighbourhoodResult:
    """What ``improve_by_neighbourhoods`` did: the best valid ``offsets``, how many
    neighbourhoods it solved and how many improved the allocation, and the seconds spent."""

    offsets: np.ndarray
    solved: int
    improved: int
    seconds: float

    @property
    def note(self) -> str:
        return f"neighbourhoods {self.improved}/{self.solved} improved"


def improve_by_neighbourhoods(p: TileProblem, offsets: np.ndarray, bound: int,
                              time_limit: float, *, seed: int = 0, max_free: int | None = None,
                              fit_only: bool = False, solver: str = "search",
                              params: SolverParams = DEFAULT_PARAMS) -> NeighbourhoodResult:
    """Lower the end (or the overflow) of a valid allocation ``offsets`` of ``p`` within
    ``time_limit`` seconds by neighbourhoods solved exactly (the module docstring), by
    ``solver`` ("search" or "cp-sat"; ``max_free``: default ``params.free(solver)``). The cap
    eases as ``params.ease`` says: each high variable's neighbourhood is tried that many
    times (twice as many while the question is whether the tile fits), grown after each
    failure, before the step down halves.

    ``bound``: a lower bound on the end; the search stops there. On a tile that overflows
    although ``bound`` fits in memory, the first cap is tileMemory (does it fit?); with
    ``fit_only`` the search stops as soon as it fits. The result is never worse than
    ``offsets`` on ``objective`` (overflow, end).
    """
    if solver not in params.solvers:
        raise ValueError(f"solver must be one of {params.solvers}, not {solver!r}")
    max_free = params.free(solver) if max_free is None else max_free
    first_step, tries_per_cap, growth = params.ease
    t0 = time.perf_counter()
    deadline = t0 + time_limit
    rng = np.random.default_rng(seed)
    best = np.asarray(offsets, np.int64).copy()
    tm = p.capacity
    size = p.size.astype(np.int64)
    lower = int(bound)
    solved = improved = 0
    if p.n < 2:
        return NeighbourhoodResult(best, 0, 0, time.perf_counter() - t0)
    end = int((best + size).max())
    fitting = bool(np.any(best >= tm)) and lower <= tm   # the question: does it fit?
    step = max(MIN_ALIGNMENT, (end - lower) // first_step)
    cap = tm if fitting else max(lower, end - step)
    failures: dict[int, int] = {}
    while time.perf_counter() < deadline - 0.01:
        end = int((best + size).max())
        if fitting and not np.any(best >= tm):
            fitting = False          # it fits: now lower the end, if asked to
            if fit_only:
                break
            cap, failures = max(lower, end - step), {}
        if end <= lower:
            break
        ends = best + size
        high = np.flatnonzero(ends > cap)
        if len(high) == 0:     # the end is at or below the cap: the same step down again
            cap, failures = max(lower, end - step), {}
            continue
        # the high variable tried least, highest end first
        tries = np.array([failures.get(int(v), 0) for v in high])
        if tries.min() >= (2 * tries_per_cap if fitting else tries_per_cap):
            if fitting:
                break        # undecided within this budget
            step //= 2       # the cap resists: a smaller step down
            if step < MIN_ALIGNMENT:   # the smallest step down: the least alignment
                break
            cap, failures = max(lower, end - step), {}
            continue
        pool = high[tries == tries.min()]
        v = int(pool[np.argmax(ends[pool])] if tries.min() == 0 else rng.choice(pool))
        grow = growth ** failures.get(v, 0)
        free = neighbourhood_of(p, best, v, int(max_free * grow), rng)
        left = deadline - time.perf_counter()
        if left < 0.02:
            break
        cand = solve_neighbourhood(p, best, free, cap,
                                   min(params.neighbourhood_seconds(solver) * grow, left),
                                   seed=seed + solved, solver=solver, params=params)
        solved += 1
        if cand is not None and objective(p, cand)[:2] <= objective(p, best)[:2] \
                and self_check(p, cand):
            best = cand
            improved += 1
            failures.pop(v, None)
        else:
            failures[v] = failures.get(v, 0) + 1
    return NeighbourhoodResult(best, solved, improved, time.perf_counter() - t0)


def neighbourhood_of(p: TileProblem, offsets: np.ndarray, v: int, max_free: int,
                     rng: np.random.Generator | None = None) -> np.ndarray:
    """The variables freed around ``v`` (sorted local indices): ``v`` and the variables
    conflicting with it that end highest, ``max_free`` in all (ties broken at random); when
    they are fewer, the variables conflicting with those too, and so on outwards (a
    neighbourhood that fails is tried again larger, and one of only ``v``'s conflicts could
    not grow: on a chain, the search's tightest placement of them leaves them no room).

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=range(4), tile=[0] * 4, size=[8] * 4,
    ...     alignment=[4] * 4, offset=[0] * 4, category=["variable"] * 4,
    ...     eq_class=[0, 1, 2, 3], interference=[[1, 2], [0], [0], []])
    >>> p = TileProblem.from_report(r, 0)
    >>> neighbourhood_of(p, np.array([16, 0, 8, 0]), 0, 2).tolist()
    [0, 2]
    """
    chosen = np.array([v], np.int64)
    ring = chosen
    while len(chosen) < max_free and len(ring):
        nb = np.unique(np.concatenate([p.conflicts.conflicting_with(int(x))
                                       for x in ring.tolist()]))
        ring = np.setdiff1d(nb, chosen)
        room = max_free - len(chosen)
        if len(ring) > room:
            ends = (np.asarray(offsets, np.int64) + p.size)[ring]
            noise = (rng.random(len(ring)) if rng is not None else np.zeros(len(ring)))
            ring = ring[np.lexsort((noise, -ends))[:room]]
        chosen = np.union1d(chosen, ring)
    return chosen


def solve_neighbourhood(p: TileProblem, offsets: np.ndarray, free: np.ndarray, cap: int,
                        time_limit: float, seed: int = 0, solver: str = "search",
                        params: SolverParams = DEFAULT_PARAMS) -> np.ndarray | None:
    """New offsets for the variables ``free`` (the rest kept at ``offsets``), every one of
    them ending at or below ``cap``: the whole tile's offsets, or None when ``solver`` found
    none in ``time_limit`` seconds (or proved there is none).

    - "search": the search's short descents on the freed variables, the fixed ones as holes
      in their domains (``tilemem.pack.search.restrict.solve_restricted``), at most
      ``params.descents[0]`` of them (another neighbourhood, or a smaller step, is the
      better use of the time than many more orders): in the exact stage they bring more
      tiles within 1 % of their bound than CP-SAT's neighbourhoods or the descents alone,
      most with about a hundred freed (``params.neighbourhood``).
    - "cp-sat": a satisfaction problem, not an optimisation: CP-SAT stops at its first
      solution, which on the neighbourhoods of a Mk2 tile takes a fraction of a second where
      minimising the freed variables' excess over the cap ran into every time limit.

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=range(3), tile=[0] * 3, size=[8, 8, 8],
    ...     alignment=[4] * 3, offset=[0] * 3, category=["variable"] * 3,
    ...     eq_class=[0, 1, 2], interference=[[1], [0], []])
    >>> p = TileProblem.from_report(r, 0)
    >>> solve_neighbourhood(p, np.array([0, 16, 0]), np.array([1]), 16, 5).tolist()
    [0, 8, 0]
    >>> solve_neighbourhood(p, np.array([0, 16, 0]), np.array([1]), 12, 5) is None
    True
    >>> solve_neighbourhood(p, np.array([0, 16, 0]), np.array([1]), 16, 5, solver="cp-sat").tolist()
    [0, 8, 0]
    """
    if solver == "search":
        return solve_restricted(p, offsets, free, cap, time_limit, seed=seed,
                                max_descents=params.descents[0], params=params)
    if solver != "cp-sat":
        raise ValueError(f"solver must be one of {params.solvers}, not {solver!r}")
    return _solve_by_cpsat(p, offsets, free, cap, time_limit, seed)


def _solve_by_cpsat(p: TileProblem, offsets: np.ndarray, free: np.ndarray, cap: int,
                    time_limit: float, seed: int) -> np.ndarray | None:
    """``solve_neighbourhood`` by CP-SAT."""
    from ortools.sat.python import cp_model

    off = np.asarray(offsets, np.int64)
    free = np.unique(np.asarray(free, np.int64))
    n = p.n
    is_free = np.zeros(n, bool)
    is_free[free] = True
    s1 = np.maximum(p.size, 1).astype(np.int64)   # the guard's reading of a zero size
    size = p.size.astype(np.int64)
    tm, ils = p.capacity, p.target.interleaved_memory_start
    bounds = element_bounds(p)
    model = cp_model.CpModel()
    m = len(free)
    adj = np.zeros((m, m), np.bool_)
    ban_ptr, ban_lo, ban_hi = fixed_bans(p, off, free)
    ks = []
    hinted = np.zeros(m, bool)
    for a, i in enumerate(free.tolist()):
        nb = p.conflicts.conflicting_with(i)
        adj[a, np.searchsorted(free, nb[is_free[nb]])] = True
        e0, e1 = ban_ptr[a], ban_ptr[a + 1]
        banned = np.stack([ban_lo[e0:e1], ban_hi[e0:e1]], axis=1)
        allowed = _subtract(_windows(p, i, s1[i], size[i], cap), banned)
        al = int(p.align[i])
        dom = [(-(-x // al), y // al) for x, y in allowed]
        dom = [[x, y] for x, y in dom if x <= y]
        if not dom:
            return None      # no place for it below the cap beside the fixed variables
        k = model.new_int_var_from_domain(cp_model.Domain.from_intervals(dom), f"k{i}")
        ks.append(k)
        # hinted only where its present place is in its domain: a freed variable above
        # the cap is not, and a hint outside the domain can make CP-SAT's presolve raise
        # (OR-Tools 9.15, ``IndexError: absl::btree_map::at`` on zero-size variables)
        here = int(off[i] // al)
        hinted[a] = off[i] % al == 0 and any(x <= here <= y for x, y in dom)
        if hinted[a]:
            model.add_hint(k, here)
    xs = [ks[a] * int(p.align[i]) for a, i in enumerate(free.tolist())]
    intervals = [model.new_fixed_size_interval_var(xs[a], int(s1[i]), f"x{i}")
                 for a, i in enumerate(free.tolist())]
    # conflicts among the freed: no-overlap over a clique cover of their conflict graph
    if adj.any():
        adj |= adj.T
        np.fill_diagonal(adj, False)
        cptr, flat = greedy_class_cliques(adj, np.ones(m, np.bool_), np.ones(m, np.int64),
                                           0, -1)
        for c in range(len(cptr) - 1):
            members = flat[cptr[c]:cptr[c + 1]]
            if len(members) > 1:
                model.add_no_overlap([intervals[x] for x in members.tolist()])
    # element / region partners both freed: they touch no common zone
    zones_e = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
    zones_r = [(0, ils), (ils, tm)]
    for pairs, zones in ((p.element_pairs, zones_e), (p.region_pairs, zones_r)):
        pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
        both = pairs[is_free[pairs[:, 0]] & is_free[pairs[:, 1]]]
        for i, j in both.tolist():
            a, b = int(np.searchsorted(free, i)), int(np.searchsorted(free, j))
            for zs, ze in zones:
                ti = zone_touch(model, ks[a], int(p.align[i]), int(s1[i]), zs, ze)
                tj = zone_touch(model, ks[b], int(p.align[j]), int(s1[j]), zs, ze)
                if ti is not None and tj is not None:
                    for (t, (lo_k, hi_k)), x, y in ((ti, i, a), (tj, j, b)):   # as hinted
                        if hinted[y]:
                            model.add_hint(t, bool(lo_k <= off[x] // p.align[x] <= hi_k))
                    model.add_bool_or([~ti[0], ~tj[0]])
    def new_solver():
        s = cp_model.CpSolver()
        s.parameters.max_time_in_seconds = max(float(time_limit), 0.01)
        s.parameters.num_workers = 1
        s.parameters.random_seed = int(seed)
        return s

    st, solver = solve_hinted(model, new_solver)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    out = off.copy()
    for a, i in enumerate(free.tolist()):
        out[i] = solver.value(ks[a]) * int(p.align[i])
    return out


def _windows(p: TileProblem, i: int, s1: int, size: int, top: int) -> np.ndarray:
    """The start addresses variable ``i`` may take, as inclusive ranges: its memory window
    (split at interleavedMemoryStart under ``no_region_span``) and, when ``top`` is past
    tileMemory, the overflow zone; nothing ending above ``top``."""
    tm, ils = p.capacity, p.target.interleaved_memory_start
    lo, hi = int(p.lo[i]), int(p.hi[i])
    last = int(top) - int(size)
    parts = []
    if lo + s1 <= hi:
        if p.rules.no_region_span and lo < ils < hi:
            parts += [(lo, min(ils - s1, last)), (ils, min(hi - s1, last))]
        else:
            parts.append((lo, min(hi - s1, last)))
    if top >= tm:
        # the overflow zone, [tm, top - size]: empty for a cap of tileMemory but for a
        # zero-size variable, which may sit at tileMemory itself (it ends there and
        # overflows no byte, as the checker reads it)
        parts.append((tm, last))
    parts = [(x, y) for x, y in parts if x <= y]
    return np.array(parts, np.int64).reshape(-1, 2)


def _subtract(allowed: np.ndarray, banned: np.ndarray) -> list[tuple[int, int]]:
    """Inclusive ranges ``allowed`` minus the union of inclusive ranges ``banned``."""
    banned = banned[banned[:, 0] <= banned[:, 1]]
    banned = banned[np.argsort(banned[:, 0], kind="stable")]
    merged = []
    for x, y in banned.tolist():
        if merged and x <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], y)
        else:
            merged.append([x, y])
    out = []
    for a, b in allowed.tolist():
        cur = a
        for x, y in merged:
            if y < cur:
                continue
            if x > b:
                break
            if x > cur:
                out.append((cur, x - 1))
            cur = max(cur, y + 1)
            if cur > b:
                break
        if cur <= b:
            out.append((cur, b))
    return out
