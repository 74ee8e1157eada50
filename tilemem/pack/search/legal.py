"""Where a variable may go, for the compiled search (``tilemem.pack.search.kernel``): its lowest
legal offset at or above a bound (window, alignment, region span, its domain when there are
domains, the overflow zone when there is one), the bound a placed partner sets, and the
dominance height an unplaced variable sets.
"""
from __future__ import annotations

import numpy as np
from ...jit import njit

from ...liveness.sorting import search_left_between
from ..guard import INF, K_CONFLICT, K_ELEMENT, K_REGION, align_up, bound_after, lowest_legal
from .layout import G_ILS, G_NRS, G_TM


@njit(cache=True, inline="always")
def _norm(k, b, size, align, lo, hi, ils, nrs, tm, zc, dom):
    """Lowest legal offset of ``k`` at or above ``b`` (INF if none): in its window in memory
    (and in its domain, when there are domains: ``dom``, see ``_in_domain``), else (with a
    zone) the first aligned offset past tileMemory. A window ends at or below tileMemory, so
    no offset found either way straddles it."""
    x = lowest_legal(b, size[k], align[k], lo[k], hi[k], ils, nrs)
    # ``k`` as an int64: callers index by int32 (the interaction rows) and by int64, and
    # numba compiled ``_in_domain`` (a call, not inlined) once for each
    if dom is not None and x >= 0:
        x = _in_domain(np.int64(k), x, size, align, lo, hi, ils, nrs, dom, False)
    if x >= 0:
        return x
    if zc is not None:
        z = align_up(b if b > tm else tm, align[k])
        if dom is not None:
            z = _in_domain(np.int64(k), z, size, align, lo, hi, ils, nrs, dom, True)
        if z >= 0 and z + size[k] <= zc:
            return z
    return INF


# not inlined: inlined at every lowest-legal-offset step of the kernel's versions with
# domains it makes their compilation several times as long, and only neighbourhoods, a few
# hundred variables each, pay for the call
@njit(cache=True, _nrt=False)
def _in_domain(k, x, size, align, lo, hi, ils, nrs, dom, zone):
    """The lowest legal offset of ``k`` at or above the legal ``x`` that is also in its
    domain: with ``dom = (ptr, lo, hi)``, the start ranges ``[lo[e], hi[e]]`` (inclusive,
    increasing, disjoint) for ``e`` in ``ptr[k]:ptr[k + 1]`` (-1 when there is none).
    Legal: in memory (its window, alignment, region), or with ``zone`` past tileMemory
    (alignment only). Domains are how variables fixed elsewhere
    (``tilemem.pack.search.restrict``) enter the search: the addresses they rule out are
    holes in the domains of the free ones. The result is non-decreasing in ``x``, which the
    partner look-ahead's monotony needs."""
    dom_ptr, dom_lo, dom_hi = dom
    e0 = dom_ptr[k]
    e1 = dom_ptr[k + 1]
    while True:
        # the first range not wholly below x (binary search: fixed neighbours make many)
        a = search_left_between(dom_hi, e0, e1, x)
        if a == e1:
            return -1
        if x >= dom_lo[a]:
            return x
        if zone:
            x = align_up(dom_lo[a], align[k])
        else:
            x = lowest_legal(dom_lo[a], size[k], align[k], lo[k], hi[k], ils, nrs)
            if x < 0:
                return -1
        e0 = a


@njit(cache=True, inline="always")
def _after(kind, top, elem_starts, ils, tm, zc):
    """``bound_after`` with the zone: a partner ending past tileMemory is in no element or
    region (only the conflict remains), and a variable that no later region may take can
    still go past tileMemory."""
    if zc is not None:
        if top > tm:
            return top if kind & K_CONFLICT else 0
        b = bound_after(kind, top, elem_starts, ils)
        return tm if b >= INF else b
    return bound_after(kind, top, elem_starts, ils)


@njit(cache=True)
def lowest_offsets(size, align, lo, hi, geo, zc, dom):
    """``_norm`` of every variable from 0: its lowest legal offset on its own."""
    ils, nrs, tm = geo[G_ILS], geo[G_NRS] != 0, geo[G_TM]
    out = np.empty(len(size), np.int64)
    for k in range(len(size)):
        out[k] = _norm(k, 0, size, align, lo, hi, ils, nrs, tm, zc, dom)
    return out


@njit(cache=True, inline="always")
def dominance_height(k, m, size, has_elem, has_reg, elem_starts, ils, tm, zc):
    """An offset at or above which no variable may be placed while ``k`` is unplaced: ``k``
    would fit wholly below it at ``m[k]`` (a gap a left-justified solution never leaves)."""
    kind = K_CONFLICT | (K_ELEMENT if has_elem[k] else 0) | (K_REGION if has_reg[k] else 0)
    return _after(kind, m[k] + size[k], elem_starts, ils, tm, zc)
