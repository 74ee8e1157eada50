"""Graph algorithms behind the liveness analyser, compiled with numba, over CSR adjacency.

Every function takes an undirected graph on vertices ``0..n-1`` as CSR arrays ``indptr``,
``indices`` (int64, symmetric, no self loops, each row sorted ascending) and, where weights
matter, non-negative int64 vertex weights. CSR rather than networkx because a report's class
graph can have tens of millions of edges (networkx costs ~230 bytes per edge).

- ``max_weight_clique``: maximum-weight clique. Exact in linear time on chordal graphs (maximum
  cardinality search, then a perfect elimination ordering check, Tarjan & Yannakakis 1984);
  otherwise a greedy clique (lower bound), two upper bounds, and an exact branch and bound
  (Ostergard's weighted Cliquer scheme) under a node limit.
- ``interval_order``: an interval model of the graph found from LexBFS / LexBFS+ sweeps, each
  candidate order verified; ``None`` when no sweep gives one.

>>> import numpy as np
>>> ip, ix = csr_from_edges(4, [(0, 1), (1, 2), (0, 2), (2, 3)])   # triangle + pendant
>>> c = max_weight_clique(ip, ix, np.array([1, 1, 1, 5]))
>>> c.weight, c.members.tolist(), c.exact, c.method
(6, [2, 3], True, 'chordal')
>>> c4 = csr_from_edges(4, [(0, 1), (1, 2), (2, 3), (3, 0)])       # a chordless 4-cycle
>>> max_weight_clique(*c4, np.array([3, 1, 3, 1])).weight
4
>>> interval_order(*csr_from_edges(3, [(0, 1), (1, 2)])).tolist()  # a path: [start, end)
[[0, 2], [1, 3], [2, 3]]
>>> interval_order(*c4) is None                                    # C4 is not an interval graph
True
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..jit import compiled
from ..jit import njit

from .sorting import argsort, sort

#: Most vertices a graph is kept for as a dense boolean adjacency matrix (16 MiB): the
#: exact branch and bound's here, and the liveness stage's class matrices (report and
#: ``TileConflicts``). The one place this limit is set for the packers and the liveness stage.
DENSE_MAX = 4096

#: Default search budget of the branch and bound (search nodes), about a second or two here.
DEFAULT_NODE_LIMIT = 5_000_000


@dataclass(frozen=True)
class Clique:
    """Result of ``max_weight_clique``.

    ``weight`` is the weight of ``members``, a clique of the graph: always a valid *lower* bound
    on the maximum. ``upper`` is a proven upper bound on the maximum. ``exact`` is true when the
    two are equal (the clique is a maximum one). ``method`` says how it was found: ``"chordal"``
    (perfect elimination ordering), ``"bounds"`` (greedy clique met an upper bound),
    ``"branch-and-bound"`` (search completed) or ``"greedy"`` (search budget ran out).
    """

    weight: int
    members: np.ndarray
    upper: int
    exact: bool
    method: str


def csr_from_edges(n: int, edges) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric CSR (rows sorted, duplicates and self loops dropped) from an edge list.

    >>> [a.tolist() for a in csr_from_edges(3, [(0, 2), (2, 0), (1, 1)])]
    [[0, 1, 1, 2], [2, 0]]
    """
    e = np.asarray(list(edges), np.int64).reshape(-1, 2)
    e = e[e[:, 0] != e[:, 1]]
    src = np.concatenate([e[:, 0], e[:, 1]])
    dst = np.concatenate([e[:, 1], e[:, 0]])
    key = np.unique(src * max(n, 1) + dst)
    src, dst = key // max(n, 1), key % max(n, 1)
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    return indptr, dst.astype(np.int64)


# ---- maximum cardinality search and chordality -----------------------------------------------

