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

The kernel is this loop; its helpers live by job: ``layout`` (the numbers its arrays speak),
``legal`` (where a variable may go), ``candidates`` (which variable a node tries),
``propagate`` (a placement and its undoing), ``partners`` (the partner look-ahead). Their
names are re-exported here.
"""
from __future__ import annotations

from ...jit import njit

from ..guard import INF, K_CONFLICT, K_ELEMENT, K_REGION  # noqa: F401 (re-exported)
from .candidates import _enter_scan, _next_candidate, _preorder
from .layout import (  # noqa: F401 (re-exported)
    ABORTED, DECOMP, ENTER, F_A, F_B, F_CUR, F_FIRST, F_HAT, F_KIND, F_LAST_M, F_LAST_P,
    F_MARK, F_MH, F_P0, F_PI, F_PN, F_THR_M, F_THR_P, FAIL, FOUND, G_ILS, G_NRS, G_TM,
    INFEASIBLE, KEY_A, KEY_D, KEY_Q, KEY_R, KEY_T, KEY_W, KEY_Z, NEED_TRAIL, NEXT, NODE,
    NUM_FIELDS, NUM_REGS, PAUSED, R_MODE, R_NODES, R_PARTS, R_PT, R_SP, R_TL, R_TRIES,
    R_TRY_LIMIT, SUCC, T_M, T_OFF, T_PRE, T_WIT)
from .legal import _after, _in_domain, _norm, dominance_height, lowest_offsets  # noqa: F401
from .partners import _pair_fits, _partners_ok, pair_thresholds  # noqa: F401
from .propagate import _place, _seg_min, _undo, section_sums  # noqa: F401


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
            # reset before the next). Undoing each solved part would cost as much as
            # placing it.
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
