"""Compiled builders of the search's model arrays (``tilemem.pack.search.sweep`` calls them):
the interaction rows (conflicts, element and region partners, with kind bits), the partner
pairs, the spans grown so interacting spans meet, and the section CSR helpers.

Cross-sections of intervals are not here: they are ``tilemem.liveness.sweep.
cliques_of_intervals``, the one implementation every stage uses.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..guard import K_CONFLICT, K_ELEMENT, K_REGION

#: The dtypes of the interaction rows' indices and kinds (``interaction_csr``), in every
#: model the kernel runs on (whole tiles and neighbourhoods alike: another dtype would be
#: another compiled version of the kernel, about 20 s to compile).
ADJ_IDX, ADJ_KIND = np.int32, np.int8


@njit(cache=True)
def _add_partners(ptr, idx, i, mark, bits, row, cnt, kind):
    """Add the constraint partners of ``i`` to its interaction row with ``kind``; new count."""
    for t in range(ptr[i], ptr[i + 1]):
        j = idx[t]
        if mark[j] != i:
            mark[j] = i
            bits[j] = 0
            row[cnt] = j
            cnt += 1
        bits[j] |= kind
    return cnt


@njit(cache=True)
def interaction_csr(n, conf_ptr, conf_idx, ep_ptr, ep_idx, rp_ptr, rp_idx):
    """Every variable's interacting variables with the kinds as bits: its conflicts (the
    liveness stage's conflict graph, ``TileConflicts.conflict_csr``) and then its element /
    region partners not among them, as CSR ``(ptr, idx, kind)``. A row without partners is
    its conflict row as it is; only rows with partners are deduplicated, with a mark (most
    variables have none, and the conflict rows hold ~1.7 M entries on a Mk2 tile).

    The indices are int32 and the kinds int8 (``ADJ_IDX``, ``ADJ_KIND``): every pass over
    the rows (colour refinement, the spans, the kernel's placements) reads them whole, and
    at 5 bytes an entry instead of 16 those passes ran in about 60 % of the time."""
    mark = np.full(n, -1, np.int64)
    bits = np.zeros(n, np.int64)
    row = np.zeros(n, np.int64)
    ptr = np.zeros(n + 1, np.int64)
    idx = np.zeros(0, ADJ_IDX)
    kind = np.zeros(0, ADJ_KIND)
    for phase in range(2):
        if phase == 1:
            idx = np.empty(ptr[n], ADJ_IDX)
            kind = np.empty(ptr[n], ADJ_KIND)
        mark[:] = -1
        for i in range(n):
            c0, c1 = conf_ptr[i], conf_ptr[i + 1]
            if ep_ptr[i] == ep_ptr[i + 1] and rp_ptr[i] == rp_ptr[i + 1]:
                if phase == 0:
                    ptr[i + 1] = ptr[i] + c1 - c0
                else:
                    base = ptr[i] - c0
                    for t in range(c0, c1):
                        idx[base + t] = conf_idx[t]
                        kind[base + t] = K_CONFLICT
                continue
            cnt = 0
            for t in range(c0, c1):
                j = conf_idx[t]
                mark[j] = i
                bits[j] = K_CONFLICT
                row[cnt] = j
                cnt += 1
            cnt = _add_partners(ep_ptr, ep_idx, i, mark, bits, row, cnt, K_ELEMENT)
            cnt = _add_partners(rp_ptr, rp_idx, i, mark, bits, row, cnt, K_REGION)
            if phase == 0:
                ptr[i + 1] = ptr[i] + cnt
            else:
                base = ptr[i]
                for t in range(cnt):
                    idx[base + t] = row[t]
                    kind[base + t] = bits[row[t]]
    return ptr, idx, kind


def trail_need(adj_ptr: np.ndarray, num_sections: int) -> np.ndarray:
    """The trail records one placement of each variable may write (``kernel._place``), at
    most: its own, each neighbour's raised lower bound, and a new witness for each section
    (at most one a section). (Counting only the sections of the variable and of its
    neighbours, which on a Mk2 tile are nearly all of them anyway, took a pass over millions
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
