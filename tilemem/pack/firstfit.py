"""First-fit (and best-fit) placement of one tile's variables, compiled with numba.

Variables are placed one at a time, in a given order, each at the lowest address (first fit)
or in the tightest gap (best fit) that keeps every rule against the variables placed before
it: alignment, the variable's window, no region span (``rules.no_region_span``), no shared
byte with a conflicting variable, and disjoint touched elements / regions for element and
region constraints. A variable with no such place in memory spills to the overflow zone: the
lowest aligned address at or past ``tileMemory`` that overlaps no conflicting overflowed
variable. This is the Poplar-like allocator used to replay ``allocationOrderByTile``.

Why it is fast: placed intervals are kept in one array sorted by start, so placing a variable
is one forward sweep over them (skipping the non-conflicting ones), with no sort or gather per
variable; conflicts are tested by the liveness stage's compiled test against the conflict row
of the variable's class (``tilemem.liveness.conflicts_with``, ``conflict_row``), so the
conflict graph is never materialised per variable pair.
The rules of one variable and the element lookups are the guard's (``tilemem.pack.guard``).

A zero-size variable is placed as if it had one byte (it then provably touches nothing it
may not, whatever convention a checker uses for empty ranges).

>>> from tilemem.model import Report
>>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0, 0, 0], size=[6, 8, 4],
...     alignment=[4, 16, 4], offset=[0, 0, 0], category=["variable"] * 3,
...     eq_class=[0, 0, 1], interference=[[], []])
>>> from tilemem.pack.problem import TileProblem
>>> p = TileProblem.from_report(r, 0)
>>> first_fit(p).tolist()     # var 1 aligned to 16 after var 0 [0, 6); var 2 shares with 0
[0, 16, 0]
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from ..jit import njit

from ..liveness import ConflictArrays, clear_row, conflict_row, conflicts_with
from ..liveness.sorting import search_right
from .guard import align_up, element_bounds, element_of, lowest_legal
from .problem import TileProblem

#: Upper end of the overflow zone's search (effectively unbounded).
_FAR = np.int64(1) << 60


def first_fit(problem: TileProblem, order: np.ndarray | None = None, *,
              best_fit: bool = False) -> np.ndarray:
    """Local offsets (int64) of ``problem``'s variables placed in ``order`` (local indices).

    ``order`` defaults to ``0..n-1``; variables missing from it are placed after it, in index
    order. ``best_fit`` chooses, among the lowest legal positions of the free gaps, the one
    whose gap is tightest (XLA's best fit) instead of the lowest one.
    """
    args = kernel_args(problem)
    return place(args, complete_order(problem.n, order), best_fit)


def complete_order(n: int, order) -> np.ndarray:
    """``order`` (local indices, duplicates dropped) followed by the variables it misses."""
    if order is None:
        return np.arange(n, dtype=np.int64)
    order = np.asarray(order, np.int64)
    if len(order) == n and np.array_equal(np.sort(order), np.arange(n)):
        return order
    _, first = np.unique(order, return_index=True)
    order = order[np.sort(first)]
    missing = np.setdiff1d(np.arange(n, dtype=np.int64), order)
    return np.concatenate([order, missing]).astype(np.int64)


class FirstFitArgs(NamedTuple):
    """The plain arrays the compiled first fit takes (build once, place in many orders):
    sizes, alignments and windows, the conflict structure, element and region partners as
    CSR, the element starts, and the geometry."""

    size: np.ndarray
    align: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    conflicts: ConflictArrays
    eptr: np.ndarray
    eidx: np.ndarray
    rptr: np.ndarray
    ridx: np.ndarray
    bounds: np.ndarray
    tm: np.int64
    ils: np.int64
    no_span: bool


def kernel_args(p: TileProblem) -> FirstFitArgs:
    """The arrays of ``p`` the compiled first fit takes (``place``)."""
    t = p.target
    (eptr, eidx), (rptr, ridx) = p.element_adj, p.region_adj
    return FirstFitArgs(
        size=p.size.astype(np.int64), align=p.align.astype(np.int64), lo=p.lo.astype(np.int64),
        hi=p.hi.astype(np.int64), conflicts=p.conflicts.arrays, eptr=eptr, eidx=eidx,
        rptr=rptr, ridx=ridx, bounds=element_bounds(p), tm=np.int64(t.tile_memory),
        ils=np.int64(t.interleaved_memory_start), no_span=bool(p.rules.no_region_span))


def place(args: FirstFitArgs, order: np.ndarray, best_fit: bool = False) -> np.ndarray:
    """Run the kernel on ``kernel_args(problem)`` in a complete ``order``."""
    return _place(args, np.ascontiguousarray(order, np.int64), bool(best_fit))


@njit(cache=True)
def _legalise(a, s, al, lo, hi, ils, no_span, forb_e, any_forb_e, bounds, forb_r0, forb_r1):
    """Lowest address >= ``a`` that keeps the in-memory rules other than no-overlap, or -1:
    the variable's own (``guard.lowest_legal``), then no element or region that a placed
    partner touches."""
    while True:
        a = lowest_legal(a, s, al, lo, hi, ils, no_span)
        if a < 0:
            return -1
        if forb_r0 and a < ils:
            a = ils
            continue
        if forb_r1 and a + s > ils:
            return -1  # every higher address touches the interleaved region too
        if any_forb_e:
            e0 = element_of(bounds, a)
            e1 = element_of(bounds, a + s - 1)
            moved = False
            for e in range(e1, e0 - 1, -1):
                if forb_e[e]:
                    a = bounds[e + 1]
                    moved = True
                    break
            if moved:
                continue
        return a


@njit(cache=True)
def _sweep(s, al, lo, hi, in_memory, av, row, ps, pe, pa, pc, pmax, m, ils, no_span, forb_e,
           any_forb_e, bounds, forb_r0, forb_r1, best_fit):
    """Lowest (or best-fitting) legal address among the ``m`` placed intervals of a variable
    with always-live flag ``av`` and conflict row ``row`` (``tilemem.liveness.conflict_row``).

    ``ps``/``pe``: starts and ends sorted by start; ``pa``/``pc``: their variables' always-live
    flags and classes (tested with ``conflicts_with``); ``pmax``: prefix maximum of ``pe``, so
    the sweep starts at the first interval that can still reach past ``lo``.
    """
    a = align_up(lo, al)
    j = search_right(pmax[:m], a)
    best = np.int64(-1)
    best_slack = _FAR
    gap_lo = lo  # where the free gap holding ``a`` begins (for best fit)
    while True:
        if in_memory:
            a = _legalise(a, s, al, lo, hi, ils, no_span, forb_e, any_forb_e, bounds, forb_r0,
                          forb_r1)
            if a < 0:
                break
        elif a + s > hi:
            break
        # push a past every conflicting interval that overlaps it; the other rules are checked
        # again only once this settles (checking them after each push costs 3x more)
        moved = False
        top = a + s
        while j < m and ps[j] < top:
            if pe[j] > a and conflicts_with(av, row, pa[j], pc[j]):
                gap_lo = pe[j]
                a = align_up(gap_lo, al)
                top = a + s
                moved = True
                if top > hi:
                    break
            j += 1
        if moved:
            continue
        if not best_fit:
            return a
        # a is legal; the gap runs up to the next conflicting start (or the window's end)
        jj = j
        nxt = hi
        while jj < m:
            if conflicts_with(av, row, pa[jj], pc[jj]):
                if ps[jj] < nxt:
                    nxt = ps[jj]
                break
            jj += 1
        if in_memory and a < ils < nxt:
            nxt = ils  # the region boundary closes a gap too
        if in_memory and gap_lo < ils <= a:
            gap_lo = ils
        # waste if this gap is used: its whole length (not just above a) minus the size, so
        # a candidate pushed up inside a wide gap by an element rule does not look tight
        slack = nxt - gap_lo - s
        if nxt == hi:
            slack = _FAR  # the open top of the window: like XLA's unbounded heap, never tight
        if best < 0 or slack < best_slack:
            best_slack = slack
            best = a
        if jj >= m:
            break
        gap_lo = pe[jj]
        a = align_up(gap_lo, al)
        j = jj + 1
    return best


@njit(cache=True)
def _place(args, order, best_fit):
    c = args.conflicts
    return place_arrays(args.size, args.align, args.lo, args.hi, c.local_class, c.always_live,
                        c.class_matrix, c.class_ptr, c.class_idx, args.eptr, args.eidx,
                        args.rptr, args.ridx, args.bounds, args.tm, args.ils, args.no_span,
                        order, best_fit)


@njit(cache=True)
def place_arrays(size, align, lo, hi, lclass, always, matrix, cptr, cidx, eptr, eidx, rptr,
                 ridx, bounds, tm, ils, no_span, order, best_fit):
    """Compiled: ``place`` on the fields of ``FirstFitArgs`` (its ``conflicts`` spread as the
    five ``ConflictArrays``), for compiled callers that build one tile's arrays themselves
    (``tilemem.pack.replay``)."""
    n = len(size)
    off = np.full(n, -1, np.int64)
    ps = np.empty(n, np.int64)
    pe = np.empty(n, np.int64)
    scratch = np.zeros(len(cptr) - 1, np.bool_)
    pa = np.empty(n, np.bool_)
    pc = np.empty(n, np.int64)
    pmax = np.empty(n, np.int64)
    # typed from the start (np.int64, np.bool_), not literals: numba types a loop more than
    # once, and a literal 0 or False seen first compiled _sweep and _legalise once more for it
    m = np.int64(0)
    forb_e = np.zeros(len(bounds) - 1, np.bool_)
    for k in range(len(order)):
        v = order[k]
        s = max(size[v], 1)
        al = align[v]
        row = conflict_row(lclass[v], matrix, cptr, cidx, scratch)
        # elements and regions touched by placed, in-memory constraint partners
        any_forb_e = np.bool_(False)
        for q in range(eptr[v], eptr[v + 1]):
            u = eidx[q]
            if 0 <= off[u] < tm:
                e0 = element_of(bounds, off[u])
                e1 = element_of(bounds, off[u] + max(size[u], 1) - 1)
                for e in range(e0, e1 + 1):
                    forb_e[e] = True
                any_forb_e = True
        forb_r0 = np.bool_(False)
        forb_r1 = np.bool_(False)
        for q in range(rptr[v], rptr[v + 1]):
            u = ridx[q]
            if 0 <= off[u] < tm:
                if off[u] < ils:
                    forb_r0 = True
                if off[u] + max(size[u], 1) > ils:
                    forb_r1 = True
        a = np.int64(-1)
        if lo[v] + s <= hi[v]:
            a = _sweep(s, al, lo[v], hi[v], np.bool_(True), always[v], row, ps, pe, pa, pc, pmax,
                       m, ils, no_span, forb_e, any_forb_e, bounds, forb_r0, forb_r1,
                       np.bool_(best_fit))
        if a < 0:  # spill: first fit in the overflow zone, where only no-overlap applies
            # (every flag and bound typed as in the call above, np.bool_ and np.int64, though
            # unused without memory: as literals numba compiled _sweep and _legalise once
            # more for them)
            a = _sweep(s, al, tm, np.int64(_FAR), np.bool_(False), always[v], row, ps, pe, pa,
                       pc, pmax, m, ils, no_span, forb_e, np.bool_(False), bounds,
                       np.bool_(False), np.bool_(False), np.bool_(False))
        clear_row(lclass[v], matrix, cptr, cidx, scratch)
        if any_forb_e:
            forb_e[:] = False
        off[v] = a
        # insert [a, a + s) into the placed list, kept sorted by start
        pos = search_right(ps[:m], a)
        for q in range(m, pos, -1):
            ps[q] = ps[q - 1]
            pe[q] = pe[q - 1]
            pa[q] = pa[q - 1]
            pc[q] = pc[q - 1]
        ps[pos] = a
        pe[pos] = a + s
        pa[pos] = always[v]
        pc[pos] = lclass[v]
        m += 1
        run = pmax[pos - 1] if pos > 0 else np.int64(-1)
        for q in range(pos, m):
            if pe[q] > run:
                run = pe[q]
            pmax[q] = run
    return off