@njit(cache=True)
def _mcs(indptr, indices):
    """Maximum cardinality search (Tarjan & Yannakakis): the visit order, in linear time.

    Buckets of unvisited vertices by the number of visited neighbours, as doubly linked lists.
    """
    n = len(indptr) - 1
    head = np.full(n + 1, -1, np.int64)
    nxt = np.full(n, -1, np.int64)
    prv = np.full(n, -1, np.int64)
    label = np.zeros(n, np.int64)
    visited = np.zeros(n, np.bool_)
    for v in range(n - 1, -1, -1):  # bucket 0 holds every vertex, 0 first
        nxt[v] = head[0]
        if head[0] >= 0:
            prv[head[0]] = v
        head[0] = v
    order = np.empty(n, np.int64)
    cur = 0
    for i in range(n):
        while head[cur] < 0:
            cur -= 1
        v = head[cur]
        head[cur] = nxt[v]
        if nxt[v] >= 0:
            prv[nxt[v]] = -1
        order[i] = v
        visited[v] = True
        for k in range(indptr[v], indptr[v + 1]):
            u = indices[k]
            if visited[u]:
                continue
            lb = label[u]
            # unlink u from bucket lb
            if prv[u] >= 0:
                nxt[prv[u]] = nxt[u]
            else:
                head[lb] = nxt[u]
            if nxt[u] >= 0:
                prv[nxt[u]] = prv[u]
            lb += 1
            label[u] = lb
            prv[u] = -1
            nxt[u] = head[lb]
            if head[lb] >= 0:
                prv[head[lb]] = u
            head[lb] = u
        if cur + 1 <= n:
            cur += 1
        if cur > n:
            cur = n
    return order


@njit(cache=True)
def _chordal_pass(indptr, indices, w):
    """MCS, then for every vertex ``v`` the weight of ``v`` plus its earlier-visited neighbours.

    Returns ``(pos, cand, chordal)``: ``pos`` the visit position of each vertex, ``cand[v] =
    w[v] + sum(w[u] for u in N(v) if pos[u] < pos[v])``. For ANY order, every clique lies within
    ``{v} + earlier neighbours`` of its last-visited member, so ``max(cand)`` is an upper bound on
    the maximum-weight clique; when the reverse visit order is a perfect elimination ordering
    (``chordal``), those sets are cliques and ``max(cand)`` is the maximum.
    """
    n = len(indptr) - 1
    order = _mcs(indptr, indices)
    pos = np.empty(n, np.int64)
    for i in range(n):
        pos[order[i]] = i
    cand = w.copy()
    parent = np.full(n, -1, np.int64)
    for v in range(n):
        pv = pos[v]
        ppos = -1
        for k in range(indptr[v], indptr[v + 1]):
            u = indices[k]
            if pos[u] < pv:
                cand[v] += w[u]
                if pos[u] > ppos:
                    ppos = pos[u]
                    parent[v] = u
    # PEO test: every other earlier neighbour of v is adjacent to its latest one, parent[v].
    # Children grouped by parent, so each parent's row is marked once: O(n + m) in all.
    counts = np.zeros(n + 1, np.int64)
    for v in range(n):
        if parent[v] >= 0:
            counts[parent[v] + 1] += 1
    for p in range(n):
        counts[p + 1] += counts[p]
    children = np.empty(counts[n], np.int64)
    fill = counts[:n].copy()
    for v in range(n):
        if parent[v] >= 0:
            children[fill[parent[v]]] = v
            fill[parent[v]] += 1
    stamp = np.full(n, -1, np.int64)
    chordal = True
    for p in range(n):
        if counts[p + 1] == counts[p]:
            continue
        for k in range(indptr[p], indptr[p + 1]):
            stamp[indices[k]] = p
        for c in range(counts[p], counts[p + 1]):
            v = children[c]
            pv = pos[v]
            for k in range(indptr[v], indptr[v + 1]):
                u = indices[k]
                if pos[u] < pv and u != p and stamp[u] != p:
                    chordal = False
                    break
            if not chordal:
                break
        if not chordal:
            break
    return pos, cand, chordal


@njit(cache=True)
def _earlier_neighbours(indptr, indices, pos, v):
    out = np.empty(indptr[v + 1] - indptr[v] + 1, np.int64)
    k = 0
    out[k] = v
    k += 1
    for j in range(indptr[v], indptr[v + 1]):
        u = indices[j]
        if pos[u] < pos[v]:
            out[k] = u
            k += 1
    return sort(out[:k])


# ---- bounds for graphs that are not chordal ----------------------------------------------------

