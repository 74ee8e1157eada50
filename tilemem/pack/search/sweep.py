"""The sweep: a tile problem made into the search's static model (``SearchModel``).

What MiniMalloc's sweeper does for buffers with lifetimes -- cut time into the sections where
the live set changes and record which buffers cross each -- done here for a tile's conflict
graph: the sections are ordered cliques of it (cross-sections of the class lifetimes, the
maximal cliques of the report's interval model, of a chordal class graph, or a greedy clique
cover), each variable spans an interval of them, and interacting variables' spans meet, so
the search can split the rest into independent parts. Also the interaction rows, the partner
pairs and the canonical rank every static order ends with. Independent of the capacity asked
for (``tilemem.pack.search.run`` caps it).
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, replace

import numpy as np
from ...jit import njit

from ..guard import element_bounds
from ..lattice import grain
from ..problem import TileProblem
from ...liveness.sweep import cliques_of_intervals
from . import builders as B

@dataclass
class SearchModel:
    """The search's view of a problem: arrays over variables 0..n-1 (zero sizes count as one
    byte, the strictest reading), the interaction graph, the ordered sections and spans."""

    n: int
    size: np.ndarray
    align: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    adj_ptr: np.ndarray
    adj_idx: np.ndarray
    adj_kind: np.ndarray
    sec_ptr: np.ndarray
    sec_vars: np.ndarray
    vsec_ptr: np.ndarray
    vsecs: np.ndarray
    span_lo: np.ndarray
    span_hi: np.ndarray
    by_lo: np.ndarray
    lo_idx: np.ndarray
    width: np.ndarray
    area: np.ndarray
    has_elem: np.ndarray
    has_reg: np.ndarray
    need: np.ndarray
    elem_starts: np.ndarray
    pair_i: np.ndarray  # element / region partners i < k, with all their interaction bits
    pair_k: np.ndarray
    pair_kind: np.ndarray
    ils: int
    nrs: bool
    sections_from: str  # "lifetimes", "interval", "chordal" or "cliques"
    grain: int  # see tilemem.pack.lattice.grain
    rank: np.ndarray  # the last tie-break of every static order (see _canonical_rank)
    # each variable's domain, CSR of inclusive start ranges (ptr, lo, hi), or None (every
    # legal offset of its window): where variables fixed elsewhere leave room for the free
    # ones (tilemem.pack.search.restrict)
    domains: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    @property
    def num_sections(self) -> int:
        return len(self.sec_ptr) - 1


_CACHE: list = []  # [(weakref to problem, model)]: the driver calls repeatedly per problem


def model_of(p: TileProblem) -> SearchModel:
    for ref, sm in _CACHE:
        if ref() is p:
            return sm
    sm = build_model(p)
    _CACHE.insert(0, (weakref.ref(p), sm))
    del _CACHE[8:]
    return sm


def mirrored_model_of(p: TileProblem, mp: TileProblem) -> SearchModel:
    """The search arrays of ``mp``, the mirror of ``p`` (``tilemem.pack.mirror``), from
    ``p``'s instead of built again (cached the same way): the interactions, sections, spans
    and canonical rank are ``p``'s; the sizes, windows and geometry the mirror's. The
    sections are the same set: a section's window groups (``_with_window_groups``) are its
    members ending by an earlier window end and those starting at a later window start, and
    reversing addresses swaps the two kinds. (Building them again costs as much as the
    mirrored probe's search on a large tile.)"""
    for ref, sm in _CACHE:
        if ref() is mp:
            return sm
    base = model_of(p)
    size = np.maximum(mp.size.astype(np.int64), 1)
    lo, hi, t = mp.lo.astype(np.int64), mp.hi.astype(np.int64), mp.target
    elem_starts = element_bounds(mp)
    sm = replace(base, size=size, lo=lo, hi=hi, area=base.width * size,
                 elem_starts=elem_starts, ils=int(t.interleaved_memory_start),
                 grain=grain(size, lo, base.align, int(t.interleaved_memory_start),
                             elem_starts))
    _CACHE.insert(0, (weakref.ref(mp), sm))
    del _CACHE[8:]
    return sm


def build_model(p: TileProblem) -> SearchModel:
    """The search arrays of ``p`` (independent of the capacity asked for)."""
    n = p.n
    size = np.maximum(p.size.astype(np.int64), 1)
    ep_ptr, rp_ptr = p.element_adj[0], p.region_adj[0]
    adj_ptr, udst, ukind = B.interactions_of(p.conflicts, p.element_adj, p.region_adj)

    sec_ptr, sec_vars, width, how = _sections(p, size)
    sec_ptr, sec_vars = _with_window_groups(sec_ptr, sec_vars, p.lo.astype(np.int64),
                                            p.hi.astype(np.int64))
    # spans: interval of the sections each variable is in, grown so interacting spans meet
    S = len(sec_ptr) - 1
    vsec_ptr, vsecs, span_lo, span_hi = B.sections_of_variables(n, sec_ptr, sec_vars)
    if n and np.any(span_hi <= span_lo):
        raise AssertionError("a variable is in no section")
    B.extend_spans(span_lo, span_hi, adj_ptr, udst)
    by_lo = np.argsort(span_lo, kind="stable").astype(np.int64)
    lo_idx = np.searchsorted(span_lo[by_lo], np.arange(S + 1)).astype(np.int64)

    has_elem = (np.diff(ep_ptr) > 0).astype(np.int64)
    has_reg = (np.diff(rp_ptr) > 0).astype(np.int64)
    pair_i, pair_k, pair_kind = B.partner_entries(adj_ptr, udst, ukind, ep_ptr, rp_ptr)
    need = B.trail_need(adj_ptr, S)
    t = p.target
    elem_starts = element_bounds(p)
    return SearchModel(
        n=n, size=size, align=p.align.astype(np.int64), lo=p.lo.astype(np.int64),
        hi=p.hi.astype(np.int64), adj_ptr=adj_ptr, adj_idx=udst,
        adj_kind=ukind, sec_ptr=sec_ptr, sec_vars=sec_vars,
        vsec_ptr=vsec_ptr, vsecs=vsecs, span_lo=span_lo, span_hi=span_hi,
        by_lo=by_lo, lo_idx=lo_idx, width=width, area=width * size, has_elem=has_elem,
        has_reg=has_reg, need=need, elem_starts=elem_starts,
        pair_i=pair_i, pair_k=pair_k, pair_kind=pair_kind,
        ils=int(t.interleaved_memory_start), nrs=bool(p.rules.no_region_span),
        sections_from=how,
        grain=grain(size, p.lo.astype(np.int64), p.align.astype(np.int64),
                     int(t.interleaved_memory_start), elem_starts),
        rank=_canonical_rank(n, size, p, width, has_elem, has_reg, adj_ptr, udst, ukind))


def _sections(p: TileProblem, size: np.ndarray):
    """Ordered cliques of the conflict graph as CSR ``(ptr, members)``, each section's
    variables increasing (every variable in at least one; always-live variables in all),
    each variable's "width" for the static orders, and where the sections came from:

    - "lifetimes": maximal cross-sections of the class steps, when every two variables live
      together conflict (then each cross-section is a clique);
    - "interval": the maximal cliques of the class graph in a consecutive order when it is an
      interval graph: read off the report's interval model when the problem carries one
      (``TileProblem.intervals``), else recognised for the tile
      (``tilemem.liveness.intervals.clique_path``, verified): the same sections as the
      lifetimes would give, up to the order's reversal and what the graph leaves open;
    - "chordal": the maximal cliques of a chordal class graph along a clique tree
      (``tilemem.liveness.intervals.tree_order``);
    - "cliques": otherwise a greedy clique cover of the class graph.

    Of an order and its reverse the one whose sequence of section sizes is smaller comes
    out (``_canonical_orientation``), so time running backwards changes nothing.
    """
    n = p.n
    tc = p.conflicts
    al = tc.always_live.astype(bool)
    live = np.flatnonzero(al)
    rest = np.flatnonzero(~al)
    if n == 0:
        return np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), "none"
    csr, how, width = None, "cliques", None   # csr: (ptr, members), always-live left out
    if len(rest) and p.lifetimes is not None:
        lt = np.asarray(p.lifetimes, np.int64)
        csr = _time_sections(p, rest, lt[rest], verify=True)
        if csr is not None:
            how = "lifetimes"
            width = lt[:, 1] - lt[:, 0]
    if csr is None and len(rest) and p.intervals is not None:
        # the report's interval model, read off for this tile: the same sections as the
        # tile's own graph gives below, without recognising it again
        csr = _time_sections(p, rest, np.asarray(p.intervals, np.int64)[rest], verify=False)
        if csr is not None:
            how = "interval"   # positions, not times: width counts sections
    if csr is None:
        secs = None
        if len(rest):
            got = _class_sections(p, rest, size)
            if got is not None:  # positions are not times: width counts sections
                secs, how = got
        if secs is None:
            secs = _clique_sections(p, rest) if len(rest) else []
        csr = _csr_of(secs or [np.zeros(0, np.int64)])
    ptr, flat = _canonical_orientation(*csr, size)
    ptr, flat = B.merge_into_sections(ptr, flat, live.astype(np.int64))
    count = np.bincount(flat, minlength=n)
    width = count if width is None else np.where(al, count, width)
    return ptr, flat, np.maximum(width, 1).astype(np.int64), how


