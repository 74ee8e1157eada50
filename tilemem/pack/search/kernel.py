"""The compiled depth-first kernel of ``tilemem.pack.search``: a resumable search over
canonical (bottom-justified) placements, in plain int64 arrays.

Everything the search needs lives in two named tuples of arrays (``tilemem.pack.search.state``):
the ``KernelModel`` (static for one capacity: sizes, windows, the interaction graph, the sections) and the ``SearchState``
(offsets, lower bounds, section sums, the undo trail and an explicit frame stack); numba
compiles attribute access on them to the same code as positional access, so the names cost
nothing and no slot can be read by the wrong number. Because the recursion is an explicit stack, ``run``
can stop after any number of nodes and be called again to continue: the Python side uses that
for time limits, node limits and to grow the trail.

Terms (see ``tilemem.pack.search`` for the argument that the pruning is sound):

- ``m[k]``: the lowest offset variable ``k`` may take given the placed variables (all of which
  lie at or below the current offset): above every placed conflicting variable, past the last
  element / region of every placed element / region partner, then aligned, out of the region
  boundary and inside its window. ``INF`` when no such offset exists.
- A *section* is a clique of the conflict graph (a cross-section of time when lifetimes are
  known). Its unplaced variables must stack above ``max(current offset, min m)``: the capacity
  check, decided with a cached *witness* per section (an unplaced member low enough to pass
  it) instead of maintaining ``min m``. Sections have a linear order; every variable has a
  *span* (an interval of sections) such that interacting variables have intersecting spans,
  so when no unplaced variable spans two adjacent sections the rest splits into independent
  parts (dynamic decomposition).
- A *frame* is a search node (``NODE``: place one more variable of a part) or a decomposition
  (``DECOMP``: solve its parts one after the other, each on top of the ones solved before
  it, which it does not read).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ...liveness.sorting import argsort, search_left_between, sort
from ..guard import INF, K_CONFLICT, K_ELEMENT, K_REGION, align_up, bound_after, lowest_legal

# run() results
FOUND, INFEASIBLE, ABORTED, PAUSED, NEED_TRAIL = 1, 2, 3, 4, 5

# frame kinds and modes (what the top frame has to do next)
NODE, DECOMP = 0, 1
ENTER, NEXT, SUCC, FAIL = 0, 1, 2, 3

# frame fields
F_KIND, F_A, F_B, F_THR_M, F_THR_P, F_LAST_M, F_LAST_P, F_CUR, F_MARK, F_HAT, F_MH = range(11)
F_P0, F_PN, F_PI = 11, 12, 13
# F_FIRST: the node's first candidate, found by the scan that computes its height at ENTER (a
# descent that goes well tries one candidate a node: this saves it a second scan)
F_FIRST = 14
NUM_FIELDS = 15

# registers
# R_TRY_LIMIT: ABORTED once R_TRIES (candidates placed, at every node) reaches it. A node
# limit alone does not bound a descent's work: a descent gone wrong can try thousands of
# candidates at a node (on Mk2 tiles, 128,000 tries in 1,900 nodes: 1 s instead of 0.05)
R_SP, R_MODE, R_NODES, R_TL, R_PT, R_TRIES, R_PARTS, R_TRY_LIMIT = range(8)
NUM_REGS = 8

# trail record kinds
T_OFF, T_M, T_PRE, T_WIT = range(4)

# interaction kinds (bits of adj_kind): the guard's K_CONFLICT, K_ELEMENT, K_REGION

# static order keys: W(idth), A(rea), T(otal of the sections) and R (a given random or hint
# key) descending as in MiniMalloc; D(eadline: the end of the window) ascending; Q: the
# variables without an element partner first (``tilemem.pack.search.partnerless_order``)
KEY_W, KEY_A, KEY_T, KEY_R, KEY_D, KEY_Z, KEY_Q = 0, 1, 2, 3, 4, 5, 6


# the geometry array ``geo``: interleavedMemoryStart, no region span (0/1), tileMemory. The
# overflow zone is an argument of its own, ``zc``: None (no zone: the search places only in
# memory) or the capacity up to which it may place past tileMemory (only alignment and
# no-overlap apply there). None is a type of its own to numba, so the kernel is compiled
# twice and the zone's branches cost nothing to the search in memory.
G_ILS, G_NRS, G_TM = range(3)



@njit(cache=True, inline="always")
def _norm(k, b, size, align, lo, hi, ils, nrs, tm, zc, dom):
    """Lowest legal offset of ``k`` at or above ``b`` (INF if none): in its window in memory
    (and in its domain, when there are domains: ``dom``, see ``_in_domain``), else (with a
    zone) the first aligned offset past tileMemory. A window ends at or below tileMemory, so
    no offset found either way straddles it."""
    x = lowest_legal(b, size[k], align[k], lo[k], hi[k], ils, nrs)
    if dom is not None and x >= 0:
        x = _in_domain(k, x, size, align, lo, hi, ils, nrs, dom, False)
    if x >= 0:
        return x
    if zc is not None:
        z = align_up(b if b > tm else tm, align[k])
        if dom is not None:
            z = _in_domain(k, z, size, align, lo, hi, ils, nrs, dom, True)
        if z >= 0 and z + size[k] <= zc:
            return z
    return INF


# not inlined: at every lowest-legal-offset step of the kernel's versions with domains it
# made their compilation six times as long (warm_up from a cold cache 163 s against 26 s),
# and only neighbourhoods, a few hundred variables each, pay for the call
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


@njit(cache=True, _nrt=False)
def _undo(mark, model, state):
    """Undo the trail down to ``mark``. A placement's record (``T_OFF``) also stands for what
    every placement changes the same way: the totals of its sections (and their slack in the
    tree ``smin``) and the cuts across its span, restored here from the model rather than
    written to the trail (on Mk2 tiles they were most of it: ~100 MB a descent, allocated and
    zeroed for each probe)."""
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


@njit(cache=True, inline="always")
def dominance_height(k, m, size, has_elem, has_reg, elem_starts, ils, tm, zc):
    """An offset at or above which no variable may be placed while ``k`` is unplaced: ``k``
    would fit wholly below it at ``m[k]`` (a gap a left-justified solution never leaves)."""
    kind = K_CONFLICT | (K_ELEMENT if has_elem[k] else 0) | (K_REGION if has_reg[k] else 0)
    return _after(kind, m[k] + size[k], elem_starts, ils, tm, zc)


@njit(cache=True, inline="always")
def _node_frame(frames, q, a, b, thr_m, thr_p):
    """Frame ``q`` becomes a fresh search node of part ``[a, b)`` whose placements must be
    canonical above ``(thr_m, thr_p)`` (-1: anything goes)."""
    frames[q, F_KIND] = NODE
    frames[q, F_A] = a
    frames[q, F_B] = b
    frames[q, F_THR_M] = thr_m
    frames[q, F_THR_P] = thr_p
    frames[q, F_LAST_M] = -1
    frames[q, F_LAST_P] = -1
    frames[q, F_CUR] = -1
    frames[q, F_FIRST] = -1


@njit(cache=True)
def run(model, state, heur, limit, budget, zc, dom):
    """Advance the search by at most ``budget`` nodes (and ``limit`` nodes in all).

    Returns FOUND (``sol`` holds a placement), INFEASIBLE (the search space is exhausted),
    ABORTED (``limit`` nodes or ``reg[R_TRY_LIMIT]`` tries reached), PAUSED (``budget`` used
    up; call again) or NEED_TRAIL (grow the trail and call again). ``zc``: the overflow zone
    (see ``G_ILS``); ``dom``: None, or the variables' domains (``_in_domain``). Either is
    None or not for a whole run, so numba compiles a version for each and the branches
    cost the search without them nothing.
    """
    # read by name (KernelModel, SearchState); numba makes them plain locals
    size = model.size
    align = model.align
    lo = model.lo
    hi = model.hi
    adj_ptr = model.adj_ptr
    adj_idx = model.adj_idx
    adj_kind = model.adj_kind
    sec_ptr = model.sec_ptr
    sec_vars = model.sec_vars
    sec_cap = model.sec_cap
    vsec_ptr = model.vsec_ptr
    vsecs = model.vsecs
    span_lo = model.span_lo
    span_hi = model.span_hi
    by_lo = model.by_lo
    lo_idx = model.lo_idx
    width = model.width
    area = model.area
    has_elem = model.has_elem
    has_reg = model.has_reg
    need = model.need
    elem_starts = model.elem_starts
    rand_key = model.rand_key
    pair_i = model.pair_i
    pair_k = model.pair_k
    pair_kind = model.pair_kind
    params = model.geo
    off = state.off
    m = state.m
    pre = state.pre
    total = state.total
    wit = state.wit
    cuts = state.cuts
    sol = state.sol
    trail = state.trail
    frames = state.frames
    pieces = state.pieces
    reg = state.reg
    tmp_vars = state.tmp_vars
    tmp_key = state.tmp_key
    witv = state.witv
    smin = state.smin
    # the geometry as scalars (see G_ILS ...): read once, not at every use in the hot loops
    ils = params[G_ILS]
    nrs = params[G_NRS] != 0
    tm = params[G_TM]
    used = 0
    while True:
        sp = reg[R_SP]
        mode = reg[R_MODE]
        if sp < 0:
            return FOUND if mode == SUCC else INFEASIBLE
        if frames[sp, F_KIND] == DECOMP:
            if mode == FAIL:
                _undo(frames[sp, F_MARK], model, state)
                reg[R_PT] = frames[sp, F_P0]
                reg[R_SP] = sp - 1
                continue
            # ENTER or SUCC: the next part. The parts solved before it stay placed: the
            # parts share no unplaced variable, section or interaction (no unplaced
            # variable spans a zero cut, and interacting variables' spans meet), so they
            # change nothing the next part reads. A part that fails undoes them all (the
            # FAIL above, to the mark); a descent that succeeds undoes nothing (the run is
            # reset before the next). Undoing each solved part, as before, cost as much as
            # placing it: without it the kernel took 15 % less time on 20 Mk2 tiles.
            if frames[sp, F_PI] == frames[sp, F_PN]:
                reg[R_PT] = frames[sp, F_P0]
                reg[R_SP] = sp - 1
                reg[R_MODE] = SUCC
                continue
            if reg[R_TL] + len(off) + 1 > trail.shape[0]:
                return NEED_TRAIL
            p = frames[sp, F_P0] + frames[sp, F_PI]
            frames[sp, F_PI] += 1
            reg[R_PARTS] += 1
            a = pieces[p, 0]
            b = pieces[p, 1]
            _preorder(a, b, heur, off, pre, total, vsec_ptr, vsecs, by_lo, lo_idx, width,
                      area, rand_key, hi, size, trail, reg, tmp_vars, tmp_key, has_elem)
            q = sp + 1
            _node_frame(frames, q, a, b, -1, -1)
            reg[R_SP] = q
            reg[R_MODE] = ENTER
            continue
        # ---- NODE frame ----
        a = frames[sp, F_A]
        b = frames[sp, F_B]
        v0 = lo_idx[a]
        v1 = lo_idx[b]
        if mode == SUCC:  # a child solved the rest of this part
            reg[R_SP] = sp - 1
            continue
        if mode == ENTER:
            if used >= budget:
                return PAUSED
            if reg[R_NODES] >= limit:
                return ABORTED
            used += 1
            reg[R_NODES] += 1
            mh, first, any_left = _enter_scan(v0, v1, by_lo, off, m, pre, size, has_elem,
                                              has_reg, elem_starts, ils, tm, zc,
                                              frames[sp, F_THR_M], frames[sp, F_THR_P])
            if not any_left:
                reg[R_SP] = sp - 1
                reg[R_MODE] = SUCC
                continue
            if len(pair_i) and not _partners_ok(frames[sp, F_THR_M], a, b, size, align, lo, hi,
                                                ils, nrs, tm, zc, elem_starts, span_lo, off, m,
                                                pair_i, pair_k, pair_kind, model.pair_thr,
                                                dom):
                reg[R_SP] = sp - 1
                reg[R_MODE] = FAIL
                continue
            # every later placement is at or above o: o + total <= capacity in each section
            # (the least slack of the part's sections with something unplaced, from the tree)
            least = _seg_min(smin, a, b)
            if least < INF and least + 1 < mh:
                mh = least + 1
            frames[sp, F_MH] = mh
            frames[sp, F_FIRST] = first
            reg[R_MODE] = NEXT
            continue
        # NEXT or FAIL: undo the last candidate (if any), then try the next one
        c = frames[sp, F_CUR]
        if c >= 0:
            _undo(frames[sp, F_MARK], model, state)
            frames[sp, F_CUR] = -1
            if frames[sp, F_HAT] == 0:
                # nothing unplaced interacts with c: every solution here places c there
                reg[R_SP] = sp - 1
                reg[R_MODE] = FAIL
                continue
        last_m = frames[sp, F_LAST_M]
        last_p = frames[sp, F_LAST_P]
        thr_m = frames[sp, F_THR_M]
        thr_p = frames[sp, F_THR_P]
        mh = frames[sp, F_MH]
        best = -1
        best_m = INF
        best_p = INF
        if last_m < 0:
            # the first try: the least canonical candidate, found at ENTER
            k = frames[sp, F_FIRST]
            if k >= 0 and m[k] < mh:
                best = k
                best_m = m[k]
                best_p = pre[k]
        else:
            best = _next_candidate(v0, v1, by_lo, off, m, pre, mh, thr_m, thr_p, last_m, last_p)
            if best >= 0:
                best_m = m[best]
                best_p = pre[best]
        if best < 0:
            reg[R_SP] = sp - 1
            reg[R_MODE] = FAIL
            continue
        c = best
        if reg[R_TL] + need[c] > trail.shape[0]:
            return NEED_TRAIL
        if reg[R_TRIES] >= reg[R_TRY_LIMIT]:
            return ABORTED
        reg[R_TRIES] += 1
        frames[sp, F_LAST_M] = best_m
        frames[sp, F_LAST_P] = best_p
        frames[sp, F_MARK] = reg[R_TL]
        frames[sp, F_CUR] = c
        o = best_m
        status = _place(c, o, size, align, lo, hi, ils, nrs, tm, zc, adj_ptr, adj_idx,
                        adj_kind, elem_starts, sec_ptr, sec_vars, sec_cap, vsec_ptr, vsecs,
                        span_lo, span_hi, off, m, total, wit, witv, cuts, trail, reg,
                        smin, state.wcnt, dom)
        frames[sp, F_HAT] = 1 if status & 2 else 0
        if not status & 1:
            reg[R_MODE] = FAIL
            continue
        sol[c] = o
        q = sp + 1
        if status & 4:  # a new zero cut inside [a, b): split into independent parts
            p0 = reg[R_PT]
            pn = 0
            s0 = a
            for s in range(a, b):
                if s == b - 1 or cuts[s] == 0:
                    # part [s0, s + 1): keep it when something in it is unplaced
                    for t in range(lo_idx[s0], lo_idx[s + 1]):
                        if off[by_lo[t]] < 0:
                            pieces[p0 + pn, 0] = s0
                            pieces[p0 + pn, 1] = s + 1
                            pn += 1
                            break
                    s0 = s + 1
            reg[R_PT] = p0 + pn
            frames[q, F_KIND] = DECOMP
            frames[q, F_P0] = p0
            frames[q, F_PN] = pn
            frames[q, F_PI] = 0
            frames[q, F_MARK] = reg[R_TL]
        else:
            _node_frame(frames, q, a, b, o, best_p)
        reg[R_SP] = q
        reg[R_MODE] = ENTER


# The scans below, _place, _undo and _partners_ok are compiled without reference counting
# (``_nrt=False``: they allocate nothing). With it, every array an inlined helper reads in
# their loops (the element starts of ``_after``, per neighbour and per variable) cost an
# atomic increment and decrement: a quarter of the search's time on Mk2 tiles.
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


@njit(cache=True)
def pair_thresholds(pair_i, pair_k, pair_kind, size, align, lo, hi, elem_starts, geo, zc, cap,
                    dom):
    """For each partner pair, the highest ``x`` at which ``_pair_fits`` holds with ``o``,
    ``mi`` and ``mk`` all at ``x`` (-1 when not even at 0): by its monotony the pair fits
    whenever all three are at or below it, so ``_partners_ok`` skips it then (on Mk2 tiles
    the pairs' look-ahead was a fifth of the search's time)."""
    ils, nrs, tm = geo[G_ILS], geo[G_NRS] != 0, geo[G_TM]
    out = np.empty(len(pair_i), np.int64)
    for e in range(len(pair_i)):
        i = pair_i[e]
        k = pair_k[e]
        kd = pair_kind[e]
        if not _pair_fits(i, k, kd, 0, 0, 0, size, align, lo, hi, ils, nrs, tm, zc,
                          elem_starts, dom):
            out[e] = -1
            continue
        a = 0        # fits
        b = cap + 1  # the first that does not, or past every bound
        while b - a > 1:
            mid = (a + b) >> 1
            if _pair_fits(i, k, kd, mid, mid, mid, size, align, lo, hi, ils, nrs, tm, zc,
                          elem_starts, dom):
                a = mid
            else:
                b = mid
        out[e] = a
    return out


@njit(cache=True, _nrt=False)
def _partners_ok(o, a, b, size, align, lo, hi, ils, nrs, tm, zc, elem_starts, span_lo, off, m,
                 pair_i, pair_k, pair_kind, pair_thr, dom):
    """Two element (region) partners both unplaced in part ``[a, b)``: one goes first, at or
    above ``o``, and the other wholly past its last element (region). False if neither order
    fits for some pair (``_pair_fits``; a pair whose ``o`` and lower bounds are all at or
    below its ``pair_thr`` fits without looking). (With a zone both may go past tileMemory:
    no look-ahead then.)"""
    if zc is not None:
        return True
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
                          tm, zc, elem_starts, dom):
            return False
    return True


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
        # sections are looked at, not all of the part's (on Mk2 tiles ~3,000 a node).
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


