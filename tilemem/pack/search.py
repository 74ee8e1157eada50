"""Exact search: does every variable of a tile fit in memory? (``solve_search``)

A decision procedure in the spirit of MiniMalloc (Moffitt, ASPLOS 2023), generalised from
buffers with lifetimes to the tile's conflict graph and to every placement rule: alignment,
windows, no region span, element and region constraints. The compiled core is
``tilemem.pack.search_kernel``; this module builds its arrays and runs the restarts.

The search places variables bottom-up. Its pruning rests on one fact: if anything fits, a
*left-justified* placement fits, where no variable can move to a lower legal offset with the
others fixed. Sort such a placement by offset (ties by a static rank): each variable sits
exactly at ``m`` -- the lowest legal offset above every conflicting variable before it and past
the last element (region) of every element (region) partner before it. Every rule is either
unary (window, alignment, region span) or, between a variable and one before it, a lower bound
(conflicts: above its end; element/region partners: past its last element/region, since
contiguous ranges that do not share one are ordered). So the search only tries, at each node,
an unplaced variable at its ``m``, in non-decreasing (offset, rank) order ("canonical"), and:

- *dominance*: it never places anything at or above the point where some unplaced ``k`` would
  fit wholly below at ``m[k]`` (for element/region-constrained ``k``: below the next element /
  region boundary), as a left-justified placement would have ``k`` there;
- *hatless pruning*: when the variable just tried interacts with nothing unplaced, every
  placement from this node has it there, so its failure fails the node;
- *section inference*: the unplaced variables of a clique of the conflict graph ("section": a
  cross-section of time when lifetimes are known) must stack above
  ``max(current offset, least m)`` within the clique's capacity; sub-cliques of the members
  with an earlier window end (code) or a later window start (interleaved) get their own check;
- *partner look-ahead*: two unplaced element (region) partners need an order in which the
  first, at or above the current offset, leaves a later element (region) for the second;
- *dynamic decomposition*: sections are ordered and each variable spans an interval of them
  (interacting variables' spans intersect); when no unplaced variable spans two adjacent
  sections the rest splits into independent parts, each searched on its own.

Restarts over static orders (MiniMalloc's WAT, TAW, TWA -- width, area, largest section total
-- and TWR, random ties), each after D (the window's end, so code below the interleaved region
comes early when ranks tie), with a node limit that doubles each round; a finished round is a
proof either way. Without lifetimes the sections are the maximal cliques of an interval model
of the class graph when it has one, else a greedy clique cover of it in reverse Cuthill-McKee
order. The search does not depend on magnitudes (it only adds sizes), so there is nothing to
gain from dividing by a common factor.

>>> from tilemem.model import Report
>>> from tilemem.model.target import Target
>>> from tilemem.pack.problem import TileProblem
>>> t = Target(num_tiles=1, tile_memory=12, interleaved_memory_start=12,
...            memory_element_offsets=[0])
>>> r = Report.from_columns(target=t, var_id=range(5), tile=[0] * 5, size=[4] * 5,
...     alignment=[4] * 5, offset=[0] * 5, category=["variable"] * 5,
...     eq_class=range(5), interference=[[2, 4], [2, 4], [0, 1, 4], [4], [0, 1, 2, 3]],
...     class_steps=[[0, 3], [3, 9], [0, 9], [9, 21], [0, 21]])
>>> res = solve_search(TileProblem.from_report(r, 0), time_limit=5)
>>> res.status, int((res.offsets + 4).max())
('optimal', 12)
>>> solve_search(TileProblem.from_report(r, 0), time_limit=5, capacity=8).status
'infeasible'
"""
from __future__ import annotations

import itertools
import time
import weakref
from dataclasses import dataclass, replace

import numpy as np
from numba import njit

from ..liveness.graphalg import interval_order
from . import search_kernel as K
from .firstfit import first_fit
from .guard import K_ELEMENT, K_REGION, element_bounds, self_check
from .mirror import mirror
from .problem import TileProblem
from .result import objective

#: Static orders tried in turn each round: MiniMalloc's three, then section total and width
#: with ties broken at random ("R", reseeded every round; the hint's order in the first round);
#: all after the deadline ("D": variables whose window closes first), which only matters when
#: windows differ.
DEFAULT_ORDERINGS = ("DWAT", "DTAW", "DTWA", "DTWR")
_CODES = {"W": K.KEY_W, "A": K.KEY_A, "T": K.KEY_T, "R": K.KEY_R, "D": K.KEY_D, "Z": K.KEY_Z}


@dataclass(frozen=True)
class SearchResult:
    """``status``: "optimal" (``offsets`` place every variable below the capacity), "infeasible"
    (proved that none exists), "unknown" (time limit; ``offsets`` is None, or with ``probe``
    the best valid allocation its failed descents were completed to, above the capacity)."""

    offsets: np.ndarray | None
    status: str
    nodes: int
    seconds: float


