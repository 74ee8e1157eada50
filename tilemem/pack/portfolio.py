"""The exact portfolio: pack one tile as well as its time limit allows (``solve_tile``).

``solve_tile`` places a tile by replay (first fit in a given order) or the heuristic, lowers
it by the quick search (``tilemem.pack.quick``) when asked, or runs the exact portfolio
(``exact_portfolio``) from there: the compiled search
(``tilemem.pack.search``) to settle whether everything fits and to bisect on the end address,
a local search over placement orders (``heuristic.improve``), and CP-SAT
(``tilemem.pack.cpsat``) with the best allocation so far as its complete hint. Every allocation
a solver returns passes the guard (``tilemem.pack.guard.self_check``) before it is accepted; a
rejected one leaves the best valid allocation in place. A result is "optimal" when proven
(CP-SAT's proof, the search's bisection closed, or the lower bound met with nothing
overflowed), "feasible" when the time limit stopped the proof. On a big tile the portfolio
runs a fresh start (``tilemem.pack.fresh``), the quick search's descents and neighbourhoods
(``tilemem.pack.neighbourhood``) instead of the local search, the bisection and CP-SAT on
the whole tile. This module also keeps the portfolio's clock
(``_Clock``: the wall clock, or work at fixed rates in a deterministic run).

>>> from tilemem.model import Report
>>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0, 0, 0], size=[8, 8, 4],
...     alignment=[4, 4, 4], offset=[0, 0, 0], category=["variable"] * 3,
...     eq_class=[0, 0, 1], interference=[[1], [0]])
>>> res, off = solve_tile(TileProblem.from_report(r, 0), "exact", time_limit=5)
>>> res.status, res.total_including_gaps, res.bound
('optimal', 20, 20)
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from . import heuristic
from .bounds import TileBound, region_clique, simple_bound, window_bound
from .carry import CARRIED
from .cpsat import solve_cpsat
from .firstfit import first_fit
from .fresh import _fresh_start
from .guard import self_check
from .kinds import DEFAULTS, Pass, SearchStatus, Stage, Status
from .neighbourhood import NeighbourhoodResult, improve_by_neighbourhoods
from .params import DEFAULT_PARAMS, SolverParams
from .proof import fit_verdict, proof_seconds, prove_no_fit
from .problem import TileProblem
from .quick import NEAR, _meets, end_bound_after_infeasible, quick_search
from .result import TileResult, gap_of, joined_note, objective
from .search import solve_search


def solve_tile(p: TileProblem, method: str, *, hint: np.ndarray | None = None,
               replay_order: np.ndarray | None = None,
               time_limit: float = DEFAULTS.time_limit,
               seed: int = 0, cp_workers: int = 1, deterministic: bool = False,
               bound: tuple[int, bool] | None = None,
               given: np.ndarray | None = None,
               stop_gap: float | None = None,
               carried: tuple[int, np.ndarray] | None = None,
               stop_end: int | None = None,
               params: SolverParams = DEFAULT_PARAMS) -> tuple[TileResult, np.ndarray]:
    """Pack one tile problem; ``(result, local offsets)``.

    ``method``: "replay", "heuristic", "quick" (``quick_search`` from ``hint`` or from the
    heuristic, ``time_limit`` seconds), "near" (the same, stopped as soon as the end is within
    ``NEAR`` of the bound), "auto" or "exact" (the latter two run the exact
    portfolio from ``hint`` or from the heuristic), or "fit" (auto's exact portfolio, stopped
    as soon as the tile no longer overflows: the driver's first question on a tile that may
    fit, the end address left to later passes), or "carry" (``hint`` or ``carried``,
    whichever is better; no search). ``bound``: ``(bytes, exact)`` or a ``TileBound``
    (with the peak's padded bound), else computed from the problem alone. ``given``: an
    allocation the caller has (e.g. the report's own offsets): when it passes the guard and
    is better, it is what is returned,
    so a re-run is never worse than the valid allocation it was given. ``stop_gap``: "quick"
    stops as soon as the end is within this fraction of the bound (what "near" does at
    ``NEAR``). ``carried``: ``(tile, local offsets)``, an allocation carried over from a
    similar tile (``tilemem.pack.carry``): the start instead of ``hint`` or the heuristic's
    when it passes the guard and is better. ``stop_end``: "quick" also stops once the end is
    at or below this address (``tileMemory`` where the question is only whether the tile
    fits). ``params``: the solvers' tuning values, handed down to every move.
    """
    t0 = time.perf_counter()
    method = Pass(method)
    # the maximum live bytes and, when given, the peak's clique with the padding its
    # alignments force (``TileBound``)
    b, b_exact, pb, pb_vars = TileBound.of(bound if bound is not None else simple_bound(p))
    # all four are valid lower bounds on the end address of an allocation that fits
    rb, rb_vars = region_clique(p)
    lower = max(int(b), window_bound(p), rb, pb)
    note = ""
    ran_exact = ran_quick = hint_given = False
    moves = _Moves()
    if method is Pass.REPLAY:
        off = first_fit(p, replay_order)
        status = Status.REPLAY
    else:
        hint_given = hint is not None
        carried_off = None
        if carried is not None and len(carried[1]) == p.n and p.n:
            c = np.asarray(carried[1], np.int64)
            carried_off = c if self_check(p, c) else None
        quick_start = method in (Pass.QUICK, Pass.NEAR)
        target = _quick_target(lower, NEAR if method is Pass.NEAR else stop_gap, stop_end)
        if (hint is None and quick_start and carried_off is not None and target is not None
                and _meets(p, carried_off, target)):
            # a carried allocation the quick search would stop at as it is: no heuristic
            # (its first fit cost a tile that rides its neighbour's allocation about a
            # quarter of its time, for a start it would not search from)
            hint, note = carried_off, f"{CARRIED} {carried[0]}"
            hint_given = True   # a search's allocation (the other tile's)
        if hint is None:
            extra = [replay_order] if replay_order is not None else []
            # before the quick search, which replaces the heuristic's allocation on almost
            # every tile, only the report's order and the first of the heuristic's; with a
            # valid carried allocation the report's order alone (``hint_orders - 1``: the
            # carried one starts where the neighbour's search ended, so the heuristic's first
            # order seldom beats both it and the report's order; only when it is within twice
            # ``NEAR``: where neighbours are not alike it is a plain first fit)
            # (a first pass whose share is spent too: the heuristic's full orders would cost
            # the budget what a report of many tiles does not have)
            orders = params.hint_orders if quick_start else None
            if quick_start and carried_off is not None and extra and _meets(
                    p, carried_off, lower + int(lower * (2 * NEAR))):
                orders = params.hint_orders - 1
            h = heuristic.heuristic_runs(p, bound=lower, extra_orders=extra,
                                         orders=orders)
            hint, note = h.offsets, h.name
        if carried_off is not None and objective(p, carried_off) < objective(p, hint):
            hint, note = carried_off, f"{CARRIED} {carried[0]}"
            hint_given = True   # a search's allocation (the other tile's)
        off = hint
        status = Status.OPTIMAL if _meets(p, off, lower) else Status.HEURISTIC
        if quick_start and status != Status.OPTIMAL and time_limit > 0.01:
            ran_quick = True
            q = moves.run("quick search", lambda: quick_search(
                p, off, lower, time_limit, seed, target=target, params=params))
            if q is not None:
                off, status, lower = q.offsets, q.status, q.bound
                note = joined_note(note, q.note, sep=",")
        if method in (Pass.AUTO, Pass.EXACT, Pass.FIT) \
                and (method is Pass.EXACT or status != Status.OPTIMAL):
            ran_exact = True
            e = moves.run("exact portfolio", lambda: exact_portfolio(
                p, off, lower, time_limit, seed, cp_workers, deterministic,
                polish=method is Pass.EXACT, fit_only=method is Pass.FIT,
                stop_gap=stop_gap if method is Pass.AUTO else None, params=params))
            if e is not None:
                off, status, note, lower = e.offsets, e.status, e.note, e.bound
                moves.failed.extend(e.failed)   # its moves that failed are the tile's too
    if given is not None and len(given) == p.n and p.n:
        own = np.asarray(given, np.int64)
        if objective(p, own) < objective(p, off) and self_check(p, own):
            off, note = own, joined_note(note, "the report's own offsets are better", sep=",")
            status = Status.OPTIMAL if _meets(p, off, lower) else status
    over, total, _, _ = objective(p, off)
    proven_on = None
    if over and b <= p.capacity:
        # the live data fits but no allocation found does: is there one? (a proof on part
        # of the tile that none is; "undecided" otherwise)
        if rb > p.capacity:
            # the interleaved data live together do not fit in the interleaved region
            proven_on = rb_vars
        elif pb > p.capacity:
            # the data live at the peak fit, but not with the padding their alignments force
            proven_on = pb_vars
        elif lower > p.capacity:
            # the search exhausted every capacity up to tileMemory on the whole tile
            proven_on = p.n
        elif ran_exact and p.n > 1:
            proven_on = moves.run("proof", lambda: prove_no_fit(
                p, proof_seconds(params, time_limit), params=params))
        if proven_on is not None:
            note = joined_note(note, f"no fit proven on {proven_on:,} variables", sep=",")
    # a move that failed cost only itself: the tile keeps its best
    note = joined_note(note, *moves.notes, sep=",")
    # the stage whose allocation is kept: passes are internal ("near" is the quick search)
    if method in (Pass.REPLAY, Pass.HEURISTIC):
        used = Stage(method)
    elif method in (Pass.QUICK, Pass.NEAR, Pass.CARRY):
        # a first pass whose budget was spent is the heuristic's allocation
        used = Stage.QUICK if ran_quick or hint_given else Stage.HEURISTIC
    else:
        used = Stage.EXACT if ran_exact else Stage.HEURISTIC
    res = TileResult(tile=p.tile, method=used, status=status, overflow_bytes=over,
                     total_including_gaps=total, bound=lower, bound_exact=bool(b_exact),
                     gap=gap_of(total, lower), seconds=time.perf_counter() - t0,
                     num_vars=p.n, note=note,
                     verdict=fit_verdict(over, int(b), p.capacity, proven_on),
                     proven_on=proven_on, failed=tuple(moves.failed))
    return res, off


def _status(p: TileProblem, best: np.ndarray, lower: int, proven: bool = False) -> Status:
    """OPTIMAL when proven or at the bound, else FEASIBLE (the exact portfolio's result)."""
    return Status.OPTIMAL if proven or _meets(p, best, lower) else Status.FEASIBLE


def _quick_target(lower: int, stop_gap: float | None, stop_end: int | None) -> int | None:
    """The end address at or below which the quick search stops: within ``stop_gap`` of the
    bound ``lower``, or at ``stop_end`` (where only fitting is asked), whichever is higher;
    None: as low as it gets.

    >>> _quick_target(1000, 0.01, None), _quick_target(1000, 0.01, 1200)
    (1010, 1200)
    >>> _quick_target(1000, None, None) is None
    True
    """
    target = None if stop_gap is None else lower + int(lower * stop_gap)
    if stop_end is not None:
        target = max(stop_end, target or 0)
    return target


def exact_portfolio(p: TileProblem, hint: np.ndarray, bound: int, time_limit: float, seed: int = 0,
                    cp_workers: int = 1, deterministic: bool = False,
                    polish: bool = False, fit_only: bool = False,
                    stop_gap: float | None = None,
                    params: SolverParams = DEFAULT_PARAMS) -> PortfolioOutcome:
    """The exact portfolio from a valid ``hint``: a ``PortfolioOutcome`` (offsets, status,
    note, the bound, raised where a probe proved a capacity infeasible, and the moves that
    failed).

    Within ``time_limit`` seconds, in turn (the shares: ``params.fit_share`` and
    ``params.exact_split``):

    1. when the hint overflows, the compiled search (if installed) decides whether everything
       fits in memory (up to half the time);
    2. local search over placement orders (``heuristic.improve``; 40% of what is left): on big
       tiles it is what lowers the end address, where the exact methods rarely can in seconds;
    3. the search again, now minimising the end address: briefly C = the lower bound (before
       the local search: on exact fits this is the proof), then a bisection between the
       bound and the best end; an infeasible C raises the bound, a found allocation lowers
       the best; when the two meet the tile is proven optimal;
    4. CP-SAT for the rest, with the best allocation as its complete hint and the raised bound
       (always run with ``polish``, to lower the regions' high-water marks).

    A tile of ``params.big_tile`` variables or more (not ``deterministic``: these stop on the
    clock) goes from step 1 to the search's descents instead of steps 2-4: from a fresh
    start (``_fresh_start``, their whole share, ``params.fresh[0]``), the better of it and the
    hint kept (then, with time left, the descents from it: ``quick_search``), then
    neighbourhoods solved exactly (``tilemem.pack.neighbourhood``) for the rest of its time.

    ``stop_gap``: stop as soon as the end is within that fraction of the bound (a slice of
    the plan's exact move stops once it has closed half the tile's gap,
    ``tilemem.pack.run.plan``); a hint already within it comes back as it is.
    """
    clock = _Clock(deterministic)
    tm = p.capacity
    best = hint
    lower = int(bound)
    notes = []
    moves = _Moves(notes)   # a move that raises costs itself only: the tile keeps its best
    proven = False
    search = _search_function() if p.n else None

    def probe(cap, until):
        nonlocal best
        budget = until - clock.used()
        if budget <= 0.01:
            return SearchStatus.UNKNOWN
        try:
            if deterministic:   # a node budget: the same verdict on any machine
                rate = SEARCH_NODE_VARIABLES_PER_SECOND / max(p.n, 1)   # nodes a second
                r = search(p, time_limit=budget, hint=best, capacity=int(cap),
                           max_nodes=int(budget * rate), params=params)
                clock.charge(r.nodes / rate)
            else:
                r = search(p, time_limit=budget, hint=best, capacity=int(cap), params=params)
        except Exception as e:  # noqa: BLE001 - a failing probe must not lose the tile
            moves.failed_with("search", e)
            return SearchStatus.UNKNOWN
        if r.offsets is not None:
            cand = np.asarray(r.offsets, np.int64)
            if self_check(p, cand) and int((cand + p.size).max(initial=0)) <= cap:
                if objective(p, cand) < objective(p, best):
                    best = cand
                return SearchStatus.FOUND
            notes.append("search result rejected by self-check")
            return SearchStatus.UNKNOWN
        return r.status

    def done():
        return _meets(p, best, stop()) and not polish

    def stop():
        # the end a tile may stop at: its bound, or within ``stop_gap`` of it
        return lower if stop_gap is None else lower + int(lower * stop_gap)

    big = p.n >= params.big_tile and not deterministic
    if big and np.any(best >= tm) and lower <= tm:
        # would it fit? on a big tile the search's descents first (bottom-up and top-down,
        # stopped as soon as it fits): where the full search at tileMemory stalls, they
        # often find a fit
        t_q = time.perf_counter()
        q = moves.run("fit quick search", lambda: quick_search(
            p, best, lower, params.fit_share * time_limit, seed=seed + 11, target=tm,
            params=params))
        clock.charge(time.perf_counter() - t_q)
        if q is not None:
            best, lower = q.offsets, q.bound
            notes.append("fit " + q.note)
    if search is not None and np.any(best >= tm) and lower <= tm and not done():
        verdict = probe(tm, clock.used() + params.fit_share * (time_limit - clock.used()))
        notes.append(f"search fit {verdict}")
    if fit_only and not np.any(best >= tm):
        # it fits: the end address is left to the passes every tile gets
        return moves.outcome(best, _status(p, best, lower), lower)
    if big and not done():
        # a big tile, where the whole tile's exact models are out of reach (CP-SAT's is
        # skipped as too large, the bisection's probes stall): the search's descents with
        # most of the time (on a tile that fits), then neighbourhoods solved exactly
        if not np.any(best >= tm):
            share = params.fresh[0] * max(time_limit - clock.used(), 0.0)
            # first a fresh start, bottom-up, lowered by the quick search, with the whole
            # share (a fresh start's descents need a second or two to reach their lowest, and
            # descents from the better of the two after a shorter one seldom found anything);
            # then (with time left) the quick search from the better of it and the tile's
            t_q = time.perf_counter()
            fresh, fresh_note = moves.run("fresh start", lambda: _fresh_start(
                p, lower, share, seed + 3, target=None if stop_gap is None else stop(),
                params=params), (None, None))
            spent = time.perf_counter() - t_q
            clock.charge(spent)
            share = max(share - spent, 0.0)
            if fresh is not None and objective(p, fresh) < objective(p, best):
                best = fresh
                fresh_note += " (kept)"
            if fresh_note is not None:
                notes.append(fresh_note)
            t_q = time.perf_counter()
            # with the usual orders' descents, by turns, ones that place the variables
            # without an element partner first (the first pass ran the usual ones only and
            # left this tile above 1%: tiles held up by element pairs, see
            # ``partnerless_order``; the fresh start's own descents use the usual orders,
            # what was measured for it)
            if not done() and share > 0.01:
                q = moves.run("quick search", lambda: quick_search(
                    p, best, lower, share, seed=seed + 7, partnerless=True,
                    target=None if stop_gap is None else stop(), params=params))
                if q is not None:
                    best, lower = q.offsets, q.bound
                    notes.append(q.note)
            clock.charge(time.perf_counter() - t_q)
        if not done():
            t_q = time.perf_counter()
            res = moves.run("neighbourhoods", lambda: improve_by_neighbourhoods(
                p, best, lower, max(time_limit - clock.used(), 0.0), seed=seed,
                fit_only=fit_only, params=params))
            if res is None:
                res = NeighbourhoodResult(best, 0, 0, time.perf_counter() - t_q)
            else:
                notes.append(res.note)
            clock.charge(res.seconds)
            if objective(p, res.offsets) < objective(p, best):
                best = res.offsets
        return moves.outcome(best, _status(p, best, lower), lower)
    stalled_at_bound = False   # the probe at the bound could not tell: not repeated
    if search is not None and not np.any(best >= tm) and not done():
        # the bound itself first, briefly: on exact fits (MiniMalloc's instances) this is
        # the proof, and on the rest a short "unknown"
        verdict = probe(lower, clock.used() + params.exact_split[0] * (time_limit - clock.used()))
        if verdict == SearchStatus.INFEASIBLE:
            lower = end_bound_after_infeasible(p, lower)
        stalled_at_bound = verdict == SearchStatus.UNKNOWN
        notes.append(f"search at bound {verdict}")
    if not _meets(p, best, lower) and not done() and p.n > 1:
        share = params.exact_split[1] * (time_limit - clock.used())
        start = heuristic.HeuristicResult(best, "hint", np.argsort(best, kind="stable"), False)
        # deterministic: a budget of moves from the configured limit, not the clock
        its = (max(LOCAL_SEARCH_MOVES_PER_SECOND // 4,
                   int(LOCAL_SEARCH_MOVES_PER_SECOND * time_limit)) if deterministic else None)
        improved = moves.run("local search", lambda: heuristic.improve(
            p, start, time_limit=math.inf if deterministic else share, bound=lower, seed=seed,
            max_iterations=its, params=params))
        clock.charge(share)
        if improved is not None:
            res, it = improved
            if objective(p, res.offsets) < objective(p, best):
                best = res.offsets
            notes.append(f"local search {it} moves")
    if search is not None and not np.any(best >= tm) and not done():
        lo, hi = lower, objective(p, best)[1] - 1
        probe_lo = lo  # an "unknown" moves the probes up without proving anything
        first = not stalled_at_bound  # do not repeat a probe that stalled
        while probe_lo <= hi:
            cap = probe_lo if first else (probe_lo + hi) // 2
            left = params.exact_split[2] * time_limit - clock.used()
            if left <= 0.01:
                break
            verdict = probe(cap, clock.used() + params.exact_split[3 if first else 4] * left)
            first = False
            if verdict == SearchStatus.FOUND:
                hi = objective(p, best)[1] - 1
            elif verdict == SearchStatus.INFEASIBLE:
                lo, probe_lo = end_bound_after_infeasible(p, cap), cap + 1
            else:  # unknown at cap: look for a better allocation above it instead of stopping
                probe_lo = cap + 1
        lower = max(lower, lo)
        proven = lo > hi
        notes.append(f"search end {'proven' if proven else 'open'} "
                     f"[{lower:,}, {objective(p, best)[1]:,}]")
    if done() or (proven and not polish):
        return moves.outcome(best, _status(p, best, lower, proven), lower)
    left = time_limit - clock.used()
    if left > 0.05 or polish:
        res = moves.run("cp-sat", lambda: solve_cpsat(
            p, hint=best, time_limit=max(left, 0.1), bound=lower,
            allow_overflow=bool(np.any(best >= tm)), workers=cp_workers, seed=seed,
            deterministic=deterministic, polish=polish, params=params))
        if res is not None:
            notes.append(f"cp-sat {res.status} ({res.note})")
        if res is not None and res.offsets is not None:
            cand = np.asarray(res.offsets, np.int64)
            if self_check(p, cand):
                if objective(p, cand) <= objective(p, best):
                    best = cand
                    proven |= res.status == SearchStatus.OPTIMAL
            else:
                notes.append("cp-sat result rejected by self-check")
    return moves.outcome(best, _status(p, best, lower, proven), lower)


#: Deterministic runs measure the compiled search's work in nodes; a node costs about as much
#: as the tile has variables, so a second of time limit buys this many nodes x variables:
#: the lower end of the rates measured, which keeps a deterministic run near its clocked
#: time.
SEARCH_NODE_VARIABLES_PER_SECOND = 5_000_000
#: And the local search's in moves: this many a second of time limit (at least a quarter
#: second's). Both are measured rates, not tuning values (``SolverParams`` holds those).
LOCAL_SEARCH_MOVES_PER_SECOND = 40


@dataclass(frozen=True)
class PortfolioOutcome:
    """What the exact portfolio leaves: the best valid ``offsets``, their status, a note
    (for people), the ``bound`` (raised where the search proved a capacity infeasible) and
    ``failed``: the moves that raised an exception (each cost only itself; the note says
    what it raised), e.g. ``("cp-sat",)``."""

    offsets: np.ndarray
    status: Status
    note: str
    bound: int
    failed: tuple[str, ...] = ()


class _Moves:
    """The portfolio's moves run so that an exception inside one (the search, CP-SAT, the
    neighbourhoods, a fresh start, the quick search, the local search, a proof) costs that
    move, never the run: the caller keeps its best valid allocation, ``failed`` names the
    move and ``notes`` (shared with the caller's) say what it raised.

    Why: the solvers are large (numba kernels, OR-Tools); one that raises on a corner case
    (OR-Tools 9.15's presolve on some hinted models) would otherwise stop a whole run for
    one tile's move."""

    def __init__(self, notes: list[str] | None = None):
        self.notes = [] if notes is None else notes
        self.failed: list[str] = []

    def run(self, name: str, call, default=None):
        """``call()``, or ``default`` when it raises (recorded as ``name`` failing)."""
        try:
            return call()
        except Exception as e:  # noqa: BLE001 - any solver error costs the move only
            self.failed_with(name, e)
            return default

    def failed_with(self, name: str, e: Exception) -> None:
        first_line = (str(e).strip().splitlines() or [""])[0][:120]
        self.failed.append(name)
        self.notes.append(f"{name} failed: {type(e).__name__}: {first_line}")

    def outcome(self, best: np.ndarray, status: Status, lower: int) -> PortfolioOutcome:
        return PortfolioOutcome(best, status, joined_note(*self.notes, sep=","), lower,
                                tuple(self.failed))


class _Clock:
    """Seconds of a tile's time limit used so far: the wall clock, or in a deterministic run
    the work done at fixed rates (search nodes, local-search shares), so that every decision
    taken on the time left is the same on any machine and under any load."""

    def __init__(self, deterministic: bool):
        self.deterministic = deterministic
        self.t0 = time.perf_counter()
        self.work = 0.0

    def used(self) -> float:
        return self.work if self.deterministic else time.perf_counter() - self.t0

    def charge(self, seconds: float) -> None:
        self.work += float(seconds)


def _search_function():
    """The compiled exact search (a function, so that tests can stand in for it)."""
    return solve_search

