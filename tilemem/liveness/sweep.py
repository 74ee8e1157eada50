"""Sweeps over lifetimes: how many bytes are live at each time (``live_sweep``), and which
intervals are live together at each maximal cross-section (``cliques_of_intervals``).

Every question about live bytes over time reads ``live_sweep``: a tile's maximum over its
program steps (``maxlive``), its curve (``steps.step_profile``) and the maximum over tiles
(``steps.max_over_tiles``). Every stage that needs the cross-sections of an interval model
(the exact search's sections, ``intervals.clique_path``) reads ``cliques_of_intervals``.
"""
from __future__ import annotations

import numpy as np
from ..jit import njit

from .sorting import search_left, search_right, sort, unique


def live_sweep(start, end, weight, times, group=None, groups: int = 1) -> np.ndarray:
    """Live weight of intervals ``[start, end)`` at each of ``times`` (sorted, holding every
    start and end): a ``(groups, len(times))`` int64 array whose row ``g``, column ``k`` is the
    weight of the intervals of group ``g`` (``group``: each interval's, default all in group
    0) with ``start <= times[k] < end``. Intervals must not be empty (half-open: one that
    ends at ``t`` is not live at ``t``, one that starts there is).

    >>> live_sweep([0, 2], [4, 6], [8, 16], times=[0, 2, 4, 6]).tolist()
    [[8, 24, 16, 0]]
    >>> live_sweep([0, 2], [4, 6], [8, 16], [0, 2, 4, 6], group=[0, 1], groups=2).tolist()
    [[8, 8, 0, 0], [0, 16, 16, 0]]
    """
    times = np.asarray(times)
    n = len(times)
    at_start = np.searchsorted(times, np.asarray(start))
    at_end = np.searchsorted(times, np.asarray(end))
    if group is not None:
        base = np.asarray(group, np.int64) * n
        at_start, at_end = at_start + base, at_end + base
    w = np.asarray(weight)
    delta = (np.bincount(at_start, weights=w, minlength=groups * n)
             - np.bincount(at_end, weights=w, minlength=groups * n))
    return np.cumsum(delta.reshape(groups, n), axis=1).round().astype(np.int64)


def cliques_of_intervals(start, end) -> tuple[np.ndarray, np.ndarray]:
    """The maximal cliques of intervals ``[start, end)`` (all non-empty) in time order: the
    live set just before each end time at which something started since the previous one
    (half-open: at equal times ends come before starts).

    >>> ptr, m = cliques_of_intervals([0, 1, 3], [2, 4, 5])
    >>> [m[ptr[c]:ptr[c + 1]].tolist() for c in range(len(ptr) - 1)]
    [[0, 1], [1, 2]]
    """
    # contiguous (a column of an interval model is not): numba compiles the kernel, and the
    # sorts it calls, apart for each memory layout
    start = np.ascontiguousarray(start, np.int64)
    end = np.ascontiguousarray(end, np.int64)
    if len(start) == 0:
        return np.zeros(1, np.int64), np.zeros(0, np.int64)
    if np.any(end <= start):
        raise ValueError("empty interval")
    return _interval_cliques(start, end)


@njit(cache=True)
def _interval_cliques(start, end):
    """``cliques_of_intervals`` compiled, in one pass without sorting the memberships (the
    exact search builds a model per tile from it): each record time keeps the intervals
    started since the previous record and not yet ended, in index order."""
    m = len(start)
    ends = unique(end)
    starts = sort(start)
    rec = np.empty(len(ends), np.int64)
    r = 0
    for t in ends:
        a = 0 if r == 0 else search_left(starts, rec[r - 1])
        if search_left(starts, t) > a:
            rec[r] = t
            r += 1
    rec = rec[:r]
    first = np.empty(m, np.int64)
    stop = np.empty(m, np.int64)
    for i in range(m):
        first[i] = search_right(rec, start[i])
        stop[i] = search_right(rec, end[i])
    ptr = np.zeros(r + 1, np.int64)
    for i in range(m):
        for q in range(first[i], stop[i]):
            ptr[q + 1] += 1
    for q in range(r):
        ptr[q + 1] += ptr[q]
    fill = ptr[:-1].copy()
    members = np.empty(ptr[r], np.int64)
    for i in range(m):
        for q in range(first[i], stop[i]):
            members[fill[q]] = i
            fill[q] += 1
    return ptr, members