@njit(cache=True)
def _greedy_clique(indptr, indices, w, seeds):
    """Best of greedy cliques grown from each seed: heaviest compatible neighbour first.

    A neighbour is compatible when it is adjacent to every member added after the seed:
    counted per vertex as members are added (``hits``: a pass over each member's row), not
    searched for in the rows of the members at each candidate (at a Pod's tiles, thousands
    of classes and cliques of hundreds, that search was most of a stage's bound)."""
    best_w = -1
    best = np.zeros(0, np.int64)
    hits = np.zeros(len(indptr) - 1, np.int64)
    for s in seeds:
        nb = indices[indptr[s]:indptr[s + 1]]
        order = nb[argsort(-w[nb])]
        clique = np.empty(len(nb) + 1, np.int64)
        clique[0] = s
        size = 1
        total = w[s]
        for u in order:
            if hits[u] == size - 1:
                clique[size] = u
                size += 1
                total += w[u]
                for x in indices[indptr[u]:indptr[u + 1]]:
                    hits[x] += 1
        for k in range(1, size):   # reset what this seed's members counted
            for x in indices[indptr[clique[k]]:indptr[clique[k] + 1]]:
                hits[x] = 0
        if total > best_w:
            best_w = total
            best = sort(clique[:size])
    return best_w, best


@njit(cache=True)
def _colouring_bound(indptr, indices, w):
    """Greedy colouring, heaviest vertex first; a clique takes at most one vertex of each
    colour, so the sum over colours of their heaviest weight bounds every clique."""
    n = len(indptr) - 1
    order = argsort(-w)
    colour = np.full(n, -1, np.int64)
    stamp = np.full(n + 1, -1, np.int64)
    bound = 0
    num_colours = 0
    for i in range(n):
        v = order[i]
        for k in range(indptr[v], indptr[v + 1]):
            c = colour[indices[k]]
            if c >= 0:
                stamp[c] = v
        c = 0
        while stamp[c] == v:
            c += 1
        colour[v] = c
        if c == num_colours:  # first (hence heaviest) vertex of a new colour
            num_colours += 1
            bound += w[v]
    return bound


# ---- exact branch and bound --------------------------------------------------------------------

@njit(cache=True)
def _cliquer(adj, w, lower, node_limit):
    """Ostergard's weighted Cliquer: vertices ``n-1 .. 0`` in turn; ``c[i]`` is the maximum clique
    weight within vertices ``i..n-1`` and prunes every later search. ``lower`` is a known clique
    weight (only strictly heavier cliques are sought). Returns ``(best, clique, completed)``;
    ``clique`` is empty when nothing heavier than ``lower`` was found.
    """
    n = len(w)
    c = np.zeros(n, np.int64)
    best = lower
    best_clique = np.zeros(0, np.int64)
    cand = np.empty((n + 1, n), np.int64)
    clen = np.zeros(n + 1, np.int64)
    cpos = np.zeros(n + 1, np.int64)
    csize = np.zeros(n + 1, np.int64)
    crem = np.zeros(n + 1, np.int64)
    chosen = np.empty(n + 1, np.int64)
    nodes = 0
    for i in range(n - 1, -1, -1):
        m = 0
        rem = 0
        for j in range(i + 1, n):
            if adj[i, j]:
                cand[0, m] = j
                m += 1
                rem += w[j]
        chosen[0] = i
        clen[0] = m
        cpos[0] = 0
        csize[0] = w[i]
        crem[0] = rem
        if w[i] > best:
            best = w[i]
            best_clique = chosen[:1].copy()
        d = 0
        while d >= 0:
            if cpos[d] >= clen[d] or csize[d] + crem[d] <= best:
                d -= 1
                continue
            j = cand[d, cpos[d]]
            if csize[d] + c[j] <= best:
                d -= 1
                continue
            cpos[d] += 1
            crem[d] -= w[j]
            nodes += 1
            if nodes > node_limit:
                return best, best_clique, False
            size = csize[d] + w[j]
            chosen[d + 1] = j
            m = 0
            rem = 0
            for k in range(cpos[d], clen[d]):
                u = cand[d, k]
                if adj[j, u]:
                    cand[d + 1, m] = u
                    m += 1
                    rem += w[u]
            if size > best:
                best = size
                best_clique = chosen[:d + 2].copy()
            if m > 0:
                d += 1
                clen[d] = m
                cpos[d] = 0
                csize[d] = size
                crem[d] = rem
        c[i] = best
    return best, best_clique, True


