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
  (``DECOMP``: solve its parts one after the other, each from the same state).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..guard import INF, K_CONFLICT, K_ELEMENT, K_REGION, align_up, bound_after, lowest_legal

# run() results
FOUND, INFEASIBLE, ABORTED, PAUSED, NEED_TRAIL = 1, 2, 3, 4, 5

# frame kinds and modes (what the top frame has to do next)
NODE, DECOMP = 0, 1
ENTER, NEXT, SUCC, FAIL = 0, 1, 2, 3

# frame fields
F_KIND, F_A, F_B, F_THR_M, F_THR_P, F_LAST_M, F_LAST_P, F_CUR, F_MARK, F_HAT, F_MH = range(11)
F_P0, F_PN, F_PI = 11, 12, 13
NUM_FIELDS = 14

# registers
# R_TRY_LIMIT: ABORTED once R_TRIES (candidates placed, at every node) reaches it. A node
# limit alone does not bound a descent's work: a descent gone wrong can try thousands of
# candidates at a node (on Mk2 tiles, 128,000 tries in 1,900 nodes: 1 s instead of 0.05)
R_SP, R_MODE, R_NODES, R_TL, R_PT, R_TRIES, R_PARTS, R_TRY_LIMIT = range(8)
NUM_REGS = 8

# trail record kinds
T_OFF, T_M, T_PRE = range(3)

# interaction kinds (bits of adj_kind): the guard's K_CONFLICT, K_ELEMENT, K_REGION

# static order keys: W(idth), A(rea), T(otal of the sections) and R (a given random or hint
# key) descending as in MiniMalloc; D(eadline: the end of the window) ascending
KEY_W, KEY_A, KEY_T, KEY_R, KEY_D, KEY_Z = 0, 1, 2, 3, 4, 5


# the geometry array ``geo``: interleavedMemoryStart, no region span (0/1), tileMemory. The
# overflow zone is an argument of its own, ``zc``: None (no zone: the search places only in
# memory) or the capacity up to which it may place past tileMemory (only alignment and
# no-overlap apply there). None is a type of its own to numba, so the kernel is compiled
# twice and the zone's branches cost nothing to the search in memory.
G_ILS, G_NRS, G_TM = range(3)



@njit(cache=True, inline="always")
def _norm(k, b, size, align, lo, hi, ils, nrs, tm, zc):
    """Lowest legal offset of ``k`` at or above ``b`` (INF if none): in its window in memory,
    else (with a zone) the first aligned offset past tileMemory. A window ends at or below
    tileMemory, so no offset found either way straddles it."""
    x = lowest_legal(b, size[k], align[k], lo[k], hi[k], ils, nrs)
    if x >= 0:
        return x
    if zc is not None:
        z = align_up(b if b > tm else tm, align[k])
        if z + size[k] <= zc:
            return z
    return INF


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
def lowest_offsets(size, align, lo, hi, geo, zc):
    """``_norm`` of every variable from 0: its lowest legal offset on its own."""
    ils, nrs, tm = geo[G_ILS], geo[G_NRS] != 0, geo[G_TM]
    out = np.empty(len(size), np.int64)
    for k in range(len(size)):
        out[k] = _norm(k, 0, size, align, lo, hi, ils, nrs, tm, zc)
    return out


@njit(cache=True)
def _undo(mark, trail, reg, off, m, total, cuts, pre, size, vsec_ptr, vsecs, span_lo, span_hi):
    """Undo the trail down to ``mark``. A placement's record (``T_OFF``) also stands for what
    every placement changes the same way: the totals of its sections and the cuts across its
    span, restored here from the model rather than written to the trail (on Mk2 tiles they
    were most of it: ~100 MB a descent, allocated and zeroed for each probe)."""
    tl = reg[R_TL]
    while tl > mark:
        tl -= 1
        kind = trail[tl, 0]
        i = trail[tl, 1]
        v = trail[tl, 2]
        if kind == T_M:
            m[i] = v
        elif kind == T_OFF:
            off[i] = v
            for e in range(vsec_ptr[i], vsec_ptr[i + 1]):
                total[vsecs[e]] += size[i]
            for s in range(span_lo[i], span_hi[i] - 1):
                cuts[s] += 1
        else:
            pre[i] = v
    reg[R_TL] = tl


@njit(cache=True)
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


