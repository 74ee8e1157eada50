"""The search on part of a tile: the free variables' model, the rest fixed where they are.

``restricted_model`` makes a ``SearchModel`` of the variables ``free`` of a tile whose other
variables keep their offsets. The fixed variables are not in the model: where they are rules
out addresses for the free ones, and what is left is each free variable's *domain* (start
ranges, ``SearchModel.domains``; ``legal._in_domain``):

- a fixed variable that conflicts with a free one bans the starts that would overlap its
  bytes (in memory or past tileMemory);
- a fixed element (region) partner in memory bans every start that would touch one of the
  elements (regions) it touches

(``fixed_bans``: the one statement of it, which CP-SAT's neighbourhoods read too).

The rest of the model is the tile's restricted to the free variables: its sections (cliques
of the conflict graph stay cliques) in their order, the interactions among the free
variables, spans grown again so interacting spans meet, the canonical rank's order.

Why a model of its own rather than fixed variables placed first: the search places bottom-up
and every placed variable lies at or below the current offset; a variable fixed above it is
an obstacle its lower bounds (``m``) know nothing of, so the free variables would take its
place (with variables fixed by windows of their own size instead, the search finds the rest
only at a far higher end). In the domains
the obstacles are part of every lower bound from the start.

What stays sound: a placement the search finds keeps every rule with the fixed variables
(domains) and among the free ones (the kernel). The section check counts the free bytes only
(the fixed members' bytes are not subtracted), which is weaker, not wrong. The search stays
complete: in a left-justified placement each free variable still sits at its lowest legal
offset above the free ones below it, which the domains make legal beside the fixed ones too
(moving a variable down never meets one above it that it conflicts with); the tests check
it against brute force. But ``solve_restricted`` cuts its descents short, so in practice a
neighbourhood that fails proves nothing: it is just not an improvement.

>>> from tilemem.model import Report
>>> from tilemem.pack.problem import TileProblem
>>> from tilemem.pack.search.sweep import build_model
>>> r = Report.from_columns(var_id=range(3), tile=[0] * 3, size=[8, 8, 8],
...     alignment=[4] * 3, offset=[0] * 3, category=["variable"] * 3,
...     eq_class=[0, 1, 2], interference=[[1, 2], [0], [0]])
>>> p = TileProblem.from_report(r, 0)
>>> sub = restricted_model(p, build_model(p), np.array([8, 0, 16]), np.array([0]), 32)
>>> sub.n, [x.tolist() for x in sub.domains]   # var 0 starts at 8, or from 24 to 31
(1, [[0, 2], [8, 24], [8, 31]])
"""
from __future__ import annotations

import itertools
import time
from dataclasses import replace

import numpy as np
from ...jit import njit

from ...liveness.sorting import argsort
from ..guard import K_CONFLICT, K_ELEMENT, K_REGION, element_of
from ..kinds import SearchStatus
from ..lattice import aligned_grain
from ..params import DEFAULT_PARAMS, SolverParams
from ..problem import TileProblem
from . import builders as B
from .builders import ADJ_IDX, ADJ_KIND
from .sweep import SearchModel