def _csr_of(secs) -> tuple[np.ndarray, np.ndarray]:
    """Sections given as arrays, as CSR with each section's members in increasing order."""
    ptr = np.zeros(len(secs) + 1, np.int64)
    np.cumsum([len(x) for x in secs], out=ptr[1:])
    flat = np.concatenate([np.sort(np.asarray(x, np.int64)) for x in secs])
    return ptr, flat.astype(np.int64)


def _with_window_groups(sec_ptr, sec_vars, lo, hi):
    """Each section followed by its members that must end by an earlier window end, or start
    at or after a later window start, than the others (e.g. code below the interleaved
    region, interleaved variables above it): sub-cliques with their own capacity check.
    Sections as CSR ``(ptr, members)`` in and out."""
    if len(lo) == 0 or (np.all(hi == hi[0]) and np.all(lo == lo[0])):
        return sec_ptr, sec_vars  # one window for all: no sub-cliques
    if len(sec_ptr) < 2:
        return sec_ptr, sec_vars
    his, los = np.unique(hi), np.unique(lo)
    # each variable's rank among the window ends and starts (outside the compiled code:
    # numba's cached searches can run another function's, ``tilemem.liveness.sorting``)
    return _window_groups(sec_ptr, sec_vars, np.searchsorted(his, hi).astype(np.int64),
                          np.searchsorted(los, lo).astype(np.int64), len(his), len(los))