def solve_search(problem: TileProblem, time_limit: float, hint: np.ndarray | None = None,
                 capacity: int | None = None, *,
                 orderings: tuple[str, ...] = DEFAULT_ORDERINGS, seed: int = 0,
                 randomized: bool = True, max_nodes: int | None = None,
                 probe: bool = False, enough: int | None = None,
                 mirrored: bool = False) -> SearchResult:
    """Place every variable of ``problem`` below ``capacity`` (default: tileMemory) with every
    rule respected, or prove it impossible, within ``time_limit`` seconds. A capacity past
    tileMemory opens the overflow zone: variables may then also go past tileMemory, where
    only alignment and no-overlap apply (never straddling it).

    ``orderings``: the static orders of each round, as letters (D end of the window
    ascending, then descending keys: W lifetime width, A area, T largest section total, Z
    size; R random, or ``hint``'s order by offset in the first round); every order ends with
    the canonical rank (``_canonical_rank``). With ``randomized``, each round is followed by
    as many nodes of short restarts from perturbed orders (``_random_restarts``). ``seed``
    makes the random orders repeatable. ``max_nodes``: stop after this many search nodes
    instead of at ``time_limit`` (the clock is then not read: the same call gives the same
    result on any machine, under any load). Repeated calls on the same problem object reuse its
    arrays (numba compiles once and caches). A ``hint`` (local offsets) that already places
    everything below ``capacity`` is returned as it is.

    ``probe``: look for a placement only, by short descents (``_probe``) until
    ``time_limit``; never proves anything, so "unknown" when none is found (with the best
    completion of a failed descent as ``offsets``: valid, but not below ``capacity``);
    ``enough``: an end address at which such a completion also ends the probe (nothing
    overflowed unless the capacity is past tileMemory).

    ``mirrored`` (with ``probe``): the probe runs on the problem with its addresses reversed
    below ``capacity`` (``tilemem.pack.mirror``: it fills memory from the top down) and its
    results are mapped back; it never proves anything ("infeasible" there is "unknown").
    """
    t0 = time.perf_counter()
    deadline = t0 + max(float(time_limit), 0.0)
    cap = problem.capacity if capacity is None else int(capacity)
    if mirrored:
        if not probe:
            raise ValueError("mirrored is a way to probe: it needs probe=True")
        return _probe_mirrored(problem, cap, hint, seed, deadline, enough, t0)
    sm = _model_of(problem)
    if hint is not None and len(hint) == sm.n:
        h = np.asarray(hint, np.int64)
        if self_check(problem, h, capacity=cap):
            return SearchResult(offsets=h.copy(), status="optimal", nodes=0,
                                seconds=time.perf_counter() - t0)
    run = _Run(sm, cap)
    if max_nodes is not None:
        run.node_cap = max(int(max_nodes), 1)
        deadline = float("inf")
    if run.verdict is not None:
        return _result(sm, run, run.verdict, 0, t0)
    rng = np.random.default_rng(seed)
    if probe:
        status, nodes, completed = _probe(problem, sm, run, hint, rng, deadline, enough)
        verdict = {K.FOUND: "optimal", K.INFEASIBLE: "infeasible"}.get(status, "unknown")
        res = _result(sm, run, verdict, nodes, t0)
        return res if verdict != "unknown" else replace(res, offsets=completed)
    nodes = 0
    limit = max(sm.n, 1)
    first = True
    canonical = sm.n - sm.rank  # the R key is descending: rank 0 first
    restarts = _RandomRestarts(sm, rng) if randomized else None
    verdicts = {K.FOUND: "optimal", K.INFEASIBLE: "infeasible", K.PAUSED: "unknown"}
    while True:
        limit *= 2
        # random keys are drawn per canonical position: renumbering changes nothing
        random_key = rng.permutation(sm.n)[sm.rank]
        if first and hint is not None and len(hint) == sm.n:  # descending: lowest offset first
            random_key = -np.asarray(hint, np.int64)
        first = False
        spent = 0
        for name in orderings:
            heur = _static_order(run, name, random_key, canonical)
            run.reset()
            status = run.go(heur, limit, deadline)
            spent += int(run.state[10][K.R_NODES])
            if status in verdicts:
                return _result(sm, run, verdicts[status], nodes + spent, t0)
        nodes += spent
        if restarts is not None:
            status, spent = restarts.run(run, spent, deadline)
            nodes += spent
            if status in verdicts:
                return _result(sm, run, verdicts[status], nodes, t0)
        if time.perf_counter() >= deadline or run.spent():
            return _result(sm, run, "unknown", nodes, t0)


def _static_order(run: "_Run", name: str, random_key, canonical) -> np.ndarray:
    """The keys of static order ``name`` (letters, see ``solve_search``), with ``run``'s R key
    set: ``random_key`` when the order uses R, else the canonical rank, which then ends the
    order as its last tie-break."""
    heur = [_CODES[ch] for ch in name]
    run.random_key[:] = random_key if K.KEY_R in heur else canonical
    if K.KEY_R not in heur:
        heur.append(K.KEY_R)
    return np.array(heur, np.int64)


#: The static orders of ``_probe``'s first descents: the hint's order (by offset, ties by
#: section total and width), then orders that put the largest areas first and the longest
#: lives first by turns (which of the two families places a tile differs from tile to tile;
#: alternating finds one that works in the fewest descents).
PROBE_ORDERINGS = ("DTWR", "DAWT", "DW", "DTAW", "DTWA")


def probe_limit(n: int) -> int:
    """Nodes (and tries, ``search_kernel.R_TRY_LIMIT``) of one of ``_probe``'s descents on
    ``n`` variables: a descent plus ~6% of backtracking."""
    return n + n // 16 + 64


