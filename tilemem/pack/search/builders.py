"""Compiled builders of the search's model arrays (``tilemem.pack.search.sweep`` calls them):
the interaction rows (conflicts, element and region partners, with kind bits, built from the
classes' members), the partner pairs, the spans grown so interacting spans meet, and the
section CSR helpers.

Cross-sections of intervals are not here: they are ``tilemem.liveness.sweep.
cliques_of_intervals``, the one implementation every stage uses.
"""
from __future__ import annotations

import numpy as np
from ...jit import njit

from ...liveness.conflicts import class_row_into
from ..guard import K_CONFLICT, K_ELEMENT, K_REGION

#: The dtypes of the interaction rows' indices and kinds (``interactions_of``), in every
#: model the kernel runs on (whole tiles and neighbourhoods alike: another dtype would be
#: another compiled version of the kernel, about 20 s to compile).
ADJ_IDX, ADJ_KIND = np.int32, np.int8


def interactions_of(conflicts, element_adj, region_adj):
    """Every variable's interacting variables with the kinds as bits, as CSR ``(ptr, idx,
    kind)``: its conflicts (``TileConflicts.conflict_csr``'s row, in its order) and then its
    element / region partners not among them (``K_CONFLICT``, ``K_ELEMENT``, ``K_REGION``;
    a conflict that is also a partner carries both bits).

    Built straight from the classes' members, not from ``conflict_csr``: its int64 rows
    (millions of entries on a large tile) written and read once more cost a large share of
    the step.

    The indices are int32 and the kinds int8 (``ADJ_IDX``, ``ADJ_KIND``): every pass over
    the rows (colour refinement, the spans, the kernel's placements) reads them whole, and
    at 5 bytes an entry instead of 16 those passes read a third of the memory.

    >>> from tilemem.model import Report
    >>> from tilemem.pack.problem import TileProblem
    >>> r = Report.from_columns(var_id=range(4), tile=[0] * 4, size=[4] * 4,
    ...     alignment=[4] * 4, offset=[0] * 4, category=["variable"] * 4,
    ...     eq_class=[0, 0, 1, 2], interference=[[1], [0], []],
    ...     element_constraints=[[3], [], [], []])
    >>> p = TileProblem.from_report(r, 0)
    >>> ptr, idx, kind = interactions_of(p.conflicts, p.element_adj, p.region_adj)
    >>> [idx[ptr[i]:ptr[i + 1]].tolist() for i in range(4)]
    [[1, 2, 3], [0, 2], [0, 1], [0]]
    >>> kind[ptr[0]:ptr[1]].tolist() == [K_CONFLICT, K_CONFLICT, K_ELEMENT]
    True
    """
    class_ptr, by_class = conflicts.members
    a = conflicts.arrays
    return _interactions_from_classes(len(a.local_class), a.always_live, by_class, class_ptr,
                                      a.class_ptr, a.class_idx, *element_adj, *region_adj)


@njit(cache=True)
def _write_row(i, conf, nconf, ep_ptr, ep_idx, rp_ptr, rp_idx, mark, bits, idx, kind, base,
               count_only):
    """Variable ``i``'s interaction row: its conflicts ``conf[:nconf]`` (``i`` skipped), then
    its element / region partners not among them, kinds as bits (``interactions_of``);
    written at ``idx[base:]`` unless ``count_only``; its length returned."""
    cnt = 0
    partners = ep_ptr[i] != ep_ptr[i + 1] or rp_ptr[i] != rp_ptr[i + 1]
    for t in range(nconf):
        j = conf[t]
        if j == i:
            continue
        if partners:
            mark[j] = i
            bits[j] = K_CONFLICT
        if not count_only:
            idx[base + cnt] = j
            kind[base + cnt] = K_CONFLICT
        cnt += 1
    if not partners:
        return cnt
    for which in range(2):
        ptr, pidx, k = (ep_ptr, ep_idx, K_ELEMENT) if which == 0 else (rp_ptr, rp_idx, K_REGION)
        for t in range(ptr[i], ptr[i + 1]):
            j = pidx[t]
            if mark[j] != i:
                mark[j] = i
                bits[j] = 0
                if not count_only:
                    idx[base + cnt] = j
                cnt += 1
            bits[j] |= k
    if not count_only:
        for t in range(cnt):
            kind[base + t] = bits[idx[base + t]]
    return cnt


