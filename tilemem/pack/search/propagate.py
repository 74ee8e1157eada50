"""A placement and its undoing, for the compiled search (``tilemem.pack.search.kernel``):
``_place`` puts a variable at an offset and propagates (its neighbours' lower bounds ``m``,
the section totals and their slack tree, the sections' witnesses, the cuts between sections),
recording on the trail what ``_undo`` restores; ``section_sums`` is the sections' starting
point.
"""
from __future__ import annotations

import numpy as np
from ...jit import njit

from ..guard import INF
from .layout import R_TL, T_M, T_OFF, T_WIT
from .legal import _after, _norm


@njit(cache=True)
def section_sums(sec_ptr, sec_vars, size, m0, hi):
    """Per section: its members' total size, their least ``m0``, the position (in
    ``sec_vars``) of the first member with it, and their highest ``hi``."""
    S = len(sec_ptr) - 1
    total = np.zeros(S, np.int64)
    least = np.empty(S, np.int64)
    at = np.empty(S, np.int64)
    top = np.empty(S, np.int64)
    for s in range(S):
        t = 0
        lm = INF
        la = sec_ptr[s]
        h = -INF
        for e in range(sec_ptr[s], sec_ptr[s + 1]):
            k = sec_vars[e]
            t += size[k]
            if m0[k] < lm:
                lm = m0[k]
                la = e
            if hi[k] > h:
                h = hi[k]
        total[s] = t
        least[s] = lm
        at[s] = la
        top[s] = h
    return total, least, at, top


# Compiled without reference counting (``_nrt=False``: it allocates nothing). With it, every
# array an inlined helper reads in its loops (the element starts of ``_after``, per
# neighbour and per variable) costs an atomic increment and decrement, in the search's
# hottest loops.
@njit(cache=True, _nrt=False)
def _place(c, o, size, align, lo, hi, ils, nrs, tm, zc, adj_ptr, adj_idx, adj_kind,
           elem_starts, sec_ptr, sec_vars, sec_cap, vsec_ptr, vsecs, span_lo, span_hi, off, m,
           total, wit, witv, cuts, trail, reg, smin, wcnt, dom):
    """Place ``c`` at ``o`` and propagate. Returns bits: 1 consistent, 2 something unplaced
    interacts with ``c`` (it has a "hat"), 4 a cut between sections dropped to zero."""
    tl = reg[R_TL]
    trail[tl, 0] = T_OFF  # undone with the totals and cuts below (see _undo)
    trail[tl, 1] = c
    trail[tl, 2] = off[c]
    tl += 1
    off[c] = o
    top = o + size[c]
    for e in range(vsec_ptr[c], vsec_ptr[c + 1]):
        s = vsecs[e]
        total[s] -= size[c]
        _seg_set(smin, s, sec_cap[s] - total[s] if total[s] > 0 else INF)
    split = False
    for s in range(span_lo[c], span_hi[c] - 1):
        cuts[s] -= 1
        if cuts[s] == 0:
            split = True
    hat = False
    ok = True
    raised = tl  # the T_M records from here on: the neighbours whose m went up
    for e in range(adj_ptr[c], adj_ptr[c + 1]):
        i = adj_idx[e]
        if off[i] >= 0:
            continue
        hat = True
        bnd = _after(adj_kind[e], top, elem_starts, ils, tm, zc)
        if bnd <= m[i]:
            continue
        nm = _norm(i, bnd, size, align, lo, hi, ils, nrs, tm, zc, dom)
        trail[tl, 0] = T_M
        trail[tl, 1] = i
        trail[tl, 2] = m[i]
        tl += 1
        m[i] = nm
        if nm >= INF:
            ok = False
            break
    if ok:
        # Every later placement is at or above o, and the unplaced members of a section
        # stack above the least of their lower bounds: max(o, min m) + total <= capacity.
        # o + total <= capacity holds in every section already (the node's ``mh``, from the
        # slack tree ``smin``), so a section fails exactly when no unplaced member has
        # m <= capacity - total. Each section with something unplaced keeps such a member
        # as its witness (``witv``; ``wit``: its position in the section; ``wcnt``: how many
        # sections a variable is the witness of), trailed, so it holds in every state. Only
        # two things can end a witness: it is placed (c, in c's sections) or its m went up
        # (a neighbour raised above); slack only grows as totals fall. So only those
        # sections are looked at, not all of the part's (thousands a node on a large tile).
        for e in range(vsec_ptr[c], vsec_ptr[c + 1]):
            s = vsecs[e]
            if witv[s] == c and total[s] > 0:
                nt = _new_witness(s, sec_cap[s] - total[s], sec_ptr, sec_vars, off, m, wit,
                                  witv, wcnt, trail, tl)
                if nt < 0:
                    ok = False
                    break
                tl = nt
    if ok:
        for r in range(raised, tl):
            if trail[r, 0] != T_M:
                continue
            i = trail[r, 1]
            if wcnt[i] == 0:
                continue
            for e in range(vsec_ptr[i], vsec_ptr[i + 1]):
                s = vsecs[e]
                if witv[s] != i:
                    continue
                slack = sec_cap[s] - total[s]
                if m[i] <= slack:
                    continue
                nt = _new_witness(s, slack, sec_ptr, sec_vars, off, m, wit, witv, wcnt,
                                  trail, tl)
                if nt < 0:
                    ok = False
                    break
                tl = nt
            if not ok:
                break
    reg[R_TL] = tl
    return (1 if ok else 0) | (2 if hat else 0) | (4 if split else 0)