def _probe(p: TileProblem, sm: "_Model", run: "_Run", hint, rng, deadline: float,
           enough: int | None = None, to_p=None) -> tuple[int, int, np.ndarray | None]:
    """Short descents, each from another static order, until one places everything, the
    deadline passes or a failed descent's completion ends at or below ``enough``:
    ``(status, nodes, completed)``, status FOUND or ABORTED (or INFEASIBLE when a descent
    happened to exhaust the space); ``completed``: the best of the failed descents' partial
    placements completed by first fit (``_completion``), or None.

    Why: at a capacity a little above the optimum, a descent either places the tile with
    hardly any backtracking (about ``n`` nodes) or goes wrong early and then does not get
    out in any time worth waiting (on 37 Mk2 tiles at the bound + 1%: every success took
    at most 1.04 n nodes, and a failing descent given 2 n nodes cost up to 14 successful
    ones). Run times that heavy-tailed are what restarts are for (Gomes, Selman & Kautz
    1998): cut every descent at ``probe_limit`` nodes and tries and change the order
    instead (then completed by first fit: ``_completion``). The
    orders: ``PROBE_ORDERINGS`` (the hint's first), then the perturbed orders of
    ``_RandomRestarts``. (On 106 Mk2 tiles, 30 of them ones where the first four orders
    had failed: some order within 5 descents placed 93 of them.)
    """
    nodes = 0
    canonical = sm.n - sm.rank
    hinted = canonical   # the hint's order as an R key (descending: lowest offset first)
    if hint is not None and len(hint) == sm.n:
        hinted = -np.asarray(hint, np.int64)
    limit = probe_limit(sm.n)
    run.try_limit = limit  # a descent gone wrong tries many candidates a node: cut it too
    restarts = _RandomRestarts(sm, rng)
    completed, best = None, None
    for i in itertools.count():
        if i < len(PROBE_ORDERINGS):
            heur = _static_order(run, PROBE_ORDERINGS[i], hinted, canonical)
        else:
            if time.perf_counter() >= deadline:
                break
            key, heur = restarts.key()
            run.random_key[:] = key
        run.reset()
        status = run.go(heur, limit, deadline)
        nodes += int(run.state[10][K.R_NODES])
        if status in (K.FOUND, K.INFEASIBLE) or run.spent():
            return status, nodes, completed
        if status == K.ABORTED:
            partial = run.state[0] if to_p is None else to_p(run.state[0])
            off = _completion(p, partial)
            key = objective(p, off)
            if best is None or key < best:
                completed, best = off, key
                if enough is not None and key[1] <= enough and (key[0] == 0 or run.zone):
                    break
        if time.perf_counter() >= deadline:
            break
    return K.ABORTED, nodes, completed


def _probe_mirrored(p: TileProblem, cap: int, hint, seed: int, deadline: float,
                    enough: int | None, t0: float) -> SearchResult:
    """``solve_search(probe=True, mirrored=True)``: ``_probe`` on ``p``'s mirror below
    ``cap``, its results as ``p``'s offsets; "optimal" or "unknown" (see
    ``tilemem.pack.mirror``: the mirror's verdicts prove nothing about ``p``)."""
    m = mirror(p, cap)
    if m is None:
        return SearchResult(offsets=None, status="unknown", nodes=0,
                            seconds=time.perf_counter() - t0)
    sm = build_model(m.problem)
    run = _Run(sm, m.top)
    if run.verdict is not None:
        offsets = m.to_original(run.offsets()) if run.verdict == "optimal" else None
        return SearchResult(offsets=offsets, status="optimal" if offsets is not None
                            else "unknown", nodes=0, seconds=time.perf_counter() - t0)
    h = m.from_original(hint) if hint is not None and len(hint) == sm.n else None
    status, nodes, completed = _probe(p, sm, run, h, np.random.default_rng(seed), deadline,
                                      enough, to_p=m.to_original)
    if status == K.FOUND:
        # pressed down again: packed from the top, it need not start at 0 (first fit in
        # offset order moves nothing up, see _completion)
        off = m.to_original(run.offsets())
        return SearchResult(offsets=first_fit(p, np.argsort(off, kind="stable")),
                            status="optimal", nodes=nodes, seconds=time.perf_counter() - t0)
    return SearchResult(offsets=completed, status="unknown", nodes=nodes,
                        seconds=time.perf_counter() - t0)


def _completion(p: TileProblem, partial: np.ndarray) -> np.ndarray:
    """A valid allocation from an aborted descent's ``partial`` placement (-1: unplaced):
    first fit of the placed variables in offset order, then of the rest, largest first.

    Why: a descent that fails at a cap just above the optimum has mostly got stuck near
    the top with a few variables left (on Mk2 tiles at the bound + 1%, often 10-60 of
    ~1,800), and first fit tucks them into the holes below or just over the cap: an
    allocation a little above the cap for ~4 ms, where the descent found none. The placed
    variables keep their places or go lower: each one's offset in the descent stays legal,
    as everything first fit placed before it went there or lower and, if it interacts
    with it, lay below it in the descent.
    """
    placed = np.flatnonzero(partial >= 0)
    rest = np.flatnonzero(partial < 0)
    order = np.concatenate([placed[np.argsort(partial[placed], kind="stable")],
                            rest[np.argsort(-p.size[rest], kind="stable")]])
    return first_fit(p, order)


class _RandomRestarts:
    """Short restarts from perturbed orders, their node limits following Luby's sequence
    (``base`` x 1, 1, 2, 1, 1, 2, 4, ...: within a log factor of the best fixed limit for a run
    time distribution nobody knows; Luby, Sinclair & Zuckerman 1993).

    Why: a static order either leads the search straight to a packing or into a subtree it
    does not leave for millions of nodes, and which one is a matter of fine detail. The width
    key is the lifetime when lifetimes are known, but only the number of sections spanned when
    they come from interference -- the same ranking give or take near-ties, which is enough to
    turn one case into the other. So each restart perturbs width and area by random factors
    (log-normal, ``sigma``) and sorts by one or the other first (MiniMalloc's WAT / AWT), or
    by largest section total first; the noise is drawn per canonical position, so it does not
    depend on how the problem is numbered.
    """

    def __init__(self, sm: _Model, rng, base: int = 8, sigma: float = 0.3):
        self.sm = sm
        self.rng = rng
        self.base = base * max(sm.n, 1)
        self.sigma = sigma
        self.i = 0
        self.log_w = np.log(np.maximum(sm.width, 1).astype(np.float64))
        self.log_z = np.log(np.maximum(sm.size, 1).astype(np.float64))

    def key(self):
        """One perturbed order as an R key (descending) and the letters to use it with."""
        sm, rng = self.sm, self.rng
        noise = rng.standard_normal((2, sm.n))[:, sm.rank]
        w = self.log_w + self.sigma * noise[0]
        a = w + self.log_z + self.sigma * noise[1]
        first = rng.integers(3)
        order = np.lexsort((sm.rank, -a, -w) if first == 0 else (sm.rank, -w, -a))
        key = np.empty(sm.n, np.int64)
        key[order] = np.arange(sm.n, 0, -1)
        heur = [K.KEY_D, K.KEY_T, K.KEY_R] if first == 2 else [K.KEY_D, K.KEY_R]
        return key, np.array(heur, np.int64)

    def run(self, run: "_Run", budget: int, deadline: float):
        """Restarts until ``budget`` nodes are spent: ``(status, nodes)``, status ABORTED
        when none decided."""
        spent = 0
        while spent < budget:
            self.i += 1
            key, heur = self.key()
            run.random_key[:] = key
            run.reset()
            status = run.go(heur, self.base * _luby(self.i), deadline)
            spent += int(run.state[10][K.R_NODES])
            if status != K.ABORTED:
                return status, spent
        return K.ABORTED, spent