def max_weight_clique(indptr, indices, w, *, node_limit: int = DEFAULT_NODE_LIMIT,
                      upper: int | None = None) -> Clique:
    """Maximum-weight clique of a graph given as sorted symmetric CSR, weights ``w >= 0``.

    ``upper``: an upper bound known from elsewhere (e.g. a program-step sweep), used to stop
    early. See ``Clique`` for what is returned; the search is exact unless the node limit is hit.
    """
    indptr = np.asarray(indptr, np.int64)
    indices = np.asarray(indices, np.int64)
    w = np.asarray(w, np.int64)
    n = len(w)
    if n == 0:
        return Clique(0, np.zeros(0, np.int64), 0, True, "chordal")
    pos, cand, chordal = _chordal_pass(indptr, indices, w)
    v = int(np.argmax(cand))
    if chordal:
        members = _earlier_neighbours(indptr, indices, pos, v)
        return Clique(int(cand[v]), members, int(cand[v]), True, "chordal")
    ub = min(int(cand[v]), int(_colouring_bound(indptr, indices, w)))
    if upper is not None:
        ub = min(ub, int(upper))
    k = min(n, 32)
    seeds = np.unique(np.concatenate([np.argsort(-cand, kind="stable")[:k],
                                      np.argsort(-w, kind="stable")[:k]]))
    lb, members = _greedy_clique(indptr, indices, w, seeds)
    lb = int(lb)
    if lb >= ub:
        return Clique(lb, members, lb, True, "bounds")
    # Exact search on the vertices of positive weight (the others never add to a clique).
    keep = np.flatnonzero(w > 0)
    if len(keep) > DENSE_MAX:
        return Clique(lb, members, ub, False, "greedy")
    # Order: lightest first, so the prefix bounds c[i] stay small while the heavy vertices,
    # searched first, quickly find a heavy clique.
    keep = keep[np.argsort(w[keep], kind="stable")]
    local = np.full(n, -1, np.int64)
    local[keep] = np.arange(len(keep))
    adj = np.zeros((len(keep), len(keep)), np.bool_)
    src = np.repeat(np.arange(n), np.diff(indptr))
    e = (local[src] >= 0) & (local[indices] >= 0)
    adj[local[src[e]], local[indices[e]]] = True
    # the callers' node limits are seconds' worth of compiled nodes: so, compiled
    with compiled():
        best, found, completed = _cliquer(adj, w[keep], lb, int(node_limit))
    if len(found):
        members = np.sort(keep[found])
        lb = int(best)
    if completed:
        return Clique(lb, members, lb, True, "branch-and-bound")
    return Clique(lb, members, max(ub, lb), lb >= ub, "greedy")


# ---- interval models ---------------------------------------------------------------------------

@njit(cache=True)
def _lexbfs(indptr, indices, key):
    """LexBFS by partition refinement; ties broken by smallest ``key``. Rows of the adjacency
    must be sorted by ``key`` (not by vertex id): cells are linked lists kept in key order.
    """
    n = len(indptr) - 1
    max_cells = n + len(indices) + 2
    chead = np.full(max_cells, -1, np.int64)
    ctail = np.full(max_cells, -1, np.int64)
    cnext = np.full(max_cells, -1, np.int64)
    cprev = np.full(max_cells, -1, np.int64)
    csplit = np.full(max_cells, -1, np.int64)
    cstamp = np.full(max_cells, -1, np.int64)
    vnext = np.full(n, -1, np.int64)
    vprev = np.full(n, -1, np.int64)
    vcell = np.zeros(n, np.int64)
    visited = np.zeros(n, np.bool_)
    by_key = argsort(key)
    # one initial cell 0 with every vertex in key order
    for i in range(n):
        v = by_key[i]
        vcell[v] = 0
        if i == 0:
            chead[0] = v
        else:
            vnext[by_key[i - 1]] = v
            vprev[v] = by_key[i - 1]
        ctail[0] = v
    first = 0 if n else -1
    num_cells = 1
    order = np.empty(n, np.int64)
    for i in range(n):
        c = first
        v = chead[c]
        # remove v from its cell
        chead[c] = vnext[v]
        if vnext[v] >= 0:
            vprev[vnext[v]] = -1
        else:
            ctail[c] = -1
        if chead[c] < 0:  # cell emptied: unlink it
            first = cnext[c]
            if first >= 0:
                cprev[first] = -1
        order[i] = v
        visited[v] = True
        for k in range(indptr[v], indptr[v + 1]):
            u = indices[k]
            if visited[u]:
                continue
            c = vcell[u]
            if cstamp[c] != i:  # first neighbour met in this cell: new cell just before it
                nc = num_cells
                num_cells += 1
                cstamp[c] = i
                csplit[c] = nc
                cprev[nc] = cprev[c]
                cnext[nc] = c
                if cprev[c] >= 0:
                    cnext[cprev[c]] = nc
                else:
                    first = nc
                cprev[c] = nc
            nc = csplit[c]
            # unlink u from c
            if vprev[u] >= 0:
                vnext[vprev[u]] = vnext[u]
            else:
                chead[c] = vnext[u]
            if vnext[u] >= 0:
                vprev[vnext[u]] = vprev[u]
            else:
                ctail[c] = vprev[u]
            # append u to nc
            vprev[u] = ctail[nc]
            vnext[u] = -1
            if ctail[nc] >= 0:
                vnext[ctail[nc]] = u
            else:
                chead[nc] = u
            ctail[nc] = u
            vcell[u] = nc
            if chead[c] < 0:  # c emptied: unlink it
                if cprev[c] >= 0:
                    cnext[cprev[c]] = cnext[c]
                else:
                    first = cnext[c]
                if cnext[c] >= 0:
                    cprev[cnext[c]] = cprev[c]
    return order


