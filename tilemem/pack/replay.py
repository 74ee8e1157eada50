"""First fit of every tile of a report in the order its allocator wrote, in one compiled pass.

``replay_first_fit(report)`` is ``firstfit.first_fit`` on each tile's ``TileProblem`` in the
tile's ``allocationOrderByTile``, tile after tile, with the same offsets: the Poplar-like
allocator the generator places its reports with (``tilemem.generate``). Why a module of its
own: built tile by tile in Python, each tile's problem (its rows, classes, conflict matrix and
partner pairs) cost several times its placement on the small tiles of the tests' reports,
and the generator replays thousands of tiles per report while it calibrates; here the whole
report's columns are prepared once with numpy and each tile's arrays are gathered in
compiled code.

>>> from tilemem.model import Report
>>> r = Report.from_columns(var_id=[0, 1, 2, 3], tile=[0, 0, 0, 1], size=[6, 8, 4, 4],
...     alignment=[4, 16, 4, 4], offset=[0] * 4, category=["variable"] * 4,
...     eq_class=[0, 0, 1, 1], interference=[[], []], allocation_order=[[2, 1, 0], [3]])
>>> replay_first_fit(r).tolist()   # tile 0 in order 2, 1, 0: var 0 after its class-mate 1
[8, 0, 0, 0]
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from ..jit import njit

from ..liveness import sorted_interference
from ..liveness.conflicts import class_conflicts
from ..model import Csr, Report
from ..rules import DEFAULT_RULES, Rules, effective_alignment
from .firstfit import place_arrays
from .guard import element_bounds_of
from .problem import windows


def replay_first_fit(r: Report, rules: Rules = DEFAULT_RULES,
                     advance: Callable[[int], None] | None = None) -> np.ndarray:
    """Offsets (int64, one per row; 0 for rows not allocated) of first fit on every tile, each
    in its ``allocation_order`` (entries not among the tile's allocated rows are ignored;
    the tile's rows it misses follow it in row order): tile by tile the same as
    ``first_fit(TileProblem.from_report(r, t, rules), local order)``. ``advance(k)`` is called
    after each batch of ``k`` tiles (a progress bar)."""
    T = r.num_tiles
    alloc = np.flatnonzero(r.allocated)
    rows = alloc[np.argsort(r.tile[alloc], kind="stable")].astype(np.int64)
    tile_ptr = np.zeros(T + 1, np.int64)
    np.cumsum(np.bincount(r.tile[rows], minlength=T)[:T], out=tile_ptr[1:])
    # each tile's classes (its conflict structure's local classes: sorted global ids)
    c = max(r.num_classes, 1)
    key = r.tile[rows].astype(np.int64) * c + r.eq_class[rows]
    nodes, node_of_row = np.unique(key, return_inverse=True)
    node_ptr = np.zeros(T + 1, np.int64)
    np.cumsum(np.bincount(nodes // c, minlength=T)[:T], out=node_ptr[1:])
    local_class = (node_of_row.ravel() - node_ptr[r.tile[rows]]).astype(np.int64)
    lo, hi = windows(r, slice(None), rules)
    inter = sorted_interference(r)
    eptr, eidx = _symmetric(r.element_constraints, r.num_vars)
    rptr, ridx = _symmetric(r.region_constraints, r.num_vars)
    order = r.allocation_order
    t = r.target
    out = np.full(r.num_vars, -1, np.int64)
    glob2loc = np.full(r.num_vars, -1, np.int64)
    mark = np.full(max(inter.num_rows, 1), -1, np.int64)
    args = (tile_ptr, rows, node_ptr, (nodes % c).astype(np.int64), local_class,
            r.size.astype(np.int64), effective_alignment(r.alignment).astype(np.int64), lo, hi,
            r.always_live.astype(np.bool_), inter.indptr.astype(np.int64),
            inter.indices.astype(np.int64), eptr, eidx, rptr, ridx,
            _padded(order.indptr, T), order.indices.astype(np.int64),
            element_bounds_of(t), np.int64(t.tile_memory),
            np.int64(t.interleaved_memory_start), bool(rules.no_region_span),
            # first fit, as a value: a literal False in the compiled call would compile
            # place_arrays a second time (numba types it as a literal, not a bool)
            False)
    # batches of tiles, so that a progress bar moves (a hundred steps over the report)
    step = max(1, T // 100)
    for t0 in range(0, T, step):
        t1 = min(T, t0 + step)
        _replay(*args, np.int64(t0), np.int64(t1), out, glob2loc, mark)
        if advance is not None:
            advance(t1 - t0)
    return np.maximum(out, 0)


def _symmetric(csr: Csr, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A constraint CSR over rows with every pair in both directions, self entries dropped."""
    if csr.nnz == 0:
        return np.zeros(n + 1, np.int64), np.zeros(0, np.int64)
    src, dst = csr.row_ids().astype(np.int64), csr.indices.astype(np.int64)
    keep = src != dst
    key = np.unique(np.concatenate([src[keep] * n + dst[keep], dst[keep] * n + src[keep]]))
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(key // n, minlength=n)[:n], out=ptr[1:])
    return ptr, key % n


def _padded(indptr: np.ndarray, T: int) -> np.ndarray:
    """A CSR's ``indptr`` over ``T`` rows (a shorter one: the rows past it are empty)."""
    p = np.asarray(indptr, np.int64)
    return np.concatenate([p, np.full(max(0, T + 1 - len(p)), p[-1] if len(p) else 0)])[:T + 1]


@njit(cache=True)
def _local_adjacency(rws, ptr, idx, glob2loc):
    """The partners among a tile's rows ``rws`` (global ``ptr``/``idx``) as local CSR."""
    n = len(rws)
    lptr = np.zeros(n + 1, np.int64)
    total = 0
    for i in range(n):
        total += ptr[rws[i] + 1] - ptr[rws[i]]
    lidx = np.empty(total, np.int64)
    m = 0
    for i in range(n):
        for q in range(ptr[rws[i]], ptr[rws[i] + 1]):
            j = glob2loc[idx[q]]
            if j >= 0:
                lidx[m] = j
                m += 1
        lptr[i + 1] = m
    return lptr, lidx[:m].copy()


@njit(cache=True)
def _replay(tile_ptr, rows, node_ptr, node_class, local_class, size, align, lo, hi, always,
            g_ptr, g_idx, eptr, eidx, rptr, ridx, optr, orows, bounds, tm, ils, no_span,
            best_fit, t0, t1, out, glob2loc, mark):
    """First (``best_fit`` false) fit of the tiles ``t0..t1-1`` into ``out``
    (``replay_first_fit``'s columns);
    ``glob2loc``: -1 per row on entry and on return."""
    for t in range(t0, t1):
        a, b = tile_ptr[t], tile_ptr[t + 1]
        n = b - a
        if n == 0:
            continue
        rws = rows[a:b].copy()
        for i in range(n):
            glob2loc[rws[i]] = i
        matrix, cptr, cidx = class_conflicts(node_class[node_ptr[t]:node_ptr[t + 1]].copy(),
                                             g_ptr, g_idx, mark)
        le_ptr, le_idx = _local_adjacency(rws, eptr, eidx, glob2loc)
        lr_ptr, lr_idx = _local_adjacency(rws, rptr, ridx, glob2loc)
        # the order: the tile's entries (first occurrences), then the rows it misses
        order = np.empty(n, np.int64)
        seen = np.zeros(n, np.bool_)
        k = 0
        for q in range(optr[t], optr[t + 1]):
            j = glob2loc[orows[q]] if 0 <= orows[q] < len(glob2loc) else -1
            if j >= 0 and not seen[j]:
                seen[j] = True
                order[k] = j
                k += 1
        for j in range(n):
            if not seen[j]:
                order[k] = j
                k += 1
        off = place_arrays(size[rws], align[rws], lo[rws], hi[rws],
                           local_class[a:b].copy(), always[rws], matrix, cptr, cidx, le_ptr,
                           le_idx, lr_ptr, lr_idx, bounds, tm, ils, no_span, order, best_fit)
        for i in range(n):
            out[rws[i]] = off[i]
            glob2loc[rws[i]] = -1