@njit(cache=True)
def _window_groups(sec_ptr, sec_vars, hrank, lrank, nh, nl):
    """``_with_window_groups`` over CSR sections, compiled (``hrank``/``lrank``: each
    variable's rank among the ``nh`` distinct window ends / ``nl`` starts, ascending): per
    section, the section, then for each window end its members have below their largest,
    the members ending by it (when more than one), then likewise for each window start above
    their smallest.

    Each section is read once to copy it and count its members per window end and start;
    only the groups written read it again (sections of a large tile hold about a million
    entries; a pass per window end and start to count is slower)."""
    S = len(sec_ptr) - 1
    total = sec_ptr[S] * (nh + nl - 1)
    members = np.empty(total, np.int64)
    ptr = np.empty(S * (nh + nl - 1) + 1, np.int64)
    ptr[0] = 0
    hcnt = np.zeros(nh, np.int64)
    lcnt = np.zeros(nl, np.int64)
    k = 0  # groups written
    w = 0  # members written
    for s in range(S):
        a, b = sec_ptr[s], sec_ptr[s + 1]
        hcnt[:] = 0
        lcnt[:] = 0
        hmax = -1
        lmin = nl
        for q in range(a, b):
            v = sec_vars[q]
            members[w] = v
            w += 1
            hcnt[hrank[v]] += 1
            lcnt[lrank[v]] += 1
            hmax = max(hmax, hrank[v])
            lmin = min(lmin, lrank[v])
        k += 1
        ptr[k] = w
        count = 0
        for j in range(hmax):   # window ends below the section's largest
            count += hcnt[j]
            if hcnt[j] > 0 and count > 1:
                for q in range(a, b):
                    if hrank[sec_vars[q]] <= j:
                        members[w] = sec_vars[q]
                        w += 1
                k += 1
                ptr[k] = w
        count = 0
        for j in range(nl - 1, lmin, -1):   # window starts above the smallest, descending
            count += lcnt[j]
        for j in range(lmin + 1, nl):       # ascending, as the window starts are listed
            if lcnt[j] > 0 and count > 1:
                for q in range(a, b):
                    if lrank[sec_vars[q]] >= j:
                        members[w] = sec_vars[q]
                        w += 1
                k += 1
                ptr[k] = w
            count -= lcnt[j]
    return ptr[:k + 1].copy(), members[:w].copy()


