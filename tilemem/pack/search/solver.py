"""The solver: ``solve_search``, the exact search's API -- restarts over static orders, the
probe's short descents (the quick search's engine), the mirror (top-down) probe -- over a
``SearchRun`` per capacity. What a caller gets is a ``SearchResult``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from ..firstfit import first_fit
from ..guard import self_check
from ..kinds import SearchStatus
from ..mirror import mirror
from ..problem import TileProblem
from ..result import objective
from . import kernel as K
from ..params import DEFAULT_PARAMS, SolverParams
from .orders import (DEFAULT_ORDERINGS, PROBE_ORDERINGS, Descents, RandomRestarts, order_keys,
                     probe_limit, static_order)
from .run import SearchRun
from .sweep import SearchModel, mirrored_model_of, model_of


@dataclass(frozen=True)
class SearchResult:
    """``status`` (``SearchStatus``): OPTIMAL (``offsets`` place every variable below the
    capacity), INFEASIBLE (proved that none exists), UNKNOWN (time limit; ``offsets`` is
    None, or with ``probe`` the best valid allocation its failed descents were completed to,
    above the capacity)."""

    offsets: np.ndarray | None
    status: SearchStatus
    nodes: int
    seconds: float


def solve_search(problem: TileProblem, time_limit: float, hint: np.ndarray | None = None,
                 capacity: int | None = None, *,
                 orderings: tuple[str, ...] = DEFAULT_ORDERINGS, seed: int = 0,
                 randomized: bool = True, max_nodes: int | None = None,
                 probe: bool = False, enough: int | None = None,
                 mirrored: bool = False, repeat: bool = False,
                 partnerless: bool = False,
                 params: SolverParams = DEFAULT_PARAMS) -> SearchResult:
    """Place every variable of ``problem`` below ``capacity`` (default: tileMemory) with every
    rule respected, or prove it impossible, within ``time_limit`` seconds. A capacity past
    tileMemory opens the overflow zone: variables may then also go past tileMemory, where
    only alignment and no-overlap apply (never straddling it).

    ``orderings``: the static orders of each round, as letters (D end of the window
    ascending, then descending keys: W lifetime width, A area, T largest section total, Z
    size; R random, or ``hint``'s order by offset in the first round); every order ends with
    the canonical rank (``sweep._canonical_rank``). With ``randomized``, each round is followed by
    as many nodes of short restarts from perturbed orders (``RandomRestarts``) and by the
    probe's short descents (``Descents``: ``params.descents``, at least that many after the
    first round, then that share of each round's nodes). ``seed``
    makes the random orders repeatable. ``max_nodes``: stop after this many search nodes
    instead of at ``time_limit`` (the clock is then not read: the same call gives the same
    result on any machine, under any load). Repeated calls on the same problem object reuse its
    arrays (numba compiles once and caches). A ``hint`` (local offsets) that already places
    everything below ``capacity`` is returned as it is.

    ``probe``: look for a placement only, by short descents (``_probe``) until
    ``time_limit``; never proves anything, so UNKNOWN when none is found (with the best
    completion of a failed descent as ``offsets``: valid, but not below ``capacity``);
    ``enough``: an end address at which such a completion also ends the probe (nothing
    overflowed unless the capacity is past tileMemory).

    ``mirrored`` (with ``probe``): the probe runs on the problem with its addresses reversed
    below ``capacity`` (``tilemem.pack.mirror``: it fills memory from the top down) and its
    results are mapped back; it never proves anything (INFEASIBLE there is UNKNOWN).

    ``repeat`` (with ``probe``): the caller has probed this capacity (and direction) before,
    from the same ``hint``: the probe's static orders, which depend only on the problem, the
    capacity and the hint, would repeat the same descents, so it goes straight to perturbed
    orders drawn from ``seed``.

    ``partnerless`` (with ``probe``): every other descent places, among the candidates of
    each height, the variables without an element partner first (``partnerless_order``).
    """
    t0 = time.perf_counter()
    deadline = t0 + max(float(time_limit), 0.0)
    cap = problem.capacity if capacity is None else int(capacity)
    if mirrored:
        if not probe:
            raise ValueError("mirrored is a way to probe: it needs probe=True")
        return _probe_mirrored(problem, cap, hint, seed, deadline, enough, t0, repeat,
                               partnerless, params=params)
    sm = model_of(problem)
    if hint is not None and len(hint) == sm.n:
        h = np.asarray(hint, np.int64)
        if self_check(problem, h, capacity=cap):
            return SearchResult(offsets=h.copy(), status=SearchStatus.OPTIMAL, nodes=0,
                                seconds=time.perf_counter() - t0)
    run = SearchRun(sm, cap)
    if max_nodes is not None:
        run.node_cap = max(int(max_nodes), 1)
        deadline = float("inf")
    if run.verdict is not None:
        return _result(sm, run, run.verdict, 0, t0)
    rng = np.random.default_rng(seed)
    if probe:
        status, nodes, completed = _probe(problem, sm, run, hint, rng, deadline, enough,
                                          repeat=repeat, partnerless=partnerless,
                                          params=params)
        verdict = {K.FOUND: SearchStatus.OPTIMAL,
                   K.INFEASIBLE: SearchStatus.INFEASIBLE}.get(status, SearchStatus.UNKNOWN)
        res = _result(sm, run, verdict, nodes, t0)
        return res if verdict != SearchStatus.UNKNOWN else replace(res, offsets=completed)
    nodes = 0
    limit = max(sm.n, 1)
    first = True
    canonical = sm.n - sm.rank  # the R key is descending: rank 0 first
    restarts = RandomRestarts(sm, rng, params) if randomized else None
    # their own random orders: the complete rounds' restarts draw the same ones as without
    # them; the probe's orders the first round has run with the same keys are skipped
    # (an R order's key there is the hint's only when there is a hint)
    ran = {o for o in orderings if K.KEY_R not in order_keys(o) or hint is not None}
    descents = (Descents(sm, np.random.default_rng([seed, 1]), hint, skip=ran, params=params)
                if randomized else None)
    verdicts = {K.FOUND: SearchStatus.OPTIMAL, K.INFEASIBLE: SearchStatus.INFEASIBLE,
                K.PAUSED: SearchStatus.UNKNOWN}
    while True:
        limit *= 2
        # random keys are drawn per canonical position: renumbering changes nothing
        random_key = rng.permutation(sm.n)[sm.rank]
        if first and hint is not None and len(hint) == sm.n:  # descending: lowest offset first
            random_key = -np.asarray(hint, np.int64)
        first = False
        spent = 0
        for name in orderings:
            heur = static_order(run, name, random_key, canonical)
            run.reset()
            status = run.go(heur, limit, deadline)
            spent += run.nodes
            if status in verdicts:
                return _result(sm, run, verdicts[status], nodes + spent, t0)
        nodes += spent
        if restarts is not None:
            status, spent = restarts.run(run, spent, deadline)
            nodes += spent
            if status in verdicts:
                return _result(sm, run, verdicts[status], nodes, t0)
        if descents is not None:
            # after the first round (which decides the easy cases in a descent or two)
            # at least ``opening`` of them
            opening, share = params.descents[:2]
            budget = int(spent * share)
            if descents.i == 0:
                budget = max(budget, opening * probe_limit(sm.n, params))
            status, spent = descents.run(run, budget, deadline)
            nodes += spent
            if status in verdicts:
                return _result(sm, run, verdicts[status], nodes, t0)
        if time.perf_counter() >= deadline or run.spent():
            return _result(sm, run, SearchStatus.UNKNOWN, nodes, t0)


def _probe(p: TileProblem, sm: "SearchModel", run: "SearchRun", hint, rng, deadline: float,
           enough: int | None = None, to_p=None, repeat: bool = False,
           partnerless: bool = False,
           params: SolverParams = DEFAULT_PARAMS) -> tuple[int, int, np.ndarray | None]:
    """Short descents, each from another static order, until one places everything, the
    deadline passes or a failed descent's completion ends at or below ``enough``:
    ``(status, nodes, completed)``, status FOUND or ABORTED (or INFEASIBLE when a descent
    happened to exhaust the space); ``completed``: the best of the failed descents' partial
    placements completed by first fit (``_completion``), or None.

    Why: at a capacity a little above the optimum, a descent either places the tile with
    hardly any backtracking (about ``n`` nodes) or goes wrong early and then does not get
    out in any time worth waiting (a successful descent takes hardly more than ``n`` nodes;
    a failing one given twice that costs as much as many successful ones). Run times that
    heavy-tailed are what restarts are for (Gomes, Selman & Kautz 1998): cut every descent
    at ``probe_limit`` nodes and tries and change the order instead (then completed by
    first fit: ``_completion``). The orders: ``PROBE_ORDERINGS`` (the hint's first), then
    the perturbed orders of ``RandomRestarts`` (where the first orders fail, another
    within a few descents mostly succeeds). ``repeat``: the static orders ran before at
    this capacity from this hint, so only perturbed ones.
    ``partnerless``: every other descent with ``partnerless_order``.
    """
    nodes = 0
    descents = Descents(sm, rng, hint, skip=PROBE_ORDERINGS if repeat else frozenset(),
                         partnerless=partnerless, params=params)
    limit = descents.limit
    run.try_limit = limit  # a descent gone wrong tries many candidates a node: cut it too
    completed, best = None, None
    while True:
        if descents.i >= len(descents.orders) and time.perf_counter() >= deadline:
            break
        heur = descents.next_order(run)
        run.reset()
        status = run.go(heur, limit, deadline)
        nodes += run.nodes
        if status in (K.FOUND, K.INFEASIBLE) or run.spent():
            return status, nodes, completed
        if status == K.ABORTED:
            partial = run.state.off if to_p is None else to_p(run.state.off)
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
                    enough: int | None, t0: float, repeat: bool = False,
                    partnerless: bool = False,
                    params: SolverParams = DEFAULT_PARAMS) -> SearchResult:
    """``solve_search(probe=True, mirrored=True)``: ``_probe`` on ``p``'s mirror below
    ``cap``, its results as ``p``'s offsets; OPTIMAL or UNKNOWN (see
    ``tilemem.pack.mirror``: the mirror's verdicts prove nothing about ``p``)."""
    m = mirror(p, cap)
    if m is None:
        return SearchResult(offsets=None, status=SearchStatus.UNKNOWN, nodes=0,
                            seconds=time.perf_counter() - t0)
    sm = mirrored_model_of(p, m.problem)   # the same mirrored problem for every cap
    run = SearchRun(sm, m.top, floor=m.floor)
    if run.verdict is not None:
        offsets = m.to_original(run.offsets()) if run.verdict == SearchStatus.OPTIMAL else None
        return SearchResult(offsets=offsets, status=SearchStatus.OPTIMAL if offsets is not None
                            else SearchStatus.UNKNOWN, nodes=0, seconds=time.perf_counter() - t0)
    h = m.from_original(hint) if hint is not None and len(hint) == sm.n else None
    status, nodes, completed = _probe(p, sm, run, h, np.random.default_rng(seed), deadline,
                                      enough, to_p=m.to_original, repeat=repeat,
                                      partnerless=partnerless, params=params)
    if status == K.FOUND:
        # pressed down again: packed from the top, it need not start at 0 (first fit in
        # offset order moves nothing up, see _completion)
        off = m.to_original(run.offsets())
        return SearchResult(offsets=first_fit(p, np.argsort(off, kind="stable")),
                            status=SearchStatus.OPTIMAL, nodes=nodes,
                            seconds=time.perf_counter() - t0)
    return SearchResult(offsets=completed, status=SearchStatus.UNKNOWN, nodes=nodes,
                        seconds=time.perf_counter() - t0)


def _completion(p: TileProblem, partial: np.ndarray) -> np.ndarray:
    """A valid allocation from an aborted descent's ``partial`` placement (-1: unplaced):
    first fit of the placed variables in offset order, then of the rest, largest first.

    Why: a descent that fails at a cap just above the optimum has mostly got stuck near
    the top with a few variables left, and first fit tucks them into the holes below or
    just over the cap: an allocation a little above the cap for milliseconds, where the
    descent found none. The placed variables keep their places or go lower: each one's
    offset in the descent stays legal, as everything first fit placed before it went there
    or lower and, if it interacts with it, lay below it in the descent.
    """
    placed = np.flatnonzero(partial >= 0)
    rest = np.flatnonzero(partial < 0)
    order = np.concatenate([placed[np.argsort(partial[placed], kind="stable")],
                            rest[np.argsort(-p.size[rest], kind="stable")]])
    return first_fit(p, order)


def warm_up(whole: bool = True, part: bool = True) -> None:
    """Compile the search's kernels (or load them from numba's cache) on a tiny problem, e.g.
    before forking workers or timing: ``whole``, the search on a whole tile; ``part``, its
    version with domains (the search on part of a tile). Two processes may compile one each
    at once (the test suite does)."""
    from ...model import Report
    from ...model.target import Target

    r = Report.from_columns(target=Target(1, 64, 32, np.array([0, 16, 32, 48])),
                            var_id=[0, 1, 2], tile=[0] * 3, size=[8, 8, 4], alignment=[4] * 3,
                            offset=[0] * 3, category=["variable"] * 3, eq_class=[0, 0, 1],
                            interference=[[], []], element_constraints=[[2], [], []],
                            region_constraints=[[], [2], []], executable=[True, False, False])
    p = TileProblem.from_report(r, 0)
    if whole:
        solve_search(p, time_limit=60, hint=np.zeros(3, np.int64))
    if part:
        # the kernel with domains (neighbourhoods; always its version with a zone,
        # SearchRun): compiled on first use it cost each worker of a run a minute or more of
        # its budget
        from .restrict import solve_restricted

        solve_restricted(p, np.array([0, 8, 64]), np.array([2]), 64, time_limit=60)


def _result(sm, run, status: SearchStatus, nodes, t0) -> SearchResult:
    offsets = None
    if status == SearchStatus.OPTIMAL:
        offsets = run.offsets()
    return SearchResult(offsets=offsets, status=status, nodes=nodes,
                        seconds=time.perf_counter() - t0)