def _luby(i: int) -> int:
    """The ``i``-th term (from 1) of Luby's sequence 1, 1, 2, 1, 1, 2, 4, 1, ...

    >>> [_luby(i) for i in range(1, 16)]
    [1, 1, 2, 1, 1, 2, 4, 1, 1, 2, 1, 1, 2, 4, 8]
    """
    while True:
        k = i.bit_length()
        if i == (1 << k) - 1:
            return 1 << (k - 1)
        i -= (1 << (k - 1)) - 1


def _grain(size, lo, align, ils, elem_starts) -> int:
    """A step ``g`` such that if anything fits below a capacity ``C``, something fits below
    ``C // g * g``: a left-justified placement (what the search looks for) has offsets built
    from sizes, window starts, element / region boundaries and alignment only, so its end is
    a multiple of their gcd (an alignment that neither divides nor is a multiple of ``g``
    brings ``g`` down to their gcd). The search rounds capacities and window ends down to it.
    """
    if len(size) == 0:
        return 1
    vals = np.concatenate([size, lo, [ils], elem_starts[1:-1]]).astype(np.int64)
    return _aligned_grain(int(np.gcd.reduce(vals)), align)


def _aligned_grain(g: int, align) -> int:
    """``g`` brought down to its gcd with every alignment that neither divides nor is a
    multiple of it (see ``_grain``); at least 1.

    >>> _aligned_grain(32, np.array([4, 16])), _aligned_grain(32, np.array([12]))
    (32, 4)
    """
    g = max(int(g), 1)
    for a in np.unique(align).tolist():
        if g % a and a % g:
            g = int(np.gcd(g, a))
    return g


def warm_up() -> None:
    """Compile the search's kernels (or load them from numba's cache) on a tiny problem, e.g.
    before forking workers or timing."""
    from ..model import Report
    from ..model.target import Target

    r = Report.from_columns(target=Target(1, 64, 32, np.array([0, 16, 32, 48])),
                            var_id=[0, 1, 2], tile=[0] * 3, size=[8, 8, 4], alignment=[4] * 3,
                            offset=[0] * 3, category=["variable"] * 3, eq_class=[0, 0, 1],
                            interference=[[], []], element_constraints=[[2], [], []],
                            region_constraints=[[], [2], []], executable=[True, False, False])
    p = TileProblem.from_report(r, 0)
    solve_search(p, time_limit=60, hint=np.zeros(3, np.int64))


def _result(sm, run, status, nodes, t0) -> SearchResult:
    offsets = None
    if status == "optimal":
        offsets = run.offsets()
    return SearchResult(offsets=offsets, status=status, nodes=nodes,
                        seconds=time.perf_counter() - t0)


# ---- the static model ----------------------------------------------------------------------

@dataclass
class _Model:
    """The search's view of a problem: arrays over variables 0..n-1 (zero sizes count as one
    byte, the strictest reading), the interaction graph, the ordered sections and spans."""

    n: int
    size: np.ndarray
    align: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    adj_ptr: np.ndarray
    adj_idx: np.ndarray
    adj_kind: np.ndarray
    sec_ptr: np.ndarray
    sec_vars: np.ndarray
    vsec_ptr: np.ndarray
    vsecs: np.ndarray
    span_lo: np.ndarray
    span_hi: np.ndarray
    by_lo: np.ndarray
    lo_idx: np.ndarray
    width: np.ndarray
    area: np.ndarray
    has_elem: np.ndarray
    has_reg: np.ndarray
    need: np.ndarray
    elem_starts: np.ndarray
    pair_i: np.ndarray  # element / region partners i < k, with all their interaction bits
    pair_k: np.ndarray
    pair_kind: np.ndarray
    ils: int
    nrs: bool
    sections_from: str  # "lifetimes", "interval", "chordal" or "cliques"
    grain: int  # see _grain
    rank: np.ndarray  # the last tie-break of every static order (see _canonical_rank)

    @property
    def num_sections(self) -> int:
        return len(self.sec_ptr) - 1


_CACHE: list = []  # [(weakref to problem, model)]: the driver calls repeatedly per problem


def _model_of(p: TileProblem) -> _Model:
    for ref, sm in _CACHE:
        if ref() is p:
            return sm
    sm = build_model(p)
    _CACHE.insert(0, (weakref.ref(p), sm))
    del _CACHE[8:]
    return sm


