"""The partner look-ahead of the compiled search (``tilemem.pack.search.kernel``): two
unplaced element (region) partners need an order in which the first, at or above the current
offset, leaves a later element (region) for the second. ``pair_thresholds`` precomputes, per
pair, how low everything must be for the pair to fit without looking.
"""
from __future__ import annotations

import numpy as np
from ...jit import njit

from ..guard import INF
from .layout import G_ILS, G_NRS, G_TM
from .legal import _after, _norm


@njit(cache=True, inline="always")
def _pair_fits(i, k, kd, o, mi, mk, size, align, lo, hi, ils, nrs, tm, zc, elem_starts,
               dom):
    """Element (region) partners ``i`` and ``k`` (``kd``: the kind), both unplaced, with
    lower bounds ``mi`` and ``mk``: one can go first, at or above ``o``, and the other wholly
    past its last element (region). Monotone: what fits fits for any lower ``o``, ``mi``,
    ``mk`` too (every step takes the lowest legal offset at or above a bound)."""
    xi = _norm(i, mi if mi > o else o, size, align, lo, hi, ils, nrs, tm, zc, dom)
    if xi < INF:
        bk = _after(kd, xi + size[i], elem_starts, ils, tm, zc)
        if _norm(k, bk if bk > mk else mk, size, align, lo, hi, ils, nrs, tm, zc, dom) < INF:
            return True
    xk = _norm(k, mk if mk > o else o, size, align, lo, hi, ils, nrs, tm, zc, dom)
    if xk < INF:
        bi = _after(kd, xk + size[k], elem_starts, ils, tm, zc)
        if _norm(i, bi if bi > mi else mi, size, align, lo, hi, ils, nrs, tm, zc, dom) < INF:
            return True
    return False


@njit(cache=True)
def pair_thresholds(pair_i, pair_k, pair_kind, size, align, lo, hi, elem_starts, geo, cap):
    """For each partner pair, the highest ``x`` at which ``_pair_fits`` holds with ``o``,
    ``mi`` and ``mk`` all at ``x`` (-1 when not even at 0): by its monotony the pair fits
    whenever all three are at or below it, so ``_partners_ok`` skips it then (on tiles with
    many pairs the look-ahead is otherwise a large share of the search's time). Only for
    the search without a zone or domains: with either there is no look-ahead, so one
    compiled version serves (each costs tens of seconds to compile)."""
    ils, nrs, tm = geo[G_ILS], geo[G_NRS] != 0, geo[G_TM]
    out = np.empty(len(pair_i), np.int64)
    for e in range(len(pair_i)):
        i = pair_i[e]
        k = pair_k[e]
        kd = pair_kind[e]
        # 0 as an int64, not a literal: numba would compile _pair_fits_at apart for it
        if not _pair_fits_at(i, k, kd, np.int64(0), size, align, lo, hi, ils, nrs, tm, None,
                             elem_starts, None):
            out[e] = -1
            continue
        a = 0        # fits
        b = cap + 1  # the first that does not, or past every bound
        while b - a > 1:
            mid = (a + b) >> 1
            if _pair_fits_at(i, k, kd, mid, size, align, lo, hi, ils, nrs, tm, None,
                             elem_starts, None):
                a = mid
            else:
                b = mid
        out[e] = a
    return out


# called, not inlined: inlined at both calls above it doubled the compilation's time
@njit(cache=True)
def _pair_fits_at(i, k, kd, x, size, align, lo, hi, ils, nrs, tm, zc, elem_starts, dom):
    """``_pair_fits`` with ``o``, ``mi`` and ``mk`` all at ``x``."""
    return _pair_fits(i, k, kd, x, x, x, size, align, lo, hi, ils, nrs, tm, zc, elem_starts,
                      dom)


# Compiled without reference counting (``_nrt=False``: it allocates nothing). With it, every
# array an inlined helper reads in its loops (the element starts of ``_after``, per
# neighbour and per variable) costs an atomic increment and decrement, in the search's
# hottest loops.
@njit(cache=True, _nrt=False)
def _partners_ok(o, a, b, size, align, lo, hi, ils, nrs, tm, zc, elem_starts, span_lo, off, m,
                 pair_i, pair_k, pair_kind, pair_thr, dom):
    """Two element (region) partners both unplaced in part ``[a, b)``: one goes first, at or
    above ``o``, and the other wholly past its last element (region). False if neither order
    fits for some pair (``_pair_fits``; a pair whose ``o`` and lower bounds are all at or
    below its ``pair_thr`` fits without looking). (With a zone both may go past tileMemory:
    no look-ahead then.)"""
    # the zone's version ends here (numba prunes the branch where ``zc`` is None). Past it
    # ``dom`` is None too (domains come with a zone, ``SearchRun``), and said so: numba
    # does not prune the branch where ``zc`` is an integer, so it typed the call below there
    # too, and compiled the look-ahead once more for the domains' version, which never runs
    # it (the most costly function of that version's compilation)
    if zc is not None:
        return True
    return _look_ahead(o, a, b, size, align, lo, hi, ils, nrs, tm, elem_starts, span_lo, off,
                       m, pair_i, pair_k, pair_kind, pair_thr, None)


@njit(cache=True, _nrt=False)
def _look_ahead(o, a, b, size, align, lo, hi, ils, nrs, tm, elem_starts, span_lo, off, m,
                pair_i, pair_k, pair_kind, pair_thr, dom):
    """``_partners_ok`` without a zone."""
    for e in range(len(pair_i)):
        i = pair_i[e]
        k = pair_k[e]
        if off[i] >= 0 or off[k] >= 0:
            continue
        t = pair_thr[e]
        if o <= t and m[i] <= t and m[k] <= t:
            continue  # fits (pair_thresholds)
        if span_lo[i] < a or span_lo[i] >= b:
            continue
        if not _pair_fits(i, k, pair_kind[e], o, m[i], m[k], size, align, lo, hi, ils, nrs,
                          tm, None, elem_starts, dom):
            return False
    return True