@njit(cache=True)
def _interval_ends(indptr, indices, order):
    """For the order as a left-endpoint order: ``r[v]`` = last position among ``v`` and its
    later neighbours, and the number of position pairs ``i < j <= r(i)`` (equal to the number
    of edges exactly when the intervals ``[pos, r + 1)`` model the graph)."""
    n = len(indptr) - 1
    pos = np.empty(n, np.int64)
    for i in range(n):
        pos[order[i]] = i
    r = pos.copy()
    for v in range(n):
        for k in range(indptr[v], indptr[v + 1]):
            p = pos[indices[k]]
            if p > r[v]:
                r[v] = p
    pairs = 0
    for v in range(n):
        pairs += r[v] - pos[v]
    return pos, r, pairs


def _sorted_by_key(indptr, indices, key):
    """The same adjacency with each row sorted by ``key`` of the neighbour (ties by index).

    >>> ip, ix = csr_from_edges(3, [(0, 1), (0, 2), (1, 2)])
    >>> _sorted_by_key(ip, ix, np.array([5, 9, 1])).tolist()   # rows 0 | 1 | 2
    [2, 1, 2, 0, 0, 1]
    """
    order = np.argsort(np.asarray(key), kind="stable").astype(np.int64)
    return _rows_in_order(np.asarray(indptr, np.int64), np.asarray(indices, np.int64), order)


@njit(cache=True)
def _rows_in_order(indptr, indices, order):
    """Rows refilled by visiting the vertices in ``order``: as the graph is symmetric, ``u``
    lands in the row of each neighbour in ``order``'s sequence (linear, where sorting every
    row by key cost a third of a second on a dense tile graph)."""
    n = len(indptr) - 1
    out = np.empty(len(indices), np.int64)
    fill = indptr[:n].copy()
    for u in order:
        for k in range(indptr[u], indptr[u + 1]):
            v = indices[k]
            out[fill[v]] = u
            fill[v] += 1
    return out


def interval_order(indptr, indices, sweeps: int = 8) -> np.ndarray | None:
    """An interval model of the graph: ``(n, 2)`` intervals ``[start, end)`` over positions
    ``0..n-1`` with two vertices adjacent exactly when their intervals overlap, or ``None``.

    Candidate orders are a LexBFS and then LexBFS+ sweeps (ties go to the vertex last in the
    previous sweep; Corneil, Olariu & Stewart's multi-sweep idea). Each order and its reverse is
    tested as a left-endpoint order of an interval model (``u < v < w`` and ``uw`` an edge imply
    ``uv`` an edge), which is verified exactly by counting. A returned model is therefore always
    right; ``None`` means no sweep gave one (for a non-interval graph, always ``None``).
    """
    indptr = np.asarray(indptr, np.int64)
    indices = np.asarray(indices, np.int64)
    n = len(indptr) - 1
    m = len(indices) // 2
    if n == 0:
        return np.zeros((0, 2), np.int64)
    key = np.arange(n, dtype=np.int64)
    for _ in range(max(1, sweeps)):
        order = _lexbfs(indptr, _sorted_by_key(indptr, indices, key), key)
        for cand in (order, order[::-1].copy()):
            pos, r, pairs = _interval_ends(indptr, indices, cand)
            if pairs == m:
                return np.stack([pos, r + 1], axis=1)
        key = np.empty(n, np.int64)  # LexBFS+: ties to the vertex latest in this sweep
        key[order[::-1]] = np.arange(n)
    return None