@njit(cache=True)
def _interactions_from_classes(n, always, by_class, class_ptr, cadj_ptr, cadj_idx, ep_ptr,
                               ep_idx, rp_ptr, rp_idx):
    """``interactions_of``, compiled: each class's conflict row built once (``class_row_into``)
    and written out for each of its members that is not always live; an always-live
    variable's row is every other variable. The rows' lengths come first from the classes'
    sizes (a class row's length is a sum over its adjacency, not a pass over its members),
    except for the classes with element or region partners, whose rows are built to count
    the partners among the conflicts."""
    nc = len(class_ptr) - 1
    nlive = 0
    live = np.zeros(n, np.int64)
    for v in range(n):
        if always[v]:
            live[nlive] = v
            nlive += 1
    live = live[:nlive]
    # per class: members, always-live members, members with partners
    size = np.zeros(nc, np.int64)
    alive = np.zeros(nc, np.int64)
    partnered = np.zeros(nc, np.bool_)
    for c in range(nc):
        for t in range(class_ptr[c], class_ptr[c + 1]):
            v = by_class[t]
            size[c] += 1
            if always[v]:
                alive[c] += 1
            if ep_ptr[v] != ep_ptr[v + 1] or rp_ptr[v] != rp_ptr[v + 1]:
                partnered[c] = True
    every = np.arange(n).astype(np.int64)
    seen = np.full(n, -1, np.int64)
    scratch = np.empty(n, np.int64)
    mark = np.full(n, -1, np.int64)
    bits = np.zeros(n, np.int64)
    ptr = np.zeros(n + 1, np.int64)
    idx = np.zeros(0, ADJ_IDX)
    kind = np.zeros(0, ADJ_KIND)
    for phase in range(2):
        count_only = phase == 0
        if phase == 1:
            for v in range(n):
                ptr[v + 1] += ptr[v]
            idx = np.empty(ptr[n], ADJ_IDX)
            kind = np.empty(ptr[n], ADJ_KIND)
            seen[:] = -1
            mark[:] = -1
        for c in range(nc):
            if size[c] == alive[c]:
                continue   # no member that is not always live
            if count_only and not partnered[c]:
                m = size[c] + nlive - alive[c]
                prev = -1
                for q in range(cadj_ptr[c], cadj_ptr[c + 1]):
                    cl = cadj_idx[q]
                    if cl == c or cl == prev:
                        continue
                    prev = cl
                    m += size[cl] - alive[cl]
                for t in range(class_ptr[c], class_ptr[c + 1]):
                    if not always[by_class[t]]:
                        ptr[by_class[t] + 1] = m - 1
                continue
            m = class_row_into(c, by_class, class_ptr, cadj_ptr, cadj_idx, always, live, seen,
                               every, scratch)
            for t in range(class_ptr[c], class_ptr[c + 1]):
                i = by_class[t]
                if always[i]:
                    continue
                cnt = _write_row(i, scratch, m, ep_ptr, ep_idx, rp_ptr, rp_idx, mark, bits,
                                 idx, kind, ptr[i], count_only)
                if count_only:
                    ptr[i + 1] = cnt
        for i in live:
            cnt = _write_row(i, every, n, ep_ptr, ep_idx, rp_ptr, rp_idx, mark, bits, idx,
                             kind, ptr[i], count_only)
            if count_only:
                ptr[i + 1] = cnt
    return ptr, idx, kind


def trail_need(adj_ptr: np.ndarray, num_sections: int) -> np.ndarray:
    """The trail records one placement of each variable may write (``propagate._place``), at
    most: its own, each neighbour's raised lower bound, and a new witness for each section
    (at most one a section). (Counting only the sections of the variable and of its
    neighbours, which on a large tile are nearly all of them anyway, took a pass over millions
    of entries.)"""
    return 2 + np.diff(np.asarray(adj_ptr, np.int64)) + int(num_sections)