@njit(cache=True, inline="always")
def _new_witness(s, slack, sec_ptr, sec_vars, off, m, wit, witv, wcnt, trail, tl):
    """Point ``wit[s]`` (``witv[s]``: the variable there) at an unplaced member of section
    ``s`` with ``m <= slack``, searching from the current witness onwards and round (members
    behind it were mostly placed already: from the front each time the scans were
    quadratic); the change is trailed. Returns the trail's new end, or -1 when there is
    none."""
    s0 = sec_ptr[s]
    s1 = sec_ptr[s + 1]
    w = wit[s]
    n = s1 - s0
    e = w
    for _ in range(n - 1):
        e += 1
        if e == s1:
            e = s0
        k = sec_vars[e]
        if off[k] < 0 and m[k] <= slack:
            trail[tl, 0] = T_WIT
            trail[tl, 1] = s
            trail[tl, 2] = w
            wcnt[witv[s]] -= 1
            wit[s] = e
            witv[s] = k
            wcnt[k] += 1
            return tl + 1
    return -1


@njit(cache=True, _nrt=False)
def _undo(mark, model, state):
    """Undo the trail down to ``mark``. A placement's record (``T_OFF``) also stands for what
    every placement changes the same way: the totals of its sections (and their slack in the
    tree ``smin``) and the cuts across its span, restored here from the model rather than
    written to the trail (they would be most of it, a trail allocated and zeroed for each
    probe)."""
    reg = state.reg
    trail = state.trail
    size = model.size
    vsec_ptr = model.vsec_ptr
    vsecs = model.vsecs
    tl = reg[R_TL]
    while tl > mark:
        tl -= 1
        kind = trail[tl, 0]
        i = trail[tl, 1]
        v = trail[tl, 2]
        if kind == T_M:
            state.m[i] = v
        elif kind == T_OFF:
            state.off[i] = v
            for e in range(vsec_ptr[i], vsec_ptr[i + 1]):
                s = vsecs[e]
                state.total[s] += size[i]
                _seg_set(state.smin, s, model.sec_cap[s] - state.total[s])
            for s in range(model.span_lo[i], model.span_hi[i] - 1):
                state.cuts[s] += 1
        elif kind == T_WIT:
            state.wcnt[state.witv[i]] -= 1
            state.wit[i] = v
            state.witv[i] = model.sec_vars[v]
            state.wcnt[state.witv[i]] += 1
        else:
            state.pre[i] = v
    reg[R_TL] = tl


@njit(cache=True, inline="always")
def _seg_set(tree, s, v):
    """Leaf ``s`` of the min-tree ``tree`` (leaves at ``len(tree) // 2``) becomes ``v``."""
    i = len(tree) // 2 + s
    tree[i] = v
    i >>= 1
    while i >= 1:
        a = tree[2 * i]
        b = tree[2 * i + 1]
        x = a if a < b else b
        if tree[i] == x:
            break  # nothing above changes either
        tree[i] = x
        i >>= 1


@njit(cache=True, inline="always")
def _seg_min(tree, a, b):
    """The least leaf of ``tree`` in ``[a, b)``."""
    half = len(tree) // 2
    res = INF
    lo = a + half
    hi = b + half
    while lo < hi:
        if lo & 1:
            if tree[lo] < res:
                res = tree[lo]
            lo += 1
        if hi & 1:
            hi -= 1
            if tree[hi] < res:
                res = tree[hi]
        lo >>= 1
        hi >>= 1
    return res