def build_model(p: TileProblem) -> _Model:
    """The search arrays of ``p`` (independent of the capacity asked for)."""
    n = p.n
    size = np.maximum(p.size.astype(np.int64), 1)
    ep_ptr, rp_ptr = p.element_adj[0], p.region_adj[0]
    adj_ptr, udst, ukind = K.interaction_csr(n, *p.conflicts.conflict_csr(), *p.element_adj,
                                             *p.region_adj)

    sec_ptr, sec_vars, width, how = _sections(p, size)
    sec_ptr, sec_vars = _with_window_groups(sec_ptr, sec_vars, p.lo.astype(np.int64),
                                            p.hi.astype(np.int64))
    # spans: interval of the sections each variable is in, grown so interacting spans meet
    S = len(sec_ptr) - 1
    vsec_ptr, vsecs, span_lo, span_hi = K.sections_of_variables(n, sec_ptr, sec_vars)
    if n and np.any(span_hi <= span_lo):
        raise AssertionError("a variable is in no section")
    K.extend_spans(span_lo, span_hi, adj_ptr, udst)
    by_lo = np.argsort(span_lo, kind="stable").astype(np.int64)
    lo_idx = np.searchsorted(span_lo[by_lo], np.arange(S + 1)).astype(np.int64)

    has_elem = (np.diff(ep_ptr) > 0).astype(np.int64)
    has_reg = (np.diff(rp_ptr) > 0).astype(np.int64)
    pair_i, pair_k, pair_kind = K.partner_entries(adj_ptr, udst, ukind, ep_ptr, rp_ptr)
    deg = np.diff(adj_ptr)
    need = 2 + deg  # trail records one placement may write (its own and its neighbours')
    t = p.target
    elem_starts = element_bounds(p)
    return _Model(
        n=n, size=size, align=p.align.astype(np.int64), lo=p.lo.astype(np.int64),
        hi=p.hi.astype(np.int64), adj_ptr=adj_ptr, adj_idx=np.asarray(udst, np.int64),
        adj_kind=np.asarray(ukind, np.int64), sec_ptr=sec_ptr, sec_vars=sec_vars,
        vsec_ptr=vsec_ptr, vsecs=vsecs, span_lo=span_lo, span_hi=span_hi,
        by_lo=by_lo, lo_idx=lo_idx, width=width, area=width * size, has_elem=has_elem,
        has_reg=has_reg, need=np.asarray(need, np.int64), elem_starts=elem_starts,
        pair_i=pair_i, pair_k=pair_k, pair_kind=pair_kind,
        ils=int(t.interleaved_memory_start), nrs=bool(p.rules.no_region_span),
        sections_from=how,
        grain=_grain(size, p.lo.astype(np.int64), p.align.astype(np.int64),
                     int(t.interleaved_memory_start), elem_starts),
        rank=_canonical_rank(n, size, p, width, has_elem, has_reg, adj_ptr, udst, ukind))


def _sections(p: TileProblem, size: np.ndarray):
    """Ordered cliques of the conflict graph as CSR ``(ptr, members)``, each section's
    variables increasing (every variable in at least one; always-live variables in all),
    each variable's "width" for the static orders, and where the sections came from:

    - "lifetimes": maximal cross-sections of the class steps, when every two variables live
      together conflict (then each cross-section is a clique);
    - "interval": the maximal cliques of the class graph in a consecutive order when it is an
      interval graph: read off the report's interval model when the problem carries one
      (``TileProblem.intervals``), else recognised for the tile
      (``tilemem.liveness.intervals.clique_path``, verified): the same sections as the
      lifetimes would give, up to the order's reversal and what the graph leaves open;
    - "chordal": the maximal cliques of a chordal class graph along a clique tree
      (``tilemem.liveness.intervals.tree_order``);
    - "cliques": otherwise a greedy clique cover of the class graph.

    Of an order and its reverse the one whose sequence of section sizes is smaller comes
    out (``_canonical_orientation``), so time running backwards changes nothing.
    """
    n = p.n
    tc = p.conflicts
    al = tc.always_live.astype(bool)
    live = np.flatnonzero(al)
    rest = np.flatnonzero(~al)
    if n == 0:
        return np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), "none"
    csr, how, width = None, "cliques", None   # csr: (ptr, members), always-live left out
    if len(rest) and p.lifetimes is not None:
        lt = np.asarray(p.lifetimes, np.int64)
        csr = _time_sections(p, rest, lt[rest], verify=True)
        if csr is not None:
            how = "lifetimes"
            width = lt[:, 1] - lt[:, 0]
    if csr is None and len(rest) and p.intervals is not None:
        # the report's interval model, read off for this tile: the same sections as the
        # tile's own graph gives below, without recognising it again
        csr = _time_sections(p, rest, np.asarray(p.intervals, np.int64)[rest], verify=False)
        if csr is not None:
            how = "interval"   # positions, not times: width counts sections
    if csr is None:
        secs = None
        if len(rest):
            got = _class_sections(p, rest, size)
            if got is not None:  # positions are not times: width counts sections
                secs, how = got
        if secs is None:
            secs = _clique_sections(p, rest) if len(rest) else []
        csr = _csr_of(secs or [np.zeros(0, np.int64)])
    ptr, flat = _canonical_orientation(*csr, size)
    ptr, flat = K.merge_into_sections(ptr, flat, live.astype(np.int64))
    count = np.bincount(flat, minlength=n)
    width = count if width is None else np.where(al, count, width)
    return ptr, flat, np.maximum(width, 1).astype(np.int64), how


def _csr_of(secs) -> tuple[np.ndarray, np.ndarray]:
    """Sections given as arrays, as CSR with each section's members in increasing order."""
    ptr = np.zeros(len(secs) + 1, np.int64)
    np.cumsum([len(x) for x in secs], out=ptr[1:])
    flat = np.concatenate([np.sort(np.asarray(x, np.int64)) for x in secs])
    return ptr, flat.astype(np.int64)


def _with_window_groups(sec_ptr, sec_vars, lo, hi):
    """Each section followed by its members that must end by an earlier window end, or start
    at or after a later window start, than the others (e.g. code below the interleaved
    region, interleaved variables above it): sub-cliques with their own capacity check.
    Sections as CSR ``(ptr, members)`` in and out."""
    if len(lo) == 0 or (np.all(hi == hi[0]) and np.all(lo == lo[0])):
        return sec_ptr, sec_vars  # one window for all: no sub-cliques
    if len(sec_ptr) < 2:
        return sec_ptr, sec_vars
    return _window_groups(sec_ptr, sec_vars, lo, hi, np.unique(hi), np.unique(lo))


@njit(cache=True)
def _window_groups(sec_ptr, sec_vars, lo, hi, his, los):
    """``_with_window_groups`` over CSR sections, compiled (``his``/``los``: the distinct
    window ends / starts, ascending): per section, the section, then for each window end
    ``d`` its members have below their largest, the members ending by ``d`` (when more
    than one), then likewise for each window start above their smallest."""
    S = len(sec_ptr) - 1
    total = sec_ptr[S] * (len(his) + len(los) - 1)
    members = np.empty(total, np.int64)
    ptr = np.empty(S * (len(his) + len(los) - 1) + 1, np.int64)
    ptr[0] = 0
    k = 0  # groups written
    w = 0  # members written
    for s in range(S):
        a, b = sec_ptr[s], sec_ptr[s + 1]
        for q in range(a, b):
            members[w] = sec_vars[q]
            w += 1
        k += 1
        ptr[k] = w
        hmax = hi[sec_vars[a]]
        lmin = lo[sec_vars[a]]
        for q in range(a, b):
            hmax = max(hmax, hi[sec_vars[q]])
            lmin = min(lmin, lo[sec_vars[q]])
        for d in his:
            if d >= hmax:
                break
            present = False
            count = 0
            for q in range(a, b):
                h = hi[sec_vars[q]]
                present |= h == d
                count += h <= d
            if present and count > 1:
                for q in range(a, b):
                    if hi[sec_vars[q]] <= d:
                        members[w] = sec_vars[q]
                        w += 1
                k += 1
                ptr[k] = w
        for r in los:
            if r <= lmin:
                continue
            present = False
            count = 0
            for q in range(a, b):
                x = lo[sec_vars[q]]
                present |= x == r
                count += x >= r
            if present and count > 1:
                for q in range(a, b):
                    if lo[sec_vars[q]] >= r:
                        members[w] = sec_vars[q]
                        w += 1
                k += 1
                ptr[k] = w
    return ptr[:k + 1].copy(), members[:w].copy()


def _class_sections(p: TileProblem, rest: np.ndarray, size: np.ndarray):
    """``(sections, how)``: the ordered maximal cliques of the graph of the classes of
    ``rest`` (``tilemem.liveness.intervals.ordered_cliques``: "interval" or "chordal"), each as the
    array of its variables in ``rest``; None when the graph is not chordal.

    The classes are first numbered in a canonical order (colour refinement from each class's
    bytes and variable count), so that every tie the graph algorithms break by number is
    broken the same way however the report numbers its classes."""
    from ..liveness.intervals import canonical_numbering, ordered_cliques

    tc = p.conflicts
    nc = len(tc.classes)
    cls = tc.local_class[rest]
    used = np.zeros(nc, bool)
    used[cls] = True
    ids = np.flatnonzero(used)
    new = np.full(nc, -1, np.int64)
    new[ids] = np.arange(len(ids))
    src = tc.class_adj.row_ids()
    dst = tc.class_adj.indices
    keep = used[src] & used[dst] & (src != dst)
    a, b = new[src[keep]], new[dst[keep]]
    k = len(ids)
    key = _sorted_unique(a * k + b)
    a, b = key // k, key % k
    indptr = np.zeros(k + 1, np.int64)
    np.cumsum(np.bincount(a, minlength=k), out=indptr[1:])
    labels = np.stack([np.bincount(new[cls], weights=size[rest], minlength=k),
                       np.bincount(new[cls], minlength=k)], axis=1)
    canon, cptr, cidx = canonical_numbering(indptr, b, labels)  # canon[j]: class numbered j
    got = ordered_cliques(cptr, cidx)
    if got is None:
        return None
    ptr, members, how = got
    members = canon[members]
    # each clique's variables: the variables of its classes, one after the other
    vars_of = rest[np.argsort(new[cls], kind="stable")]
    per_class = np.bincount(new[cls], minlength=k)
    vptr = np.zeros(k + 1, np.int64)
    np.cumsum(per_class, out=vptr[1:])
    cnt = per_class[members]
    flat = vars_of[np.repeat(vptr[members] - np.cumsum(cnt) + cnt, cnt)
                   + np.arange(cnt.sum())]
    bounds = np.zeros(len(ptr), np.int64)
    np.cumsum(np.add.reduceat(cnt, ptr[:-1]) if len(cnt) else [], out=bounds[1:])
    return np.split(flat, bounds[1:-1]), how


def _sorted_unique(x: np.ndarray) -> np.ndarray:
    """``np.unique`` of an int64 array, by sorting (much faster here than its hash path)."""
    x = np.sort(x)
    keep = np.ones(len(x), bool)
    keep[1:] = x[1:] != x[:-1]
    return x[keep]


def _canonical_orientation(ptr, members, size):
    """The sections ``(ptr, members)`` or their reverse, whichever has the smaller sequence of
    (bytes, count) per section: the same for a problem and its mirror image (time
    reversed)."""
    cs = np.concatenate([[0], np.cumsum(size[members])]) if len(members) else np.zeros(1)
    nbytes = (cs[ptr[1:]] - cs[ptr[:-1]]).astype(np.int64).tolist()
    sig = list(zip(nbytes, np.diff(ptr).tolist()))
    return K.reverse_sections(ptr, members) if sig[::-1] < sig else (ptr, members)


#: Interactions above which the canonical rank uses the variables' own attributes only.
RANK_REFINE_MAX = 4_000_000


def _canonical_rank(n, size, p, width, has_elem, has_reg, adj_ptr, adj_idx, adj_kind):
    """A strict order of the variables (``rank[i]``: 0 first) that follows their content --
    size, alignment, window, width, constraints and, by colour refinement
    (``tilemem.liveness.intervals.refine_colours``), the same of their interaction partners -- so that
    renumbering variables or classes does not change the search; only variables that
    refinement cannot tell apart (almost always interchangeable) keep their index order."""
    if n == 0:
        return np.zeros(0, np.int64)
    labels = np.stack([size, p.align, p.lo, p.hi, width, has_elem, has_reg], axis=1)
    from ..liveness.intervals import refine_colours

    rounds = 16 if len(adj_idx) <= RANK_REFINE_MAX else 0
    colour = refine_colours(adj_ptr, adj_idx, labels, adj_kind, rounds=rounds)
    rank = np.empty(n, np.int64)
    rank[np.lexsort((np.arange(n), colour))] = np.arange(n)
    return rank