@njit(cache=True)
def partner_entries(adj_ptr, adj_idx, adj_kind, ep_ptr, rp_ptr):
    """The entries ``i < k`` of the interaction rows that carry an element or region bit
    (rows in order, each in row order), as ``(i, k, kind)``; only the rows of variables with
    partners are read."""
    n = len(adj_ptr) - 1
    total = 0
    pi = np.zeros(0, np.int64)
    pk = np.zeros(0, np.int64)
    pkind = np.zeros(0, np.int64)
    for phase in range(2):
        if phase == 1:
            pi = np.empty(total, np.int64)
            pk = np.empty(total, np.int64)
            pkind = np.empty(total, np.int64)
        total = 0
        for i in range(n):
            if ep_ptr[i] == ep_ptr[i + 1] and rp_ptr[i] == rp_ptr[i + 1]:
                continue
            for t in range(adj_ptr[i], adj_ptr[i + 1]):
                k = adj_idx[t]
                if i < k and adj_kind[t] & (K_ELEMENT | K_REGION):
                    if phase == 1:
                        pi[total] = i
                        pk[total] = k
                        pkind[total] = adj_kind[t]
                    total += 1
    return pi, pk, pkind


@njit(cache=True)
def extend_spans(span_lo, span_hi, adj_ptr, adj_idx):
    """Grow spans so that every interacting pair ``i < k`` (rows of ``adj``, in order) has
    intersecting spans (the left one reaches into the right one); spans only grow, so one
    pass suffices."""
    for i in range(len(adj_ptr) - 1):
        for t in range(adj_ptr[i], adj_ptr[i + 1]):
            k = adj_idx[t]
            if k <= i:
                continue
            if span_hi[i] <= span_lo[k]:
                span_hi[i] = span_lo[k] + 1
            elif span_hi[k] <= span_lo[i]:
                span_hi[k] = span_lo[i] + 1


@njit(cache=True)
def merge_into_sections(ptr, members, live):
    """Every section with the variables ``live`` merged in (both increasing): CSR."""
    S = len(ptr) - 1
    k = len(live)
    out_ptr = np.empty(S + 1, np.int64)
    out = np.empty(len(members) + S * k, np.int64)
    w = 0
    out_ptr[0] = 0
    for s in range(S):
        a, b = ptr[s], ptr[s + 1]
        j = 0
        for q in range(a, b):
            while j < k and live[j] < members[q]:
                out[w] = live[j]
                w += 1
                j += 1
            out[w] = members[q]
            w += 1
        while j < k:
            out[w] = live[j]
            w += 1
            j += 1
        out_ptr[s + 1] = w
    return out_ptr, out


@njit(cache=True)
def reverse_sections(ptr, members):
    """The sections in reverse order (each keeps its members' order): CSR."""
    S = len(ptr) - 1
    out_ptr = np.empty(S + 1, np.int64)
    out = np.empty(len(members), np.int64)
    out_ptr[0] = 0
    w = 0
    for s in range(S - 1, -1, -1):
        for q in range(ptr[s], ptr[s + 1]):
            out[w] = members[q]
            w += 1
        out_ptr[S - s] = w
    return out_ptr, out


@njit(cache=True)
def sections_of_variables(n, sec_ptr, sec_vars):
    """Each variable's sections, increasing, as CSR ``(ptr, sections)``, and its span
    ``[first, last + 1)`` (``[S, 0)`` for a variable in no section)."""
    S = len(sec_ptr) - 1
    vptr = np.zeros(n + 1, np.int64)
    for q in range(len(sec_vars)):
        vptr[sec_vars[q] + 1] += 1
    for v in range(n):
        vptr[v + 1] += vptr[v]
    fill = vptr[:-1].copy()
    vsecs = np.empty(len(sec_vars), np.int64)
    for s in range(S):
        for q in range(sec_ptr[s], sec_ptr[s + 1]):
            v = sec_vars[q]
            vsecs[fill[v]] = s
            fill[v] += 1
    span_lo = np.full(n, S, np.int64)
    span_hi = np.zeros(n, np.int64)
    for v in range(n):
        if vptr[v + 1] > vptr[v]:
            span_lo[v] = vsecs[vptr[v]]
            span_hi[v] = vsecs[vptr[v + 1] - 1] + 1
    return vptr, vsecs, span_lo, span_hi
