"""Which variable a node of the compiled search (``tilemem.pack.search.kernel``) tries: the
static order of a part's unplaced variables (``_preorder``, the tie-break of canonicity), the
node's scan at entry (its dominance height and first candidate) and the next canonical
candidate after the ones tried.
"""
from __future__ import annotations

from ...jit import njit

from ...liveness.sorting import argsort, sort
from ..guard import INF
from .layout import KEY_A, KEY_D, KEY_Q, KEY_R, KEY_W, KEY_Z, R_TL, T_PRE
from .legal import dominance_height


# Compiled without reference counting (``_nrt=False``: it allocates nothing). With it, every
# array an inlined helper reads in its loops (the element starts of ``_after``, per
# neighbour and per variable) costs an atomic increment and decrement, in the search's
# hottest loops.
@njit(cache=True, _nrt=False)
def _enter_scan(v0, v1, by_lo, off, m, pre, size, has_elem, has_reg, elem_starts, ils, tm, zc,
                thr_m, thr_p):
    """A node's scan of its part's unplaced variables: ``(mh, first, any_left)``: the
    dominance height (no placement at or above it while some ``k`` would fit wholly below),
    the least canonical candidate (as ``_next_candidate`` would choose it first; a descent
    that goes well tries one candidate a node, so this saves it a second scan), and whether
    anything is unplaced."""
    mh = INF
    any_left = False
    first = -1
    first_m = INF
    first_p = INF
    for t in range(v0, v1):
        k = by_lo[t]
        if off[k] >= 0:
            continue
        any_left = True
        mk = m[k]
        pk = pre[k]
        if (mk > thr_m or (mk == thr_m and pk >= thr_p)) and (
                mk < first_m or (mk == first_m and pk < first_p)):
            first = k
            first_m = mk
            first_p = pk
        # the height is at least the end of k at m[k]: look it up (a search of the
        # element bounds) only when that could lower mh
        if mk + size[k] < mh:
            h = dominance_height(k, m, size, has_elem, has_reg, elem_starts, ils, tm, zc)
            if h < mh:
                mh = h
    return mh, first, any_left


@njit(cache=True, _nrt=False)
def _next_candidate(v0, v1, by_lo, off, m, pre, mh, thr_m, thr_p, last_m, last_p):
    """The node's next candidate: the unplaced variable of least ``(m, pre)`` below ``mh``,
    canonical (not below the previous placement ``(thr_m, thr_p)``) and not tried yet (above
    ``(last_m, last_p)``); -1 when none is left."""
    best = -1
    best_m = INF
    best_p = INF
    for t in range(v0, v1):
        k = by_lo[t]
        if off[k] >= 0:
            continue
        mk = m[k]
        if mk >= mh:
            continue
        pk = pre[k]
        if mk < thr_m or (mk == thr_m and pk < thr_p):
            continue  # not canonical: below the previous placement
        if mk < last_m or (mk == last_m and pk <= last_p):
            continue  # tried already at this node
        if mk < best_m or (mk == best_m and pk < best_p):
            best = k
            best_m = mk
            best_p = pk
    return best


@njit(cache=True)
def _preorder(a, b, heur, off, pre, total, vsec_ptr, vsecs, by_lo, lo_idx, width, area,
              rand_key, hi, size, trail, reg, tmp_vars, tmp_key, has_elem):
    """Rank the unplaced variables of part ``[a, b)`` by the static ordering ``heur`` (keys
    descending, then variable index): the tie-break of the dynamic order and of canonicity."""
    n = 0
    for t in range(lo_idx[a], lo_idx[b]):
        k = by_lo[t]
        if off[k] < 0:
            tmp_vars[n] = k
            n += 1
    vs = sort(tmp_vars[:n])
    for h in range(len(heur) - 1, -1, -1):
        code = heur[h]
        key = tmp_key[:n]
        for j in range(n):
            k = vs[j]
            if code == KEY_W:
                key[j] = -width[k]
            elif code == KEY_A:
                key[j] = -area[k]
            elif code == KEY_R:
                key[j] = -rand_key[k]
            elif code == KEY_D:
                key[j] = hi[k]
            elif code == KEY_Z:
                key[j] = -size[k]
            elif code == KEY_Q:
                key[j] = has_elem[k]
            else:
                tt = 0
                for e in range(vsec_ptr[k], vsec_ptr[k + 1]):
                    if total[vsecs[e]] > tt:
                        tt = total[vsecs[e]]
                key[j] = -tt
        order = argsort(key)
        vs = vs[order]
    tl = reg[R_TL]
    for j in range(n):
        k = vs[j]
        trail[tl, 0] = T_PRE
        trail[tl, 1] = k
        trail[tl, 2] = pre[k]
        tl += 1
        pre[k] = j
    reg[R_TL] = tl