@njit(cache=True)
def run(model, state, heur, limit, budget, zc):
    """Advance the search by at most ``budget`` nodes (and ``limit`` nodes in all).

    Returns FOUND (``sol`` holds a placement), INFEASIBLE (the search space is exhausted),
    ABORTED (``limit`` nodes or ``reg[R_TRY_LIMIT]`` tries reached), PAUSED (``budget`` used
    up; call again) or NEED_TRAIL (grow the trail and call again).
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
                _undo(frames[sp, F_MARK], trail, reg, off, m, total, cuts, pre, size, vsec_ptr,
                      vsecs, span_lo, span_hi)
                reg[R_PT] = frames[sp, F_P0]
                reg[R_SP] = sp - 1
                continue
            # ENTER or SUCC: start the next part from the state at decomposition time
            if frames[sp, F_PI] == frames[sp, F_PN]:
                _undo(frames[sp, F_MARK], trail, reg, off, m, total, cuts, pre, size, vsec_ptr,
                      vsecs, span_lo, span_hi)
                reg[R_PT] = frames[sp, F_P0]
                reg[R_SP] = sp - 1
                reg[R_MODE] = SUCC
                continue
            if reg[R_TL] + len(off) + 1 > trail.shape[0]:
                return NEED_TRAIL
            _undo(frames[sp, F_MARK], trail, reg, off, m, total, cuts, pre, size, vsec_ptr,
                      vsecs, span_lo, span_hi)
            p = frames[sp, F_P0] + frames[sp, F_PI]
            frames[sp, F_PI] += 1
            reg[R_PARTS] += 1
            a = pieces[p, 0]
            b = pieces[p, 1]
            _preorder(a, b, heur, off, pre, total, vsec_ptr, vsecs, by_lo, lo_idx, width,
                      area, rand_key, hi, size, trail, reg, tmp_vars, tmp_key)
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
            mh = INF
            any_left = False
            for t in range(v0, v1):
                k = by_lo[t]
                if off[k] >= 0:
                    continue
                any_left = True
                # the height is at least the end of k at m[k]: look it up (a search of the
                # element bounds) only when that could lower mh
                if m[k] + size[k] < mh:
                    h = dominance_height(k, m, size, has_elem, has_reg, elem_starts, ils,
                                         tm, zc)
                    if h < mh:
                        mh = h
            if not any_left:
                reg[R_SP] = sp - 1
                reg[R_MODE] = SUCC
                continue
            if len(pair_i) and not _partners_ok(frames[sp, F_THR_M], a, b, size, align, lo, hi,
                                                ils, nrs, tm, zc, elem_starts, span_lo, off, m,
                                                pair_i, pair_k, pair_kind):
                reg[R_SP] = sp - 1
                reg[R_MODE] = FAIL
                continue
            # every later placement is at or above o: o + total <= capacity in each section
            for s in range(a, b):
                t = total[s]
                if t > 0 and sec_cap[s] - t + 1 < mh:
                    mh = sec_cap[s] - t + 1
            frames[sp, F_MH] = mh
            reg[R_MODE] = NEXT
            continue
        # NEXT or FAIL: undo the last candidate (if any), then try the next one
        c = frames[sp, F_CUR]
        if c >= 0:
            _undo(frames[sp, F_MARK], trail, reg, off, m, total, cuts, pre, size, vsec_ptr,
                      vsecs, span_lo, span_hi)
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
        status = _place(c, o, a, b, size, align, lo, hi, ils, nrs, tm, zc, adj_ptr, adj_idx,
                        adj_kind, elem_starts, sec_ptr, sec_vars, sec_cap, vsec_ptr, vsecs,
                        span_lo, span_hi, off, m, total, wit, witv, cuts, trail, reg)
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


@njit(cache=True)
def _partners_ok(o, a, b, size, align, lo, hi, ils, nrs, tm, zc, elem_starts, span_lo, off, m,
                 pair_i, pair_k, pair_kind):
    """Two element (region) partners both unplaced in part ``[a, b)``: one goes first, at or
    above ``o``, and the other wholly past its last element (region). False if neither order
    fits for some pair. (With a zone both may go past tileMemory: no look-ahead then.)"""
    if zc is not None:
        return True
    for e in range(len(pair_i)):
        i = pair_i[e]
        k = pair_k[e]
        if off[i] >= 0 or off[k] >= 0:
            continue
        if span_lo[i] < a or span_lo[i] >= b:
            continue
        kd = pair_kind[e]
        xi = _norm(i, m[i] if m[i] > o else o, size, align, lo, hi, ils, nrs, tm, zc)
        if xi < INF:
            bk = _after(kd, xi + size[i], elem_starts, ils, tm, zc)
            if _norm(k, bk if bk > m[k] else m[k], size, align, lo, hi, ils, nrs, tm, zc) < INF:
                continue
        xk = _norm(k, m[k] if m[k] > o else o, size, align, lo, hi, ils, nrs, tm, zc)
        if xk < INF:
            bi = _after(kd, xk + size[k], elem_starts, ils, tm, zc)
            if _norm(i, bi if bi > m[i] else m[i], size, align, lo, hi, ils, nrs, tm, zc) < INF:
                continue
        return False
    return True


@njit(cache=True)
def _place(c, o, a, b, size, align, lo, hi, ils, nrs, tm, zc, adj_ptr, adj_idx, adj_kind,
           elem_starts, sec_ptr, sec_vars, sec_cap, vsec_ptr, vsecs, span_lo, span_hi, off, m,
           total, wit, witv, cuts, trail, reg):
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
        total[vsecs[e]] -= size[c]
    split = False
    for s in range(span_lo[c], span_hi[c] - 1):
        cuts[s] -= 1
        if cuts[s] == 0:
            split = True
    hat = False
    ok = True
    for e in range(adj_ptr[c], adj_ptr[c + 1]):
        i = adj_idx[e]
        if off[i] >= 0:
            continue
        hat = True
        bnd = _after(adj_kind[e], top, elem_starts, ils, tm, zc)
        if bnd <= m[i]:
            continue
        nm = _norm(i, bnd, size, align, lo, hi, ils, nrs, tm, zc)
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
        # Since o + total <= capacity already holds (see ENTER), the section fails exactly
        # when no unplaced member has m <= capacity - total. A member that does is cached
        # as the section's witness (a hint only: it is re-checked on every use): the
        # variable (``witv``, read first: the sections' member list, ~1 M entries on a Mk2
        # tile, is too big to stay in cache) and its position in the section (``wit``). A
        # new one is looked for from the old one onwards, round the section once: members
        # behind the pointer were mostly placed already, so starting from the front each
        # time made the scans quadratic (20,000 steps a node on Mk2 tiles).
        for s in range(a, b):
            t = total[s]
            if t > 0:
                slack = sec_cap[s] - t
                if o > slack:
                    ok = False
                    break
                w = witv[s]
                if off[w] < 0 and m[w] <= slack:
                    continue
                if not _new_witness(s, slack, sec_ptr, sec_vars, off, m, wit, witv):
                    ok = False
                    break
    reg[R_TL] = tl
    return (1 if ok else 0) | (2 if hat else 0) | (4 if split else 0)


@njit(cache=True, inline="always")
def _new_witness(s, slack, sec_ptr, sec_vars, off, m, wit, witv):
    """Point ``wit[s]`` (``witv[s]``: the variable there) at an unplaced member of section
    ``s`` with ``m <= slack``, searching from the current witness onwards and round; False
    when there is none."""
    s0 = sec_ptr[s]
    s1 = sec_ptr[s + 1]
    w = wit[s]
    for e in range(w + 1, s1):
        k = sec_vars[e]
        if off[k] < 0 and m[k] <= slack:
            wit[s] = e
            witv[s] = k
            return True
    for e in range(s0, w + 1):
        k = sec_vars[e]
        if off[k] < 0 and m[k] <= slack:
            wit[s] = e
            witv[s] = k
            return True
    return False


@njit(cache=True)
def _preorder(a, b, heur, off, pre, total, vsec_ptr, vsecs, by_lo, lo_idx, width, area,
              rand_key, hi, size, trail, reg, tmp_vars, tmp_key):
    """Rank the unplaced variables of part ``[a, b)`` by the static ordering ``heur`` (keys
    descending, then variable index): the tie-break of the dynamic order and of canonicity."""
    n = 0
    for t in range(lo_idx[a], lo_idx[b]):
        k = by_lo[t]
        if off[k] < 0:
            tmp_vars[n] = k
            n += 1
    vs = np.sort(tmp_vars[:n])
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
            else:
                tt = 0
                for e in range(vsec_ptr[k], vsec_ptr[k + 1]):
                    if total[vsecs[e]] > tt:
                        tt = total[vsecs[e]]
                key[j] = -tt
        order = np.argsort(key, kind="mergesort")
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