def solve_restricted(p: TileProblem, offsets: np.ndarray, free: np.ndarray, cap: int,
                     time_limit: float, seed: int = 0, max_descents: int | None = None,
                     params: SolverParams = DEFAULT_PARAMS) -> np.ndarray | None:
    """New offsets for the variables ``free`` of ``p`` (the rest kept at ``offsets``), every
    one ending at or below ``cap``, by the search's short descents on ``restricted_model``:
    the whole tile's offsets, or None when none was found in ``time_limit`` seconds (or the
    first descents exhausted the space). The first descent follows the free variables'
    present order by offset (the R key), the next ones ``PROBE_ORDERINGS`` and perturbed
    orders (``params.restarts``), each cut at ``probe_limit`` nodes (as the quick search's
    probes are), at most ``max_descents`` of them.

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=range(3), tile=[0] * 3, size=[8, 8, 8],
    ...     alignment=[4] * 3, offset=[0] * 3, category=["variable"] * 3,
    ...     eq_class=[0, 1, 2], interference=[[1], [0], []])
    >>> p = TileProblem.from_report(r, 0)
    >>> solve_restricted(p, np.array([0, 16, 0]), np.array([1]), 16, 5).tolist()
    [0, 8, 0]
    >>> solve_restricted(p, np.array([0, 16, 0]), np.array([1]), 12, 5) is None
    True
    """
    from . import kernel as K
    from .run import SearchRun
    from .orders import PROBE_ORDERINGS, RandomRestarts, probe_limit, static_order
    from .sweep import model_of

    deadline = time.perf_counter() + max(float(time_limit), 0.0)
    off = np.asarray(offsets, np.int64)
    free = np.unique(np.asarray(free, np.int64))
    sub = restricted_model(p, model_of(p), off, free, cap)
    run = SearchRun(sub, int(cap))
    if run.verdict is not None:
        if run.verdict != SearchStatus.OPTIMAL:
            return None
        return off.copy()
    canonical = sub.n - sub.rank
    hinted = -off[free]    # descending: the lowest offset first
    limit = probe_limit(sub.n, params)
    run.try_limit = limit
    restarts = RandomRestarts(sub, np.random.default_rng(seed), params)
    orders = ("R",) + PROBE_ORDERINGS
    for i in itertools.count():
        if i < len(orders):
            heur = static_order(run, orders[i], hinted, canonical)
        else:
            key, heur = restarts.key()
            run.random_key[:] = key
        run.reset()
        status = run.go(heur, limit, deadline)
        if status == K.FOUND:
            out = off.copy()
            out[free] = run.offsets()
            return out
        if status == K.INFEASIBLE or time.perf_counter() >= deadline:
            return None
        if max_descents is not None and i + 1 >= max_descents:
            return None
    return None


def restricted_model(p: TileProblem, sm: SearchModel, offsets: np.ndarray, free: np.ndarray,
                     cap: int) -> SearchModel:
    """The search model of the variables ``free`` (increasing local indices of ``p``; its
    variable ``j`` is ``free[j]``) with every other variable of ``p`` fixed at ``offsets``
    (past tileMemory a fixed variable keeps only its bytes from conflicting ones), the free
    ones to end at or below ``cap`` (past tileMemory: the overflow zone, as in the search).
    ``sm``: ``p``'s own model (``sweep.model_of``)."""
    free = np.asarray(free, np.int64)
    off = np.asarray(offsets, np.int64)
    loc = np.full(sm.n, -1, np.int64)
    loc[free] = np.arange(len(free))
    among, bans = _split_rows(sm.adj_ptr, sm.adj_idx, sm.adj_kind, free, loc, off, sm.size,
                              sm.elem_starts, sm.ils, int(sm.elem_starts[-1]))
    adj_ptr, adj_idx, adj_kind = among
    domains = _complement(*bans, int(cap))
    sec_ptr, sec_vars = _restricted_sections(sm.sec_ptr, sm.sec_vars, loc)
    nf = len(free)
    S = len(sec_ptr) - 1
    vsec_ptr, vsecs, span_lo, span_hi = B.sections_of_variables(nf, sec_ptr, sec_vars)
    B.extend_spans(span_lo, span_hi, adj_ptr, adj_idx)
    by_lo = np.argsort(span_lo, kind="stable").astype(np.int64)
    lo_idx = np.searchsorted(span_lo[by_lo], np.arange(S + 1)).astype(np.int64)
    has_elem = np.zeros(nf, np.int64)
    has_reg = np.zeros(nf, np.int64)
    rows = np.repeat(np.arange(nf), np.diff(adj_ptr))
    has_elem[rows[(adj_kind & K_ELEMENT) != 0]] = 1
    has_reg[rows[(adj_kind & K_REGION) != 0]] = 1
    ep_ptr = np.concatenate([[0], np.cumsum(has_elem)]).astype(np.int64)
    rp_ptr = np.concatenate([[0], np.cumsum(has_reg)]).astype(np.int64)
    pair_i, pair_k, pair_kind = B.partner_entries(adj_ptr, adj_idx, adj_kind, ep_ptr, rp_ptr)
    # left-justified placements now also start where a fixed variable ends
    fixed = loc < 0
    g = int(np.gcd.reduce(np.concatenate([[sm.grain], (off + sm.size)[fixed & (off >= 0)]])))
    size = sm.size[free]
    rank = np.empty(nf, np.int64)
    rank[np.argsort(sm.rank[free], kind="stable")] = np.arange(nf)
    return replace(
        sm, n=nf, size=size, align=sm.align[free], lo=sm.lo[free], hi=sm.hi[free],
        adj_ptr=adj_ptr, adj_idx=adj_idx, adj_kind=adj_kind, sec_ptr=sec_ptr,
        sec_vars=sec_vars, vsec_ptr=vsec_ptr, vsecs=vsecs, span_lo=span_lo, span_hi=span_hi,
        by_lo=by_lo, lo_idx=lo_idx, width=sm.width[free], area=sm.area[free],
        has_elem=has_elem, has_reg=has_reg,
        need=B.trail_need(adj_ptr, S),
        pair_i=pair_i, pair_k=pair_k, pair_kind=pair_kind,
        grain=aligned_grain(max(g, 1), sm.align), rank=rank,
        domains=domains)


def fixed_bans(p: TileProblem, offsets: np.ndarray, free: np.ndarray):
    """The starts each variable of ``free`` (increasing local indices of ``p``) may not
    take because of the others, fixed at ``offsets``: CSR ``(ptr, lo, hi)`` of inclusive
    ranges, row ``j`` for ``free[j]``, in no order and possibly overlapping. The one
    statement of what a fixed variable rules out, for both neighbourhood solvers (the
    search's domains, ``restricted_model``; CP-SAT's, ``tilemem.pack.neighbourhood``).

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=range(2), tile=[0] * 2, size=[8, 8],
    ...     alignment=[4] * 2, offset=[0] * 2, category=["variable"] * 2,
    ...     eq_class=[0, 1], interference=[[1], [0]])
    >>> p = TileProblem.from_report(r, 0)
    >>> [x.tolist() for x in fixed_bans(p, np.array([0, 16]), np.array([0]))]
    [[0, 1], [9], [23]]
    """
    from .sweep import model_of

    sm = model_of(p)
    free = np.asarray(free, np.int64)
    loc = np.full(sm.n, -1, np.int64)
    loc[free] = np.arange(len(free))
    return _split_rows(sm.adj_ptr, sm.adj_idx, sm.adj_kind, free, loc,
                       np.asarray(offsets, np.int64), sm.size, sm.elem_starts, sm.ils,
                       int(sm.elem_starts[-1]))[1]


@njit(cache=True)
def _split_rows(adj_ptr, adj_idx, adj_kind, free, loc, off, size, elem_starts, ils, tm):
    """The interaction rows of the free variables split in two: those among the free ones
    (CSR ``(ptr, idx, kind)`` over local indices) and the starts each free variable may not
    take because of the fixed ones (CSR ``(ptr, lo, hi)``, inclusive ranges):

    - a fixed variable that conflicts with it: the starts that would overlap its bytes (in
      memory or past tileMemory);
    - a fixed element (region) partner in memory: the starts that would touch one of the
      elements (regions) it touches (both when it is both: the hull of the two, which
      overlap as both hold its bytes).

    Sizes are the search's (a zero size counts as one byte)."""
    nf = len(free)
    ptr = np.zeros(nf + 1, np.int64)
    ban_ptr = np.zeros(nf + 1, np.int64)
    for j in range(nf):
        i = free[j]
        c = 0
        for t in range(adj_ptr[i], adj_ptr[i + 1]):
            if loc[adj_idx[t]] >= 0:
                c += 1
        ptr[j + 1] = ptr[j] + c
        ban_ptr[j + 1] = ban_ptr[j] + (adj_ptr[i + 1] - adj_ptr[i] - c)
    idx = np.empty(ptr[nf], ADJ_IDX)
    kind = np.empty(ptr[nf], ADJ_KIND)
    b_lo = np.empty(ban_ptr[nf], np.int64)
    b_hi = np.empty(ban_ptr[nf], np.int64)
    w = 0
    for j in range(nf):
        i = free[j]
        q = ptr[j]
        ban_ptr[j] = w
        for t in range(adj_ptr[i], adj_ptr[i + 1]):
            k = adj_idx[t]
            if loc[k] >= 0:
                idx[q] = loc[k]
                kind[q] = adj_kind[t]
                q += 1
                continue
            x = off[k]
            kd = adj_kind[t]
            if x >= tm:
                kd &= K_CONFLICT   # overflowed: in no element or region, its bytes still count
            if x < 0 or kd == 0:
                continue
            first = x
            last = x + size[k] - 1
            if kd & K_ELEMENT:
                first = min(first, elem_starts[element_of(elem_starts, x)])
                last = max(last, elem_starts[element_of(elem_starts, x + size[k] - 1) + 1] - 1)
            if kd & K_REGION:
                first = min(first, 0 if x < ils else ils)
                last = max(last, ils - 1 if x + size[k] - 1 < ils else tm - 1)
            # starts s with [s, s + size) meeting [first, last]
            b_lo[w] = first - size[i] + 1
            b_hi[w] = last
            w += 1
    ban_ptr[nf] = w
    return (ptr, idx, kind), (ban_ptr, b_lo[:w].copy(), b_hi[:w].copy())


@njit(cache=True)
def _complement(ban_ptr, ban_lo, ban_hi, cap):
    """Each row's starts in ``[0, cap - 1]`` that no ban of it rules out: CSR ``(ptr, lo,
    hi)`` of inclusive ranges, increasing and disjoint (a domain, ``legal._in_domain``)."""
    nf = len(ban_ptr) - 1
    dom_ptr = np.zeros(nf + 1, np.int64)
    dom_lo = np.empty(len(ban_lo) + nf, np.int64)
    dom_hi = np.empty(len(ban_lo) + nf, np.int64)
    w = 0
    for j in range(nf):
        e0, e1 = ban_ptr[j], ban_ptr[j + 1]
        order = argsort(ban_lo[e0:e1])
        cur = 0
        for r in range(e1 - e0):
            a = ban_lo[e0 + order[r]]
            b = ban_hi[e0 + order[r]]
            if b < cur:
                continue
            if a > cur and cur <= cap - 1:
                dom_lo[w] = cur
                dom_hi[w] = min(a - 1, cap - 1)
                w += 1
            cur = max(cur, b + 1)
        if cur <= cap - 1:
            dom_lo[w] = cur
            dom_hi[w] = cap - 1
            w += 1
        dom_ptr[j + 1] = w
    return dom_ptr, dom_lo[:w].copy(), dom_hi[:w].copy()


#: How many kept sections a restricted section is compared with (each section is followed by
#: its window groups, ``sweep._with_window_groups``: at most one per window end and start).
LOOK_BACK = 6


@njit(cache=True)
def _restricted_sections(sec_ptr, sec_vars, loc):
    """The sections with only their free members (local indices, increasing as before),
    those left empty or the same as one of the ``LOOK_BACK`` kept before dropped (a
    neighbourhood's few hundred variables leave a large tile's thousands of sections mostly
    repeated): CSR."""
    S = len(sec_ptr) - 1
    ptr = np.zeros(S + 1, np.int64)
    out = np.empty(len(sec_vars), np.int64)
    w = 0
    k = 0
    for s in range(S):
        start = w
        for q in range(sec_ptr[s], sec_ptr[s + 1]):
            j = loc[sec_vars[q]]
            if j >= 0:
                out[w] = j
                w += 1
        if w == start:
            continue
        dup = False
        for back in range(1, min(k, LOOK_BACK) + 1):   # a section's window groups follow it
            if w - start == ptr[k - back + 1] - ptr[k - back]:
                same = True
                for q in range(w - start):
                    if out[start + q] != out[ptr[k - back] + q]:
                        same = False
                        break
                if same:
                    dup = True
                    break
        if dup:
            w = start
            continue
        k += 1
        ptr[k] = w
    return ptr[:k + 1].copy(), out[:w].copy()