def _class_sections(p: TileProblem, rest: np.ndarray, size: np.ndarray):
    """``(sections, how)``: the ordered maximal cliques of the graph of the classes of
    ``rest`` (``tilemem.liveness.intervals.ordered_cliques``: "interval" or "chordal"), each as the
    array of its variables in ``rest``; None when the graph is not chordal.

    The classes are first numbered in a canonical order (colour refinement from each class's
    bytes and variable count), so that every tie the graph algorithms break by number is
    broken the same way however the report numbers its classes."""
    from ...liveness.intervals import canonical_numbering, ordered_cliques

    tc = p.conflicts
    nc = len(tc.classes)
    cls = tc.local_class[rest]
    used = np.zeros(nc, bool)
    used[cls] = True
    ids = np.flatnonzero(used)
    new = np.full(nc, -1, np.int64)
    new[ids] = np.arange(len(ids))
    src = tc.class_adj.row_ids()
    dst = tc.class_adj.indices
    keep = used[src] & used[dst] & (src != dst)
    a, b = new[src[keep]], new[dst[keep]]
    k = len(ids)
    key = _sorted_unique(a * k + b)
    a, b = key // k, key % k
    indptr = np.zeros(k + 1, np.int64)
    np.cumsum(np.bincount(a, minlength=k), out=indptr[1:])
    labels = np.stack([np.bincount(new[cls], weights=size[rest], minlength=k),
                       np.bincount(new[cls], minlength=k)], axis=1)
    canon, cptr, cidx = canonical_numbering(indptr, b, labels)  # canon[j]: class numbered j
    got = ordered_cliques(cptr, cidx)
    if got is None:
        return None
    ptr, members, how = got
    members = canon[members]
    # each clique's variables: the variables of its classes, one after the other
    vars_of = rest[np.argsort(new[cls], kind="stable")]
    per_class = np.bincount(new[cls], minlength=k)
    vptr = np.zeros(k + 1, np.int64)
    np.cumsum(per_class, out=vptr[1:])
    cnt = per_class[members]
    flat = vars_of[np.repeat(vptr[members] - np.cumsum(cnt) + cnt, cnt)
                   + np.arange(cnt.sum())]
    bounds = np.zeros(len(ptr), np.int64)
    np.cumsum(np.add.reduceat(cnt, ptr[:-1]) if len(cnt) else [], out=bounds[1:])
    return np.split(flat, bounds[1:-1]), how


def _sorted_unique(x: np.ndarray) -> np.ndarray:
    """``np.unique`` of an int64 array, by sorting (much faster here than its hash path)."""
    x = np.sort(x)
    keep = np.ones(len(x), bool)
    keep[1:] = x[1:] != x[:-1]
    return x[keep]


