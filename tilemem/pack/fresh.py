"""A fresh start for a big tile: a packing built afresh bottom-up and lowered by the quick
search (``_fresh_start``), which the exact portfolio (``tilemem.pack.portfolio``) gives the
tiles the first pass left above 1%.
"""
from __future__ import annotations

import time

import numpy as np

from .firstfit import first_fit
from .guard import self_check
from .kinds import SearchStatus
from .params import DEFAULT_PARAMS, SolverParams
from .problem import TileProblem
from .quick import NEAR, quick_search
from .result import objective
from .search import solve_search


def _fresh_start(p: TileProblem, lower: int, seconds: float, seed: int,
                 target: int | None = None,
                 params: SolverParams = DEFAULT_PARAMS) -> tuple[np.ndarray | None, str]:
    """A packing of ``p`` built afresh bottom-up and lowered by the quick search, within
    ``seconds``: ``(offsets or None, note)``.

    Why: the quick search's probes follow their start's order (the hint's order is their
    first), so a tile keeps the layout of its first packing. A tile the first pass left
    above 1% was mostly placed by a top-down probe (``tilemem.pack.mirror``, which reaches
    tight caps soonest) and keeps its layout: the variables live throughout at the top of
    both regions, those with lifetimes in two parts at the bottom of each. Bottom-up, the
    variables live throughout go to the bottom and those with lifetimes meet across the
    regions' boundary, in one part: a layout whose first packing is looser but that goes
    lower.

    The first packing: bottom-up probes from first fit by size (each log size perturbed by
    ``params.fresh[1]``), at twice ``NEAR`` above ``lower`` and doubling, ``params.fresh[2]``
    of the time at most each; then the quick search comes down from it half the
    ``params.caps`` step of the way to the bound at a time (not from its aim of ``NEAR``, where a fresh start's
    first probes stall).
    """
    _, noise, probe_share = params.fresh
    deadline = time.perf_counter() + seconds
    # first fit by size, perturbed by the seed and the tile: neighbouring tiles hold nearly
    # the same problem, and the same start would give them the same descents (the probes'
    # static orders follow the start), where a run of them carries the best one along
    rng = np.random.default_rng([seed, p.tile])
    noisy = np.log(np.maximum(p.size, 1)) + noise * rng.standard_normal(p.n)
    start = first_fit(p, np.argsort(-noisy, kind="stable"))
    slack = max(1, int(lower * 2 * NEAR))
    probed = -1
    while True:
        left = deadline - time.perf_counter()
        cap = lower + slack
        if cap >= objective(p, start)[1]:   # first fit is already below the cap
            off = start
            break
        # a cap held at tileMemory (a bound within 2% of it) is probed once: again it would
        # run the same descents, and the time goes to the tile's own allocation instead
        if left <= 0.01 or min(cap, p.capacity) == probed:
            return None, "fresh start not found"
        probed = min(cap, p.capacity)
        r = solve_search(p, time_limit=min(left, probe_share * seconds), hint=start,
                         capacity=int(probed), probe=True, seed=seed, params=params)
        if r.status == SearchStatus.OPTIMAL and r.offsets is not None:
            off = np.asarray(r.offsets, np.int64)
            if self_check(p, off):
                break
        slack *= 2
    left = deadline - time.perf_counter()
    if left > 0.01:
        q = quick_search(p, off, lower, left, seed=seed, step=params.caps[1] / 2, target=target,
                         params=params)
        off, note = q.offsets, q.note
    else:
        note = ""
    return off, f"fresh start {slack:+,}, then {note}"
