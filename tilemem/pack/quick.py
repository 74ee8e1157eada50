"""The quick search: the compiled search as a constructive method near the bound
(``quick_search``).

From a valid allocation, probes at caps a little above the tile's lower bound, bottom-up and
top-down (``tilemem.pack.mirror``), each a run of the search's short descents
(``tilemem.pack.search``); a placed probe is followed by a lower cap, a stalled one by a
looser cap. Every allocation passes the guard (``tilemem.pack.guard.self_check``) before it
is kept. The portfolio (``tilemem.pack.portfolio``) runs it as the "quick" and "near" methods
and on the exact stage's big tiles; it also speaks in this module's ``Outcome`` and ``NEAR``.
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from .guard import self_check
from .kinds import SearchStatus, Status
from .params import DEFAULT_PARAMS, SolverParams
from .problem import TileProblem
from .result import objective
from .search import solve_search



class Outcome(NamedTuple):
    """What a stage of the portfolio leaves: the best valid ``offsets``, their status, a
    note, and the ``bound``: the highest lower bound on the end address proven so far (the
    one given, raised where the search proved a capacity infeasible)."""

    offsets: np.ndarray
    status: Status
    note: str
    bound: int


def end_bound_after_infeasible(p: TileProblem, cap: int) -> int:
    """The lower bound on the end address that the search's "infeasible at ``cap``" proves.

    The search places a zero-size variable as one byte (as the guard does: two variables at
    one address would otherwise be judged apart by size alone), while the end address counts
    it as ending where it starts. So "nothing fits below ``cap``" proves an end of at least
    ``cap + 1`` only without zero-size variables; with them, one may end at ``cap`` itself
    (it would need ``[cap, cap + 1)``), so only ``cap`` is proven.

    >>> from tilemem.model import Report
    >>> def tile(sizes):
    ...     r = Report.from_columns(var_id=range(len(sizes)), tile=[0] * len(sizes),
    ...         size=sizes, alignment=[4] * len(sizes), offset=[0] * len(sizes),
    ...         category=["variable"] * len(sizes), eq_class=[0] * len(sizes),
    ...         interference=[[]])
    ...     return TileProblem.from_report(r, 0)
    >>> end_bound_after_infeasible(tile([8, 4]), 11), end_bound_after_infeasible(tile([8, 0]), 11)
    (12, 11)
    """
    return int(cap) + (0 if np.any(p.size == 0) else 1)


def _meets(p: TileProblem, off: np.ndarray, bound: int, overflow_ok: bool = False) -> bool:
    """``off`` ends at or below ``bound`` with nothing overflowed (``overflow_ok``: overflow
    allowed, for a tile whose bound itself is past tileMemory)."""
    over, total, _, _ = objective(p, off)
    return total <= bound and (over == 0 or overflow_ok)



#: How near the lower bound is near enough, as a fraction of it: the goal the project
#: measures (within 1 %), where the "near" method, the driver's first pass over every tile,
#: stops. A definition, not a tuning value (those are ``SolverParams``).
NEAR = 0.01


def quick_search(p: TileProblem, hint: np.ndarray, bound: int, time_limit: float,
                 seed: int = 0, target: int | None = None, partnerless: bool = False,
                 step: float | None = None,
                 params: SolverParams = DEFAULT_PARAMS) -> Outcome:
    """A better allocation than a valid ``hint`` in about ``time_limit`` seconds, from the
    compiled search used as a constructive method: an ``Outcome``, status
    OPTIMAL when the result ends at ``bound`` (with nothing overflowed, unless the bound
    itself is past tileMemory), else HEURISTIC.

    Asked for a cap slightly above the lower bound, the search's first descent (the lowest
    legal place first, left-justified, pruned by the sections' capacities) usually places a
    whole Mk2 tile within 1% of the bound with hardly any backtracking, where the greedy
    orders stay 2-5% above it (the sections keep the peak's variables from being scattered
    by earlier choices). So: a probe a little below ``bound`` + 1% (``params.caps``); one that stalls
    is given up and the cap loosened (to ``NEAR`` itself, then doubled above the bound); one
    that succeeds is followed by a probe
    halfway between the bound and what it reached, while time remains (and until the end is
    at or below ``target``, when given: a pass that should reach every tile stops there).
    Each probe is a run of short descents from different orders (``solve_search``'s
    ``probe``): a descent that goes wrong is abandoned, not backtracked for the rest of the
    time, and completed by first fit instead; a stalled probe's best completion is kept
    when it is better than what the quick search had. A probe that stalls is followed,
    before the cap is loosened, by one on the mirrored problem (``tilemem.pack.mirror``:
    top-down, where a tile whose interleaved region is as full as the tile is tight), at
    the same cap except the first, where it aims at ``NEAR`` itself: its placements are
    pressed down after the reversal, so they end at or below their cap, while the AIM
    below NEAR is for the bottom-up completions, which land above it. The search's
    arrays are built once (not counted in ``time_limit``: they cost about as much as one
    probe) and every result passes the guard. On a tile whose bound is past tileMemory the
    caps are past it too, and the search may place variables in the overflow zone
    (``solve_search``). ``partnerless``: every other descent of each probe places the
    variables without an element partner first (``tilemem.pack.search.partnerless_order``).
    ``step``: every cap that share of the way
    from the end reached down to the bound, the first one too (default: ``params.caps``' step, and
    the first cap its aim of ``NEAR``).

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0, 0, 0], size=[8, 8, 4],
    ...     alignment=[4, 4, 4], offset=[0, 0, 0], category=["variable"] * 3,
    ...     eq_class=[0, 0, 1], interference=[[1], [0]])
    >>> p = TileProblem.from_report(r, 0)
    >>> off, status, note, bound = quick_search(p, np.array([0, 12, 24]), 20, 1.0)
    >>> int((off + p.size).max()), status
    (20, 'optimal')
    """
    best = np.asarray(hint, np.int64)
    lower = int(bound)
    tm = p.capacity
    # a tile whose bound is past tileMemory overflows whatever we do: then the search places
    # past it too (its overflow zone), and the end address is what is lowered
    zone = lower > tm
    stop = lower if target is None else max(lower, target)
    if p.n < 2 or _meets(p, best, stop, zone):
        status = Status.OPTIMAL if _meets(p, best, lower, zone) else Status.HEURISTIC
        return Outcome(best, status, "quick search skipped", lower)
    from .search import model_of
    model_of(p)  # build the arrays before the clock starts (cached for later calls)
    deadline = time.perf_counter() + time_limit
    near = int(lower * NEAR)
    aim, step_share = params.caps
    slack = max(1, int(lower * NEAR * aim))
    cap = lower + slack
    end = objective(p, best)[1]
    if end < cap or step is not None:
        # a start already below the first cap (an allocation carried over from a similar
        # tile, a good heuristic order): its first probe halfway down to the bound, as
        # after a probe that placed the tile, not just below its end (which lowers it less)
        cap = end - max(int((end - lower) * (step or step_share)), 1)
    tried = []
    refuted = -1   # the highest cap the search proved nothing fits under
    aiming = step is None  # the first cap: AIM below NEAR
    probed = set()  # (cap, mirrored, the best's key then): its static orders have run
    while True:
        end = objective(p, best)[1]
        cap = min(cap, end - 1) if zone else min(cap, end - 1, tm)
        left = deadline - time.perf_counter()
        if cap < lower or cap <= refuted or left <= 0.005:
            break
        found = infeasible = rejected = False
        # bottom-up, then (when that stalls) top-down: the mirror fills the top of memory
        # first, where the tiles whose interleaved region is as full as the tile are tight
        for mirrored in (False, True) if not zone else (False,):
            left = deadline - time.perf_counter()
            if left <= 0.005:
                break
            # most of what is left, not all: a stalled probe must leave time for the other
            # direction and a looser cap
            plain_part, mirror_part, most = params.probe
            part = mirror_part if mirrored else plain_part
            budget = left if left < 0.02 else min(max(part * left, 0.02), most)
            c = cap
            if mirrored and aiming:
                # top-down placements are pressed down after the reversal (they end at or
                # below their cap), so the mirror aims at NEAR itself, not below it
                c = max(cap, min(lower + near, tm, end - 1))
            # another seed each probe: a cap probed again from the same start (held at
            # tileMemory, which it cannot loosen past; or at the end, just below) gets other
            # random orders, not the same descents: the probe's static orders depend only on
            # the cap and the start, and a 0.3 s probe of a Mk2 tile is mostly them (five
            # descents of about seven), whatever its seed
            again = (int(c), mirrored, objective(p, best))
            r = solve_search(p, time_limit=budget, hint=best, capacity=int(c),
                             seed=seed + len(tried),
                             probe=True, enough=stop if target is not None else None,
                             mirrored=mirrored, repeat=again in probed,
                             partnerless=partnerless, params=params)
            probed.add(again)
            tried.append(f"{c - lower:+,}{'v' if mirrored else ''}:{r.status}")
            if r.offsets is not None:
                cand = np.asarray(r.offsets, np.int64)
                if not self_check(p, cand):
                    tried.append("rejected")
                    rejected = True
                    break
                if objective(p, cand) < objective(p, best):
                    best = cand
                found = r.status == SearchStatus.OPTIMAL
            infeasible = r.status == SearchStatus.INFEASIBLE
            if found or infeasible or _meets(p, best, stop, zone):
                break
        aiming = False
        if rejected or _meets(p, best, stop, zone):
            break
        if found:
            end = objective(p, best)[1]
            cap = end - max(int((end - lower) * (step or step_share)), 1)
            continue
        if infeasible:
            lower, refuted = end_bound_after_infeasible(p, cap), cap
        # infeasible or stalled: a looser cap (which the first descent reaches more often):
        # NEAR itself first, then doubling
        slack = max(slack * 2 if slack >= near else near, slack + 1)
        cap = lower + slack
    status = Status.OPTIMAL if _meets(p, best, lower, zone) else Status.HEURISTIC
    return Outcome(best, status, "quick search " + " ".join(tried), lower)