def _canonical_orientation(ptr, members, size):
    """The sections ``(ptr, members)`` or their reverse, whichever has the smaller sequence of
    (bytes, count) per section: the same for a problem and its mirror image (time
    reversed)."""
    cs = np.concatenate([[0], np.cumsum(size[members])]) if len(members) else np.zeros(1)
    nbytes = (cs[ptr[1:]] - cs[ptr[:-1]]).astype(np.int64).tolist()
    sig = list(zip(nbytes, np.diff(ptr).tolist()))
    return B.reverse_sections(ptr, members) if sig[::-1] < sig else (ptr, members)


#: Interactions above which the canonical rank uses the variables' own attributes only.
RANK_REFINE_MAX = 4_000_000
#: Interactions above which the refinement stops after ``RANK_ROUNDS_LARGE`` rounds instead
#: of running until its colours are stable: on large tiles the colours barely change after
#: the first round and not after the second, so a third round, a pass over every
#: interaction, only confirms. Any fixed number of rounds is
#: as canonical as refinement to the end: renumbering still changes nothing.
RANK_ROUNDS_OVER, RANK_ROUNDS_LARGE = 1_000_000, 2


def _canonical_rank(n, size, p, width, has_elem, has_reg, adj_ptr, adj_idx, adj_kind):
    """A strict order of the variables (``rank[i]``: 0 first) that follows their content --
    size, alignment, window, width, constraints and, by colour refinement
    (``tilemem.liveness.intervals.refine_colours``), the same of their interaction partners -- so that
    renumbering variables or classes does not change the search; only variables that
    refinement cannot tell apart (almost always interchangeable) keep their index order."""
    if n == 0:
        return np.zeros(0, np.int64)
    labels = np.stack([size, p.align, p.lo, p.hi, width, has_elem, has_reg], axis=1)
    from ...liveness.intervals import refine_colours

    if len(adj_idx) > RANK_REFINE_MAX:
        rounds = 0
    elif len(adj_idx) > RANK_ROUNDS_OVER:
        rounds = RANK_ROUNDS_LARGE
    else:
        rounds = 16   # until stable
    colour = refine_colours(adj_ptr, adj_idx, labels, adj_kind, rounds=rounds)
    rank = np.empty(n, np.int64)
    rank[np.lexsort((np.arange(n), colour))] = np.arange(n)
    return rank


def _time_sections(p: TileProblem, rest: np.ndarray, lt: np.ndarray, verify: bool):
    """Maximal cross-sections of the intervals ``lt`` of the variables ``rest``
    (``tilemem.liveness.sweep.cliques_of_intervals``) as CSR ``(ptr, members)``, or None when an interval
    is empty or (``verify``) a cross-section is not a clique of the conflict graph."""
    start, end = lt[:, 0], lt[:, 1]
    if np.any(end <= start):
        return None
    adj = p.conflicts.class_matrix if verify else None
    if verify and adj is None:  # past the dense limit: not verified, so not used
        return None
    ptr, local = cliques_of_intervals(start, end)
    members = rest.astype(np.int64)[local]
    if verify:
        cls = p.conflicts.local_class
        for s in range(len(ptr) - 1):
            c = np.unique(cls[members[ptr[s]:ptr[s + 1]]])
            if not adj[np.ix_(c, c)].all():
                return None
    return ptr, members


def _clique_sections(p: TileProblem, rest: np.ndarray):
    """The sections of a class graph that is not chordal (of the classes of ``rest``): its
    maximal cliques when there are at most ``4 x classes`` of them (``_maximal_cliques``),
    else a greedy edge clique cover in reverse Cuthill-McKee order (``_greedy_cover``; edges
    left over are still enforced pairwise); ordered to keep each class's sections close."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    tc = p.conflicts
    nc = len(tc.classes)
    members = tc.class_members(always_live=False)
    present = np.array([len(x) > 0 for x in members], bool)
    ca = tc.class_adj
    g = csr_matrix((np.ones(ca.nnz, np.int8), ca.indices, ca.indptr), shape=(nc, nc))
    order = np.asarray(reverse_cuthill_mckee(g, symmetric_mode=True), np.int64)
    pos = np.empty(nc, np.int64)
    pos[order] = np.arange(nc)
    nbr = [{x for x in ca.row(c).tolist() if present[x] and x != c} for c in range(nc)]
    budget = 4 * int(present.sum())
    cliques = _maximal_cliques(nbr, present, budget)
    if cliques is None:
        cliques = _greedy_cover(nbr, present, order, pos, budget)
    cliques.sort(key=lambda cl: (min(pos[x] for x in cl), max(pos[x] for x in cl)))
    cliques = [cliques[i] for i in _short_span_order(cliques, nc)]
    return [np.concatenate([members[y] for y in sorted(cl, key=pos.__getitem__)]).astype(np.int64)
            for cl in cliques]


def _maximal_cliques(nbr, present, limit: int):
    """Every maximal clique of the class graph (``nbr``: each class's neighbours), or None
    past ``limit`` of them. All of them, not a cover: the search's capacity pruning is per
    section, so a heavy clique left out (the peak's, say) is a bound the search never
    applies: on graphs a little short of interval graphs a greedy cover finds far fewer
    packings in the same time (docs/benchmarks.md)."""
    import networkx as nx

    g = nx.Graph()
    used = [c for c in range(len(nbr)) if present[c]]
    g.add_nodes_from(used)
    g.add_edges_from((c, x) for c in used for x in nbr[c] if c < x)
    out = []
    for cl in nx.find_cliques(g):
        out.append(sorted(cl))
        if len(out) > limit:
            return None
    return out


def _greedy_cover(nbr, present, order, pos, budget):
    """A greedy edge clique cover: from each class (in ``order``), cliques are grown until
    its edges are covered, preferring uncovered edges, then classes close in the order; at
    most ``budget`` cliques."""
    nc = len(nbr)
    uncovered = [set(x) for x in nbr]
    in_clique = np.zeros(nc, bool)
    cliques = []
    for c in order.tolist():
        if not present[c]:
            continue
        while uncovered[c] and len(cliques) < budget:
            v = min(uncovered[c], key=lambda x: abs(pos[x] - pos[c]))
            clique = [c, v]
            cand = nbr[c] & nbr[v]
            while cand:
                w = min(cand, key=lambda x: (-sum(x in uncovered[y] for y in clique),
                                             abs(pos[x] - pos[c])))
                clique.append(w)
                cand &= nbr[w]
            for a in clique:
                uncovered[a].difference_update(clique)
            in_clique[clique] = True
            cliques.append(clique)
        if not in_clique[c]:
            in_clique[c] = True
            cliques.append([c])
    return cliques


def _short_span_order(cliques, nc, rounds: int = 12) -> list[int]:
    """An order of ``cliques`` (lists of classes) that keeps each class's cliques close
    together (short spans decompose sooner): barycentre sweeps from the given order -- a
    class sits at the mean position of its cliques, a clique at the mean of its classes --
    keeping the order with the least total span."""
    k = len(cliques)
    if k < 3:
        return list(range(k))
    cl_of = np.repeat(np.arange(k), [len(c) for c in cliques])
    cls = np.concatenate([np.asarray(c, np.int64) for c in cliques])
    cnt = np.maximum(np.bincount(cls, minlength=nc), 1)

    def total_span(order):
        pos = np.empty(k, np.int64)
        pos[order] = np.arange(k)
        p = pos[cl_of]
        hi = np.full(nc, -1, np.int64)
        lo = np.full(nc, k, np.int64)
        np.maximum.at(hi, cls, p)
        np.minimum.at(lo, cls, p)
        used = hi >= 0
        return int((hi[used] - lo[used]).sum())

    order = np.arange(k)
    best, best_cost = order, total_span(order)
    for _ in range(rounds):
        pos = np.empty(k, np.float64)
        pos[order] = np.arange(k)
        class_pos = np.bincount(cls, weights=pos[cl_of], minlength=nc) / cnt
        clique_pos = np.bincount(cl_of, weights=class_pos[cls], minlength=k) / np.bincount(cl_of)
        order = np.lexsort((pos, clique_pos))
        cost = total_span(order)
        if cost < best_cost:
            best, best_cost = order, cost
    return best.tolist()