def _time_sections(p: TileProblem, rest: np.ndarray, lt: np.ndarray, verify: bool):
    """Maximal cross-sections of the intervals ``lt`` of the variables ``rest``
    (``search_kernel.interval_sections``) as CSR ``(ptr, members)``, or None when an interval
    is empty or (``verify``) a cross-section is not a clique of the conflict graph."""
    start, end = lt[:, 0], lt[:, 1]
    if np.any(end <= start):
        return None
    adj = p.conflicts.class_matrix if verify else None
    if verify and adj is None:  # past the dense limit: not verified, so not used
        return None
    ptr, members = K.interval_sections(start.astype(np.int64), end.astype(np.int64),
                                       rest.astype(np.int64))
    if verify:
        cls = p.conflicts.local_class
        for s in range(len(ptr) - 1):
            c = np.unique(cls[members[ptr[s]:ptr[s + 1]]])
            if not adj[np.ix_(c, c)].all():
                return None
    return ptr, members


def _clique_sections(p: TileProblem, rest: np.ndarray):
    """A greedy edge clique cover of the class graph (of the classes of ``rest``), in reverse
    Cuthill-McKee order (which keeps spans short): from each class, cliques are grown until
    its edges are covered, preferring uncovered edges, then classes close in the order. At
    most ``4 x classes`` cliques: edges left over are still enforced pairwise."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    tc = p.conflicts
    nc = len(tc.classes)
    members = tc.class_members(always_live=False)
    present = np.array([len(x) > 0 for x in members], bool)
    ca = tc.class_adj
    g = csr_matrix((np.ones(ca.nnz, np.int8), ca.indices, ca.indptr), shape=(nc, nc))
    order = np.asarray(reverse_cuthill_mckee(g, symmetric_mode=True), np.int64)
    pos = np.empty(nc, np.int64)
    pos[order] = np.arange(nc)
    nbr = [{x for x in ca.row(c).tolist() if present[x] and x != c} for c in range(nc)]
    uncovered = [set(x) for x in nbr]
    in_clique = np.zeros(nc, bool)
    budget = 4 * int(present.sum())
    cliques = []
    for c in order.tolist():
        if not present[c]:
            continue
        while uncovered[c] and len(cliques) < budget:
            v = min(uncovered[c], key=lambda x: abs(pos[x] - pos[c]))
            clique = [c, v]
            cand = nbr[c] & nbr[v]
            while cand:
                w = min(cand, key=lambda x: (-sum(x in uncovered[y] for y in clique),
                                             abs(pos[x] - pos[c])))
                clique.append(w)
                cand &= nbr[w]
            for a in clique:
                uncovered[a].difference_update(clique)
            in_clique[clique] = True
            cliques.append(clique)
        if not in_clique[c]:
            in_clique[c] = True
            cliques.append([c])
    cliques.sort(key=lambda cl: (min(pos[x] for x in cl), max(pos[x] for x in cl)))
    cliques = [cliques[i] for i in _short_span_order(cliques, nc)]
    return [np.concatenate([members[y] for y in sorted(cl, key=pos.__getitem__)]).astype(np.int64)
            for cl in cliques]


def _short_span_order(cliques, nc, rounds: int = 12) -> list[int]:
    """An order of ``cliques`` (lists of classes) that keeps each class's cliques close
    together (short spans decompose sooner): barycentre sweeps from the given order -- a
    class sits at the mean position of its cliques, a clique at the mean of its classes --
    keeping the order with the least total span."""
    k = len(cliques)
    if k < 3:
        return list(range(k))
    cl_of = np.repeat(np.arange(k), [len(c) for c in cliques])
    cls = np.concatenate([np.asarray(c, np.int64) for c in cliques])
    cnt = np.maximum(np.bincount(cls, minlength=nc), 1)

    def total_span(order):
        pos = np.empty(k, np.int64)
        pos[order] = np.arange(k)
        p = pos[cl_of]
        hi = np.full(nc, -1, np.int64)
        lo = np.full(nc, k, np.int64)
        np.maximum.at(hi, cls, p)
        np.minimum.at(lo, cls, p)
        used = hi >= 0
        return int((hi[used] - lo[used]).sum())

    order = np.arange(k)
    best, best_cost = order, total_span(order)
    for _ in range(rounds):
        pos = np.empty(k, np.float64)
        pos[order] = np.arange(k)
        class_pos = np.bincount(cls, weights=pos[cl_of], minlength=nc) / cnt
        clique_pos = np.bincount(cl_of, weights=class_pos[cls], minlength=k) / np.bincount(cl_of)
        order = np.lexsort((pos, clique_pos))
        cost = total_span(order)
        if cost < best_cost:
            best, best_cost = order, cost
    return best.tolist()


# ---- one capacity: state, reset and resumable runs -----------------------------------------

class _Run:
    """State of the search for one capacity; ``reset`` starts a new restart."""

    SLICE = 256  # nodes between clock checks (adapts to keep a slice between 10 and 40 ms)

    def __init__(self, sm: _Model, cap: int):
        self.sm = sm
        self.cap = cap
        n, S = sm.n, sm.num_sections
        self.verdict = None
        self.node_cap: int | None = None  # max_nodes of the call (None: the clock decides)
        self.try_limit = K.INF  # candidates tried in one restart (see K.R_TRY_LIMIT)
        self.nodes_used = 0
        tm = int(sm.elem_starts[-1])
        # past tileMemory: the overflow zone, searched only when the capacity reaches past it
        self.zone = cap > tm
        g = sm.grain  # ends of left-justified placements are multiples of it
        if self.zone:  # placements may also start at tileMemory, where the zone begins
            g = _aligned_grain(np.gcd(g, tm), sm.align)
        hi = np.minimum(sm.hi, cap) // g * g
        self.geo = np.array([sm.ils, int(sm.nrs), tm], np.int64)
        self.zone_cap = cap // g * g if self.zone else None  # see search_kernel.G_ILS
        m0 = _norm0(sm, hi, self.geo, self.zone_cap)
        if n and np.any(m0 >= K.INF):
            self.verdict = "infeasible"
            return
        self.hi = hi
        self.m0 = m0
        if n == 0:
            self.verdict = "optimal"
            self.sol = np.zeros(0, np.int64)
            return
        sv = sm.sec_vars
        starts = sm.sec_ptr[:-1]
        self.total0 = np.add.reduceat(sm.size[sv], starts) if len(sv) else np.zeros(S, np.int64)
        floor0 = np.minimum.reduceat(m0[sv], starts)
        self.wit0 = starts.astype(np.int64)  # positions in sec_vars
        self.sec_cap = np.minimum(np.maximum.reduceat(hi[sv], starts), cap // g * g)
        if self.zone:  # anything may go past tileMemory, up to the capacity
            self.sec_cap[:] = cap // g * g
        if np.any(floor0 + self.total0 > self.sec_cap):
            self.verdict = "infeasible"
            return
        cnt = np.zeros(S + 1, np.int64)
        np.add.at(cnt, sm.span_lo, 1)
        np.add.at(cnt, sm.span_hi - 1, -1)
        self.cuts0 = np.cumsum(cnt)[:max(S - 1, 0)].astype(np.int64)
        # the independent parts at the start
        bounds = np.flatnonzero(self.cuts0 == 0) + 1
        edges = np.concatenate([[0], bounds, [S]])
        self.parts0 = np.stack([edges[:-1], edges[1:]], axis=1).astype(np.int64)
        self.random_key = np.zeros(n, np.int64)  # the "R" key, set before each round
        self.model = (sm.size, sm.align, sm.lo, hi, sm.adj_ptr, sm.adj_idx, sm.adj_kind,
                      sm.sec_ptr, sm.sec_vars, self.sec_cap, sm.vsec_ptr, sm.vsecs, sm.span_lo,
                      sm.span_hi, sm.by_lo, sm.lo_idx, sm.width, sm.area, sm.has_elem,
                      sm.has_reg, sm.need, sm.elem_starts, self.random_key, sm.pair_i,
                      sm.pair_k, sm.pair_kind, self.geo)
        depth = 2 * n + 8
        trail_cap = int(max(4096, 4 * sm.need.max() + 16 * n))  # grows on demand
        self.state = [
            np.full(n, -1, np.int64), m0.copy(), np.zeros(n, np.int64),  # off, m, pre
            self.total0.copy(), self.wit0.copy(), self.cuts0.copy(),  # total, witness, cuts
            np.full(n, -1, np.int64),  # sol
            np.zeros((trail_cap, 3), np.int64),  # trail
            np.zeros((depth, K.NUM_FIELDS), np.int64),  # frames
            np.zeros((S + 2 * n + 8, 2), np.int64),  # pieces
            np.zeros(K.NUM_REGS, np.int64),  # registers
            np.zeros(n, np.int64), np.zeros(n, np.int64),  # scratch
            sv[self.wit0].astype(np.int64),  # the witnesses' variables
        ]

    def reset(self):
        st = self.state
        st[0][:] = -1
        st[1][:] = self.m0
        st[2][:] = 0
        st[3][:] = self.total0
        st[4][:] = self.wit0
        st[13][:] = self.sm.sec_vars[self.wit0]
        st[5][:] = self.cuts0
        st[6][:] = -1
        reg = st[10]
        reg[:] = 0
        reg[K.R_TRY_LIMIT] = self.try_limit
        np_ = len(self.parts0)
        st[9][:np_] = self.parts0
        reg[K.R_PT] = np_
        fr = st[8]
        fr[0, :] = 0
        fr[0, K.F_KIND] = K.DECOMP
        fr[0, K.F_P0] = 0
        fr[0, K.F_PN] = np_
        fr[0, K.F_PI] = 0
        fr[0, K.F_MARK] = 0
        reg[K.R_SP] = 0
        reg[K.R_MODE] = K.ENTER

    def spent(self) -> bool:
        """Whether the node cap of the call (``max_nodes``) is used up."""
        return self.node_cap is not None and self.nodes_used >= self.node_cap

    def go(self, heur, limit, deadline):
        """Run one restart to its end, its node limit, the deadline or the call's node cap
        (then PAUSED)."""
        budget = self.SLICE
        reg = self.state[10]
        while True:
            if self.node_cap is not None:
                if self.spent():
                    return K.PAUSED
                # slices end exactly at the cap: how the work is sliced changes nothing
                budget = min(budget, self.node_cap - self.nodes_used)
            t = time.perf_counter()
            before = int(reg[K.R_NODES])
            status = K.run(self.model, tuple(self.state), heur, limit, budget, self.zone_cap)
            self.nodes_used += int(reg[K.R_NODES]) - before
            if status == K.NEED_TRAIL:
                tr = self.state[7]
                self.state[7] = np.concatenate([tr, np.zeros_like(tr)])
                continue
            if status != K.PAUSED:
                return status
            now = time.perf_counter()
            if now >= deadline:
                return K.PAUSED
            took = now - t
            if took < 0.01:
                budget *= 2
            elif took > 0.04 and budget > 64:
                budget //= 2

    def offsets(self) -> np.ndarray:
        if self.sm.n == 0:
            return np.zeros(0, np.int64)
        return self.state[6].copy()


def _norm0(sm: _Model, hi: np.ndarray, geo: np.ndarray, zone_cap) -> np.ndarray:
    """The lowest legal offset of every variable on its own (INF where it has none)."""
    return K.lowest_offsets(sm.size, sm.align, sm.lo, hi, geo, zone_cap)

