"""Sorting and binary search inside compiled code: ``argsort``, ``sort``, ``unique``,
``search_left`` and ``search_right`` for ``@njit(cache=True)`` functions, in place of numba's
``np.argsort``, ``np.sort``, ``np.unique`` and ``np.searchsorted``.

Why not numba's own: numba builds its sorts and searches from factories (``make_quicksort_impl``,
``make_jit_mergesort``, ``make_searchsorted_implementation``: one for each side) whose
closures all carry the same name, told apart only by a counter
of the process that compiled them. A function compiled with ``cache=True`` keeps its sort's
machine code under that name in its cache file, and when a process loads two cached
functions whose sorts got the same name in the processes that compiled them, the second
one's calls go to the first one's code. Seen on this project: ``graphalg._lexbfs``'s
``np.argsort`` (a sort of indices by key) ran ``_earlier_neighbours``'s ``np.sort`` (a sort of
values) after ``max_live_all`` had loaded it, so it returned the identity; the report's
interval model then failed to be found in every process that computed the bounds first,
and every tile that process packed recognised its graph again (0.3 s a Mk2 tile, more than
a first-pass share of the budget; ``tilemem alloc`` computes the model before the bounds,
so its runs measured here were spared). The guard and the search's static orders sorted the
same way, and a ``side="right"`` search can run a left one's code. Which processes meet it
depends on the order caches were written in, so it comes and goes.

These are plain top-level functions: their compiled names are their module's and their
argument types', unique to them. ``tests/test_sorting.py`` keeps compiled code of tilemem on
them (and checks them against numpy).

>>> import numpy as np
>>> argsort(np.array([3, 1, 2, 1])).tolist()   # stable: the two 1s keep their order
[1, 3, 2, 0]
>>> sort(np.array([3, 1, 2, 1])).tolist(), unique(np.array([3, 1, 2, 1])).tolist()
([1, 1, 2, 3], [1, 2, 3])
>>> a = np.array([1, 2, 2, 5])
>>> search_left(a, 2), search_right(a, 2), search_right(a, 0), search_left(a, 9)
(1, 3, 0, 4)
"""
from __future__ import annotations

import numpy as np
from ..jit import njit

#: Runs this short are sorted by insertion before the merges.
_RUN = 16


@njit(cache=True)
def argsort(keys):
    """Indices that put ``keys`` (1-D, numbers) in ascending order, stable: equal keys keep
    the order of their indices (what ``np.argsort(keys, kind="stable")`` gives)."""
    n = len(keys)
    idx = np.empty(n, np.int64)
    for i in range(n):
        idx[i] = i
    if n < 2:
        return idx
    for s in range(0, n, _RUN):      # insertion sort of each run
        e = min(s + _RUN, n)
        for i in range(s + 1, e):
            v = idx[i]
            kv = keys[v]
            j = i - 1
            while j >= s and keys[idx[j]] > kv:
                idx[j + 1] = idx[j]
                j -= 1
            idx[j + 1] = v
    src = idx
    dst = np.empty(n, np.int64)
    width = _RUN
    while width < n:                  # bottom-up merges; the left run wins ties (stable)
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                if keys[src[j]] < keys[src[i]]:
                    dst[k] = src[j]
                    j += 1
                else:
                    dst[k] = src[i]
                    i += 1
                k += 1
            while i < mid:
                dst[k] = src[i]
                i += 1
                k += 1
            while j < hi:
                dst[k] = src[j]
                j += 1
                k += 1
        src, dst = dst, src
        width *= 2
    return src


@njit(cache=True)
def sort(values):
    """A sorted copy of ``values`` (1-D, numbers)."""
    return values[argsort(values)]


@njit(cache=True)
def unique(values):
    """The distinct ``values`` (1-D, numbers), ascending."""
    s = sort(values)
    if len(s) == 0:
        return s
    keep = np.ones(len(s), np.bool_)
    for i in range(1, len(s)):
        keep[i] = s[i] != s[i - 1]
    return s[keep]


@njit(cache=True)
def search_left(a, x):
    """The first index of sorted ``a`` whose value is at least ``x`` (``len(a)`` if none):
    ``np.searchsorted(a, x)``."""
    return search_left_between(a, 0, len(a), x)


@njit(cache=True, inline="always")
def search_left_between(a, lo, hi, x):
    """``search_left`` on ``a[lo:hi]`` (sorted), as an index of ``a`` (``hi`` if none), without
    a slice: inlined, it costs a search nothing in code compiled without reference counting
    (``tilemem.pack.search.kernel``)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def search_right(a, x):
    """The first index of sorted ``a`` whose value is above ``x`` (``len(a)`` if none):
    ``np.searchsorted(a, x, side="right")``."""
    lo, hi = 0, len(a)
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo
