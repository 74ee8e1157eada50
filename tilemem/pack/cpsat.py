"""Exact-capable packing of one tile with OR-Tools CP-SAT.

Model (one integer per variable: its address divided by its alignment, so alignment is exact):

- each variable is a fixed-size interval at ``align * k``; its domain is the union of its
  legal windows: the memory window ``[lo, hi - size]`` (split at the region boundary under
  ``rules.no_region_span``, which then needs no Boolean at all) and, when overflow is allowed,
  the overflow zone ``[tileMemory, ...)``;
- no-overlap: ``AddNoOverlap2D`` over (address, lifetime) when the report's class lifetimes
  say exactly who conflicts; otherwise ``AddNoOverlap`` over a clique cover of the conflict
  graph (every conflicting pair shares a clique; measured ~4x faster than one Boolean per
  pair, which this model never uses);
- element / region constraints: "touches zone Z" is a Boolean equivalent to the address lying
  in one interval (``[Z.start - size + 1, Z.end - 1]``); constrained pairs may not both touch
  any zone;
- objective, lexicographic, in phases: overflowed bytes (only when the hint overflows), then
  the highest end address; the tile's lower bound (maximum live bytes) is given to the solver.

Each phase starts from a complete hint (the heuristic's allocation). When the time limit hits,
the best valid allocation found is returned with status "feasible". ``deterministic=True`` uses
``interleave_search`` and ``max_deterministic_time`` with ``random_seed``, so a run repeats
exactly whatever the machine's load.

>>> from tilemem.model import Report
>>> from tilemem.pack.problem import TileProblem
>>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0, 0, 0], size=[8, 4, 8],
...     alignment=[8, 4, 8], offset=[0, 0, 0], category=["variable"] * 3,
...     eq_class=[0, 0, 0], interference=[[]])
>>> res = solve_cpsat(TileProblem.from_report(r, 0), time_limit=5)
>>> res.status, int((res.offsets + [8, 4, 8]).max())   # 8 + 8 + 4: no alignment hole
('optimal', 20)
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from ..jit import njit

from ..liveness.sorting import argsort
from .kinds import DEFAULTS, SearchStatus
from .lattice import aligned_grain
from .params import DEFAULT_PARAMS, SolverParams
from .problem import TileProblem
from .result import objective


@dataclass(frozen=True)
class CpsatResult:
    """``offsets`` (local, or ``None`` when nothing valid is known), ``status`` (a
    ``SearchStatus``: OPTIMAL, FEASIBLE, INFEASIBLE, UNKNOWN, or INVALID when CP-SAT rejected
    the model), seconds spent and solver notes."""

    offsets: np.ndarray | None
    status: SearchStatus
    seconds: float
    note: str = ""


def conflict_cliques(p: TileProblem, max_entries: int | None = None) -> list[np.ndarray] | None:
    """A clique cover of the tile's conflict graph, as arrays of local variable indices;
    None as soon as the cliques would hold more than ``max_entries`` variables in all (the
    greedy cover of a Mk2 tile's ~1,500 dense classes takes ~1.7 s to reach ~1 M of them).

    Built on classes: a greedy edge clique cover of the class interference graph, each class
    clique expanded to its members; always-live variables join every clique (they conflict with
    everyone); a class in no clique gets its own. Every conflicting pair is in some clique.

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=range(5), tile=[0] * 5, size=[4] * 5,
    ...     alignment=[4] * 5, offset=[0] * 5, category=["variable"] * 5,
    ...     eq_class=[0, 1, 2, 2, 3], interference=[[1, 2], [2], [], []],
    ...     always_live=[0, 0, 0, 0, 1])
    >>> sorted(c.tolist() for c in conflict_cliques(TileProblem.from_report(r, 0)))
    [[0, 1, 2, 3, 4]]
    """
    c = p.conflicts
    if c.class_matrix is None:
        raise ValueError(f"{len(c.classes):,} classes: past the dense class matrix limit")
    al = c.always_live.astype(bool)
    live = np.flatnonzero(al)
    # members of each class, always-live variables apart
    members = c.class_members(always_live=False)
    present = np.array([len(m) > 0 for m in members], np.bool_)
    # only classes with non-always-live members matter; the cover is of edges between two
    adj = c.class_matrix & present[:, None] & present[None, :]
    np.fill_diagonal(adj, False)
    weight = np.array([len(m) for m in members], np.int64)
    limit = -1 if max_entries is None else int(max_entries)
    ptr, flat = greedy_class_cliques(adj, present, weight, len(live), limit)
    if len(ptr) == 0:
        return None
    out = []
    for k in range(len(ptr) - 1):
        cl = flat[ptr[k]:ptr[k + 1]]
        vars_ = np.concatenate([members[x] for x in cl] + [live])
        if len(vars_) > 1:
            out.append(np.sort(vars_).astype(np.int64))
    if len(ptr) == 1 and len(live) > 1:
        out.append(live.astype(np.int64))
    if max_entries is not None and sum(len(c) for c in out) > max_entries:
        return None
    return out


@njit(cache=True)
def greedy_class_cliques(adj, present, weight, extra, limit):
    """Greedy edge clique cover of a dense class graph: for each uncovered edge, grow a clique
    by the candidate covering most uncovered edges (ties: highest degree). Classes in no edge
    get a clique of their own. Returns CSR ``(indptr, classes)``, or an empty ``indptr`` once
    the variables of the cliques grown so far (``weight`` per class, ``extra`` more per
    clique) pass ``limit`` (negative: no limit); the caller checks the finished cover."""
    nc = adj.shape[0]
    uncovered = adj.copy()
    degree = np.zeros(nc, np.int64)
    for i in range(nc):
        for j in range(nc):
            if adj[i, j]:
                degree[i] += 1
    in_clique = np.zeros(nc, np.bool_)
    total = 0   # variables in the cliques grown so far (see ``limit``)
    flat = []
    ptr = [0]
    cand = np.zeros(nc, np.bool_)
    gain = np.zeros(nc, np.int64)
    members = np.zeros(nc, np.int64)
    for u in argsort(-degree):
        while True:
            v = -1
            for j in range(nc):
                if uncovered[u, j]:
                    v = j
                    break
            if v < 0:
                break
            members[0] = u
            members[1] = v
            size = 2
            left = 0
            for j in range(nc):
                cand[j] = adj[u, j] and adj[v, j]
                gain[j] = np.int64(uncovered[u, j]) + np.int64(uncovered[v, j])
                left += cand[j]
            while left > 0:
                w = -1
                best = -1
                for j in range(nc):
                    if cand[j]:
                        score = gain[j] * nc + degree[j]
                        if score > best:
                            best = score
                            w = j
                members[size] = w
                size += 1
                left = 0
                for j in range(nc):
                    cand[j] = cand[j] and adj[w, j]
                    gain[j] += uncovered[w, j]
                    left += cand[j]
            total += extra
            for x in range(size):
                in_clique[members[x]] = True
                flat.append(members[x])
                total += weight[members[x]]
                for y in range(size):
                    uncovered[members[x], members[y]] = False
            ptr.append(len(flat))
            if 0 <= limit < total:
                return np.zeros(0, np.int64), np.zeros(0, np.int64)
    for k in range(nc):
        if present[k] and not in_clique[k]:
            flat.append(k)
            ptr.append(len(flat))
    return np.array(ptr, np.int64), np.array(flat, np.int64)


def lifetimes_decide_conflicts(p: TileProblem) -> bool:
    """True when two variables conflict exactly when their class lifetimes overlap (or one
    is always-live), so ``AddNoOverlap2D`` over (address, lifetime) is the whole rule."""
    if p.lifetimes is None or p.n == 0:
        return False
    c = p.conflicts
    if c.class_matrix is None:  # past the dense limit: not verified, so not used
        return False
    al = c.always_live.astype(bool)
    nc = len(c.classes)
    start = np.full(nc, -1, np.int64)
    end = np.full(nc, -1, np.int64)
    start[c.local_class] = p.lifetimes[:, 0]
    end[c.local_class] = p.lifetimes[:, 1]
    used = np.zeros(nc, bool)
    used[c.local_class[~al]] = True
    if np.any(end[used] <= start[used]):  # an empty lifetime would let a class share
        return False
    # both with a true diagonal on the used classes (their lifetimes are not empty)
    overlap = (start[:, None] < end[None, :]) & (start[None, :] < end[:, None])
    mask = used[:, None] & used[None, :]
    return bool(np.array_equal(overlap & mask, c.class_matrix & mask))


#: CP-SAT's deterministic time per second of a ``deterministic`` run's time limit: on tile
#: models its unit of work costs about 20-50 wall seconds, so a limit is converted for the
#: deterministic run to take about as long as the clocked one. A measured rate, not a
#: tuning value (``SolverParams`` holds those).
DETERMINISTIC_UNITS_PER_SECOND = 0.03


def solve_cpsat(p: TileProblem, *, hint: np.ndarray | None = None,
                time_limit: float = DEFAULTS.time_limit,
                bound: int | None = None, allow_overflow: bool = True, workers: int = 1,
                seed: int = 0, deterministic: bool = False, log: bool = False,
                polish: bool = False, params: SolverParams = DEFAULT_PARAMS) -> CpsatResult:
    """Pack ``p`` (see the module docstring). ``hint``: a valid allocation to start from.

    ``polish``: with time left after the highest end address, lower the regions'
    high-water marks too (the objective's last criterion; not part of the proof).
    ``params``: ``max_clique_entries`` (a model past it is skipped as too large) and
    ``fit_share`` (the overflow phase's share of the time).
    """
    from ortools.sat.python import cp_model

    t0 = time.perf_counter()
    n = p.n
    if n == 0:
        return CpsatResult(np.zeros(0, np.int64), SearchStatus.OPTIMAL, 0.0)
    if hint is not None and not allow_overflow and np.any(hint >= p.capacity):
        hint = None
    m = _Model(p, allow_overflow, params.max_clique_entries)
    if m.too_big:
        return CpsatResult(hint, SearchStatus.UNKNOWN, time.perf_counter() - t0,
                           f"skipped, model too large: {m.too_big}")
    if m.empty_domain:
        return CpsatResult(None, SearchStatus.INFEASIBLE, time.perf_counter() - t0,
                           "a variable has no legal address in memory")
    notes = [m.no_overlap_kind]

    def solver_for(seconds):
        s = cp_model.CpSolver()
        prm = s.parameters
        prm.num_workers = max(1, int(workers))
        prm.random_seed = int(seed)
        prm.log_search_progress = bool(log)
        if deterministic:
            prm.interleave_search = True
            prm.max_deterministic_time = max(seconds, 0.01) * DETERMINISTIC_UNITS_PER_SECOND
        else:
            prm.max_time_in_seconds = max(seconds, 0.01)
        return s

    best = hint
    proven = True
    work = 0.0   # deterministic time used by the phases so far, in seconds of limit

    def used() -> float:
        # deterministic: the solver's own measure of work, so that the phases' shares are
        # the same on any machine; else the wall clock
        return work if deterministic else time.perf_counter() - t0

    status_names = {cp_model.OPTIMAL: SearchStatus.OPTIMAL,
                    cp_model.FEASIBLE: SearchStatus.FEASIBLE,
                    cp_model.INFEASIBLE: SearchStatus.INFEASIBLE,
                    cp_model.UNKNOWN: SearchStatus.UNKNOWN,
                    cp_model.MODEL_INVALID: SearchStatus.INVALID}

    def run(seconds):
        nonlocal best, work
        m.model.clear_hints()
        if best is not None:
            m.hint(best)
        st, s = solve_hinted(m.model, lambda: solver_for(seconds))
        work += float(s.response_proto.deterministic_time) / DETERMINISTIC_UNITS_PER_SECOND
        name = status_names.get(st, SearchStatus.UNKNOWN)
        if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            best = m.offsets(s)
        return name, s

    over_fixed = 0
    if allow_overflow and m.overflow_expr is not None and (hint is None or
                                                           np.any(hint >= p.capacity)):
        # phase A: fewest overflowed bytes
        m.model.minimize(m.overflow_expr)
        name, s = run(time_limit * params.fit_share)
        if name in (SearchStatus.INFEASIBLE, SearchStatus.INVALID):
            return CpsatResult(best, name, time.perf_counter() - t0, ",".join(notes))
        if best is None:
            return CpsatResult(None, SearchStatus.UNKNOWN, time.perf_counter() - t0,
                               ",".join(notes))
        over_fixed = objective(p, best)[0]
        if name == SearchStatus.OPTIMAL:
            m.model.add(m.overflow_expr == over_fixed)
        else:
            proven = False
            m.model.add(m.overflow_expr <= over_fixed)
        notes.append(f"overflow phase {name}")
    elif m.overflow_expr is not None:
        m.model.add(m.overflow_expr == 0)
    # phase B: lowest highest end address
    end = m.end_var()
    if bound is not None and over_fixed == 0:
        m.model.add(end >= int(bound))
    m.model.minimize(end)
    left = time_limit - used()
    name, s = run(max(left, 0.05))
    notes.append(f"end phase {name}")
    left = time_limit - used()
    if polish and best is not None and left > 0.05 \
            and name in (SearchStatus.OPTIMAL, SearchStatus.FEASIBLE):
        # phase C: region high-water marks, the end address kept
        top = int((np.asarray(best) + p.size).max())
        m.model.add(end <= top)
        m.model.minimize(m.region_marks_expr())
        before = best
        name_c, _ = run(left)
        if name_c not in (SearchStatus.OPTIMAL, SearchStatus.FEASIBLE):
            best = before
        notes.append(f"region phase {name_c}")
    seconds = time.perf_counter() - t0
    if name == SearchStatus.INFEASIBLE and over_fixed == 0 and not allow_overflow:
        return CpsatResult(None, SearchStatus.INFEASIBLE, seconds, ",".join(notes))
    if best is None:
        return CpsatResult(None, SearchStatus.UNKNOWN, seconds, ",".join(notes))
    status = (SearchStatus.OPTIMAL if proven and name == SearchStatus.OPTIMAL
              else SearchStatus.FEASIBLE)
    return CpsatResult(np.asarray(best, np.int64), status, seconds, ",".join(notes))


def solve_hinted(model, new_solver):
    """``new_solver().solve(model)``: ``(status, solver)``; when it raises with the model's
    hints, again without them (a new solver) -- an error then is the caller's.

    Why: OR-Tools 9.15's presolve can raise on a hinted model that it solves without the
    hints (``IndexError: absl::btree_map::at``, in its solution crush, seen on neighbourhoods
    of zero-size variables with partial hints inside every domain); the hints only speed the
    search up, so losing them loses nothing else.
    """
    solver = new_solver()
    try:
        return solver.solve(model), solver
    except Exception:  # noqa: BLE001 - the same model without hints, once
        if not len(model.proto.solution_hint.vars):
            raise
    model.clear_hints()
    solver = new_solver()
    return solver.solve(model), solver


def lattice_alignment(p: TileProblem) -> np.ndarray:
    """Alignments made coarser where that loses no allocation: the lattice step ``G``.

    Without element or region constraints, every allocation can be pushed down, variable by
    variable in address order, until each address is an aligned-up window start, region
    start, ``tileMemory`` or end of another variable (nothing gets worse). When all sizes and
    those boundaries are multiples of ``G`` and each alignment divides ``G`` or is a multiple
    of it, those addresses are multiples of ``G``: so aligning to ``lcm(align, G)`` keeps an
    optimal allocation. On MiniMalloc's instances (sizes multiples of 1024) the search space
    shrinks 256-fold.
    """
    a = p.align.astype(np.int64)
    if p.n == 0 or len(p.element_pairs) or len(p.region_pairs):
        return a
    t = p.target
    values = np.concatenate([np.maximum(p.size, 1), p.lo, p.hi,
                             [t.tile_memory, t.interleaved_memory_start]]).astype(np.int64)
    g = aligned_grain(np.gcd.reduce(values[values > 0]) if np.any(values > 0) else 1, a)
    return np.lcm(a, g) if g > 1 else a


def zone_touch(model, k, align: int, s1: int, zs: int, ze: int,
               k_range: tuple[int, int] | None = None, name: str = ""):
    """A Boolean of ``model`` equivalent to "the variable at ``k * align`` (``s1`` bytes, a
    zero size read as one) touches zone ``[zs, ze)``", and the range of ``k`` that does:
    ``(literal, (lo_k, hi_k))``; None when no ``k`` (in ``k_range``, when given) touches it.
    Element and region partners may not both touch any zone: one such literal per partner
    and zone is the whole constraint (here and in ``tilemem.pack.neighbourhood``)."""
    from ortools.sat.python import cp_model

    lo_k, hi_k = -(-(zs - s1 + 1) // align), (ze - 1) // align   # k with address in the zone
    if hi_k < lo_k or (k_range is not None and (hi_k < k_range[0] or lo_k > k_range[1])):
        return None
    t = model.new_bool_var(name)
    inside = cp_model.Domain(lo_k, hi_k)
    model.add_linear_expression_in_domain(k, inside).only_enforce_if(t)
    model.add_linear_expression_in_domain(k, inside.complement()).only_enforce_if(~t)
    return t, (lo_k, hi_k)


class _Model:
    """The CP-SAT model of one tile and how to hint it and read its solution."""

    def __init__(self, p: TileProblem, allow_overflow: bool, max_clique_entries: int):
        from ortools.sat.python import cp_model

        self.p = p
        self.too_big = ""
        model = self.model = cp_model.CpModel()
        n = p.n
        tm = p.capacity
        ils = p.target.interleaved_memory_start
        s = np.maximum(p.size, 1).astype(np.int64)
        a = lattice_alignment(p)
        self.s, self.a = s, a
        overflow_top = tm + int(np.sum(s + a))  # first fit in the zone never goes higher
        self.empty_domain = False
        self.k, self.in_mem, self.k_range = [], [], []
        for i in range(n):
            lo, hi, si, ai = int(p.lo[i]), int(p.hi[i]), int(s[i]), int(a[i])
            parts = []
            if lo + si <= hi:
                if p.rules.no_region_span and lo < ils < hi:
                    parts += [(lo, min(hi, ils) - si), (max(lo, ils), hi - si)]
                else:
                    parts.append((lo, hi - si))
            mem_parts = [(-(-x // ai), y // ai) for x, y in parts if x <= y]
            mem_parts = [(x, y) for x, y in mem_parts if x <= y]
            zone = [(-(-tm // ai), (overflow_top - si) // ai)] if allow_overflow else []
            if not mem_parts and not zone:
                self.empty_domain = True
                return
            dom = cp_model.Domain.from_intervals([list(x) for x in mem_parts + zone])
            k = model.new_int_var_from_domain(dom, f"k{i}")
            self.k.append(k)
            self.k_range.append(((mem_parts + zone)[0][0], (mem_parts + zone)[-1][1]))
            if mem_parts and zone:
                b = model.new_bool_var(f"mem{i}")
                model.add(k <= (tm - 1) // ai).only_enforce_if(b)
                model.add(k * ai >= tm).only_enforce_if(~b)
                self.in_mem.append(b)
            else:
                self.in_mem.append(bool(mem_parts))
        self.intervals = [model.new_fixed_size_interval_var(self.k[i] * int(a[i]), int(s[i]),
                                                            f"x{i}") for i in range(n)]
        self._no_overlap(max_clique_entries)
        if self.too_big:
            return
        self.touch: dict[tuple[int, int], object] = {}
        zones_e = list(zip(p.target.memory_element_offsets.tolist(),
                           p.target.element_ends.tolist()))
        zones_r = [(0, ils), (ils, tm)]
        for pairs, zones, tag in ((p.element_pairs, zones_e, "e"),
                                  (p.region_pairs, zones_r, "r")):
            for i, j in np.asarray(pairs, np.int64).reshape(-1, 2).tolist():
                for z, (zs, ze) in enumerate(zones):
                    if zs >= ze:
                        continue
                    ti = self._touch(i, z, zs, ze, tag)
                    tj = self._touch(j, z, zs, ze, tag)
                    if ti is not None and tj is not None:
                        model.add_bool_or([~ti, ~tj])
        self.overflow_expr = None
        if allow_overflow:
            # overflowed bytes as the checker counts them (tilemem.rules.overflow_bytes): the
            # excess of the highest end of the variables that hold a byte past tileMemory
            size = p.size
            held = [i for i in range(p.n) if size[i] > 0]
            if held:
                top = max(self.k_range[i][1] * int(self.a[i]) + int(size[i]) for i in held)
                high = model.new_int_var(0, top, "held_end")
                model.add_max_equality(high, [self.k[i] * int(self.a[i]) + int(size[i])
                                              for i in held])
                over = model.new_int_var(0, max(0, top - tm), "overflow")
                model.add_max_equality(over, [high - tm, 0])
                self.overflow_expr = over
        self._end = None

    def _no_overlap(self, max_clique_entries: int):
        p, model = self.p, self.model
        if lifetimes_decide_conflicts(p):
            al = p.conflicts.always_live.astype(bool)
            t0 = int(p.lifetimes[:, 0].min())
            t1 = int(max(p.lifetimes[:, 1].max(), t0 + 1))
            ys = []
            for i in range(p.n):
                ys0, ys1 = (t0, t1) if al[i] else (int(p.lifetimes[i, 0]),
                                                   int(p.lifetimes[i, 1]))
                ys1 = max(ys1, ys0 + 1)  # a lone class with an empty lifetime: any row
                ys.append(model.new_fixed_size_interval_var(ys0, ys1 - ys0, f"t{i}"))
            model.add_no_overlap_2d(self.intervals, ys)
            self.no_overlap_kind = "no-overlap-2d"
            return
        if p.conflicts.class_matrix is None:
            self.too_big = (f"{len(p.conflicts.classes):,} classes, past the dense class "
                            f"matrix limit")
            return
        cliques = conflict_cliques(p, max_entries=max_clique_entries)
        if cliques is None:
            self.too_big = f"more than {max_clique_entries:,} intervals in no-overlap cliques"
            return
        for cl in cliques:
            model.add_no_overlap([self.intervals[i] for i in cl.tolist()])
        self.no_overlap_kind = f"{len(cliques)} no-overlap cliques"

    def _touch(self, i, z, zs, ze, tag):
        """Boolean: variable ``i`` touches zone ``[zs, ze)`` (None: it never can)."""
        key = (i, (tag, z))
        if key in self.touch:
            return self.touch[key]
        got = zone_touch(self.model, self.k[i], int(self.a[i]), int(self.s[i]), zs, ze,
                         self.k_range[i], f"touch{tag}{i}_{z}")
        if got is None:
            self.touch[key] = None
            return None
        t, zone = got
        self.touch[key] = t
        self._touch_zone = getattr(self, "_touch_zone", {})
        self._touch_zone[key] = zone
        return t

    def end_var(self):
        if self._end is None:
            # real sizes here: a zero-size variable ends where it starts
            size = self.p.size
            ends = [self.k[i] * int(self.a[i]) + int(size[i]) for i in range(self.p.n)]
            top = max(self.k_range[i][1] * int(self.a[i]) + int(size[i])
                      for i in range(self.p.n))
            self._end = self.model.new_int_var(0, top, "end")
            self.model.add_max_equality(self._end, ends)
        return self._end

    def region_marks_expr(self):
        """``hwm0 * (tileMemory + 1) + hwm1``: both regions' high-water marks, region 0
        first (a variable belongs to the region its offset is in)."""
        model, p = self.model, self.p
        tm, ils = p.capacity, p.target.interleaved_memory_start
        h0 = model.new_int_var(0, tm, "hwm0")
        h1 = model.new_int_var(0, tm, "hwm1")
        self.region_bools = []
        for i in range(p.n):
            ai, si = int(self.a[i]), int(p.size[i])
            x = self.k[i] * ai
            r0 = model.new_bool_var(f"r0_{i}")
            model.add(x <= ils - 1).only_enforce_if(r0)
            model.add(x >= ils).only_enforce_if(~r0)
            model.add(h0 >= x + si).only_enforce_if(r0)
            b = self.in_mem[i]
            if isinstance(b, bool):
                if b:
                    model.add(h1 >= x + si).only_enforce_if(~r0)
            else:
                model.add(h1 >= x + si).only_enforce_if([~r0, b])
            self.region_bools.append(r0)
        self.marks = (h0, h1)
        return h0 * (tm + 1) + h1

    def hint(self, offsets):
        """A complete hint: every variable of the model from one allocation."""
        off = np.asarray(offsets, np.int64)
        tm = self.p.capacity
        for i, k in enumerate(self.k):
            self.model.add_hint(k, int(off[i] // self.a[i]))
            b = self.in_mem[i]
            if not isinstance(b, bool):
                self.model.add_hint(b, bool(off[i] < tm))
        for key, t in self.touch.items():
            if t is None:
                continue
            i = key[0]
            lo_k, hi_k = self._touch_zone[key]
            self.model.add_hint(t, bool(lo_k <= off[i] // self.a[i] <= hi_k))
        if self._end is not None:
            self.model.add_hint(self._end, int((off + self.p.size).max()))
        if getattr(self, "marks", None) is not None:
            ils = self.p.target.interleaved_memory_start
            end = off + self.p.size
            r0 = off < ils
            mem1 = ~r0 & (off < tm)
            for i, b in enumerate(self.region_bools):
                self.model.add_hint(b, bool(r0[i]))
            self.model.add_hint(self.marks[0], int(end[r0].max()) if r0.any() else 0)
            self.model.add_hint(self.marks[1], int(end[mem1].max()) if mem1.any() else 0)

    def offsets(self, solver) -> np.ndarray:
        return np.array([solver.value(k) * int(self.a[i]) for i, k in enumerate(self.k)],
                        np.int64)
