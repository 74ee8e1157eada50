"""Time structure from interference alone: the maximal cliques of a class graph, in order.

Poplar's reports say which equivalence classes interfere, never when they are live. For a
straight-line program the class graph is an *interval graph*: classes are intervals of program
steps. Its maximal cliques (the sets of classes live together at some moment) then have a
*consecutive arrangement* -- an order in which the cliques of every class are adjacent -- and
that order is the program's time, recovered up to what the graph determines (e.g. its mirror
image). The exact search (``tilemem.pack.search``) uses these ordered cliques as its
"sections" exactly where it would use lifetimes.

Graphs are CSR arrays ``indptr``, ``indices`` over vertices ``0..n-1`` (int64, symmetric, rows
sorted, no self loops), as in ``tilemem.liveness.graphalg``. Cliques are returned as CSR too:
``(ptr, members)``, clique ``c`` is ``members[ptr[c]:ptr[c + 1]]`` (sorted).

- ``clique_path``: the maximal cliques in a consecutive order when the graph is an interval
  graph, else ``None``. LexBFS+ multi-sweep (``graphalg.interval_order``, Corneil, Olariu &
  Stewart's idea) finds an interval model in linear time; when no sweep does, an exact
  consecutive-ones test over the maximal cliques decides (overlap components, each arranged
  uniquely up to reversal, nested by containment; after Hsu's decomposition). Every order
  returned is verified: each vertex's cliques are consecutive.
- ``interval_model``: the same as intervals ``[start, end)`` per vertex.
- ``chordal_cliques``: the maximal cliques and a clique tree of a chordal graph (maximum
  cardinality search; Blair & Peyton), else ``None``.
- ``tree_order``: a linear order of a clique tree's cliques in which vertices span few
  cliques they are not in (a path decomposition whose bags are the spans): depth first from
  one end of a longest path, the deepest branch last. For chordal graphs that are not interval
  graphs (If/Else branches).
- ``ordered_cliques``: the first of those that applies, saying which.
- ``refine_colours``: colour refinement (1-dimensional Weisfeiler-Leman) of a labelled graph;
  colours depend only on the graph and labels, not on how vertices are numbered, so they make
  tie-breaks independent of presentation.

>>> from tilemem.liveness.graphalg import csr_from_edges
>>> path = csr_from_edges(4, [(0, 1), (1, 2), (2, 3), (1, 3)])   # 0-1, then 1-2-3 together
>>> ptr, members = clique_path(*path)
>>> [members[ptr[c]:ptr[c + 1]].tolist() for c in range(len(ptr) - 1)]
[[0, 1], [1, 2, 3]]
>>> clique_path(*csr_from_edges(4, [(0, 1), (1, 2), (2, 3), (3, 0)])) is None   # C4
True
>>> ptr, members, how = ordered_cliques(*csr_from_edges(7, [(0, 1), (0, 2), (0, 3), (1, 4),
...                                                         (2, 5), (3, 6)]))   # a spider
>>> how, len(ptr) - 1    # chordal, not interval (4, 5, 6 are an asteroidal triple)
('chordal', 6)
"""
from __future__ import annotations

import numpy as np
from ..jit import njit

from .graphalg import _chordal_pass, interval_order
from .sorting import sort
from .sweep import cliques_of_intervals

#: Largest (distinct vertex sets) x (cliques) the exact consecutive-ones test runs on; it
#: only runs when every LexBFS+ sweep failed, which random interval graphs never needed here.
C1P_MAX_CELLS = 4_000_000


# ---- chordal graphs: maximal cliques and a clique tree --------------------------------------

@njit(cache=True)
def _cliques_from_mcs(indptr, indices, pos):
    """Blair & Peyton: in a maximum cardinality search order of a chordal graph, with
    ``C(v) = {v} + earlier-visited neighbours``, a new maximal clique starts at every vertex
    whose count of earlier neighbours does not exceed its predecessor's (otherwise it is
    exactly one more and ``C`` grows by it); each run ends with a maximal clique ``C(last)``.
    A clique's parent in a clique tree is the clique of the run holding the latest-visited
    earlier neighbour of the run's first vertex (it contains the separator)."""
    n = len(indptr) - 1
    order = np.empty(n, np.int64)
    for v in range(n):
        order[pos[v]] = v
    lab = np.zeros(n, np.int64)
    latest = np.full(n, -1, np.int64)
    for v in range(n):
        for k in range(indptr[v], indptr[v + 1]):
            u = indices[k]
            if pos[u] < pos[v]:
                lab[v] += 1
                if latest[v] < 0 or pos[u] > pos[latest[v]]:
                    latest[v] = u
    run_of = np.empty(n, np.int64)
    run_start = np.empty(n + 1, np.int64)
    k = 0
    for i in range(n):
        v = order[i]
        if i == 0 or lab[v] <= lab[order[i - 1]]:
            run_start[k] = i
            k += 1
        run_of[v] = k - 1
    run_start[k] = n
    ptr = np.zeros(k + 1, np.int64)
    for c in range(k):
        ptr[c + 1] = ptr[c] + lab[order[run_start[c + 1] - 1]] + 1
    members = np.empty(ptr[k], np.int64)
    parent = np.full(k, -1, np.int64)
    for c in range(k):
        last = order[run_start[c + 1] - 1]
        j = ptr[c]
        members[j] = last
        j += 1
        for t in range(indptr[last], indptr[last + 1]):
            u = indices[t]
            if pos[u] < pos[last]:
                members[j] = u
                j += 1
        members[ptr[c]:ptr[c + 1]] = sort(members[ptr[c]:ptr[c + 1]])
        first = order[run_start[c]]
        if latest[first] >= 0:
            parent[c] = run_of[latest[first]]
    return ptr, members, parent


def chordal_cliques(indptr, indices):
    """``(ptr, members, parent)``: the maximal cliques of a chordal graph and a clique tree
    (``parent[c]`` another clique, ``-1`` at the root of each connected component; every
    vertex's cliques form a subtree), or ``None`` when the graph is not chordal.

    >>> from tilemem.liveness.graphalg import csr_from_edges
    >>> ptr, m, parent = chordal_cliques(*csr_from_edges(4, [(0, 1), (1, 2), (0, 2), (2, 3)]))
    >>> sorted(m[ptr[c]:ptr[c + 1]].tolist() for c in range(len(ptr) - 1))
    [[0, 1, 2], [2, 3]]
    """
    indptr = np.asarray(indptr, np.int64)
    indices = np.asarray(indices, np.int64)
    n = len(indptr) - 1
    if n == 0:
        return np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    pos, _, chordal = _chordal_pass(indptr, indices, np.ones(n, np.int64))
    if not chordal:
        return None
    return _cliques_from_mcs(indptr, indices, pos)


# ---- exact consecutive arrangement of cliques (consecutive-ones property) ------------------

def _vertex_sets(ptr, members, k):
    """Each vertex's set of cliques, distinct, as sorted tuples (only those that constrain the
    order: more than one clique and not all of them)."""
    clq = np.repeat(np.arange(k, dtype=np.int64), np.diff(ptr))
    order = np.lexsort((clq, members))
    v, c = members[order], clq[order]
    bounds = np.flatnonzero(np.diff(v)) + 1
    sets = {tuple(x.tolist()) for x in np.split(c, bounds) if 1 < len(x) < k}
    return sorted(sets, key=lambda s: (-len(s), s))


def _arrange_component(sets, adj, first):
    """Blocks (an ordered partition of the union) in which every set of one overlap component
    is consecutive, or ``None``. Sets are added so that each overlaps one already placed;
    then where it goes is forced (the union placed so far is consecutive and its blocks are
    ordered up to reversal), so any contradiction means no arrangement exists."""
    blocks = {0: set(sets[first])}
    where = {e: 0 for e in sets[first]}
    seq = [0]
    nxt = 1
    for si in _component(adj, first):
        if si == first:
            continue
        s = set(sets[si])
        touched = {where[e] for e in s if e in where}
        new = [e for e in s if e not in where]
        if not touched:
            return None
        at = sorted(seq.index(b) for b in touched)
        i, j = at[0], at[-1]
        if j - i + 1 != len(at):
            return None                      # a block between two of S's is not in S
        if any(not blocks[seq[p]] <= s for p in at[1:-1]):
            return None                      # an inner block only partly in S
        full_i = blocks[seq[i]] <= s
        full_j = blocks[seq[j]] <= s

        def split(p, inner_after: bool):
            """Split block at position p into (outside S, inside S) or the reverse."""
            nonlocal nxt
            b = seq[p]
            inside = blocks[b] & s
            outside = blocks[b] - s
            if not outside:
                return
            blocks[b] = inside
            blocks[nxt] = outside
            for e in outside:
                where[e] = nxt
            seq.insert(p if inner_after else p + 1, nxt)
            nxt += 1

        if new:
            if j == len(seq) - 1 and (i == j or full_j):      # S leaves U past its end
                split(i, inner_after=True)
                seq.append(nxt)
            elif i == 0 and (i == j or full_i):               # ... or before its start
                split(j, inner_after=False)
                seq.insert(0, nxt)
            else:
                return None
            blocks[nxt] = set(new)
            for e in new:
                where[e] = nxt
            nxt += 1
        else:
            if i == j:
                return None  # cannot happen for a set overlapping a placed one
            split(j, inner_after=False)
            split(i, inner_after=True)
    return [blocks[b] for b in seq]


def _component(adj, first):
    """Breadth-first order of the component of ``first`` in the graph ``adj`` (lists)."""
    seen = {first}
    queue = [first]
    for a in queue:
        for b in adj[a]:
            if b not in seen:
                seen.add(b)
                queue.append(b)
    return queue


def consecutive_order(ptr, members, max_cells: int = C1P_MAX_CELLS) -> np.ndarray | None:
    """An order of the cliques in which every vertex's cliques are consecutive, or ``None``
    (no such order, or more than ``max_cells`` to examine). Exact: overlap components of the
    vertices' clique sets are each arranged (uniquely up to reversal), then nested: a
    component whose union meets another's lies inside one block of it.

    >>> ptr = np.array([0, 2, 4, 6]); members = np.array([0, 1, 1, 2, 0, 2])   # a triangle
    >>> consecutive_order(ptr, members) is None   # of edges: no path through three cliques
    True
    >>> consecutive_order(np.array([0, 2, 4, 6]), np.array([0, 1, 2, 3, 1, 2])).tolist()
    [0, 2, 1]
    """
    ptr = np.asarray(ptr, np.int64)
    members = np.asarray(members, np.int64)
    k = len(ptr) - 1
    if k <= 2:
        return np.arange(k, dtype=np.int64)
    sets = _vertex_sets(ptr, members, k)
    m = len(sets)
    if m * k > max_cells:
        return None
    inc = np.zeros((m, k), np.float32)
    for i, s in enumerate(sets):
        inc[i, list(s)] = 1.0
    both = inc @ inc.T
    size = inc.sum(axis=1)
    overlap = (both > 0) & (both < size[:, None]) & (both < size[None, :])
    adj = [np.flatnonzero(row).tolist() for row in overlap]
    comp = np.full(m, -1, np.int64)
    comps = []   # (union, blocks, is_single_set)
    for i in range(m):   # sets are sorted by size, largest first: parents come first
        if comp[i] >= 0:
            continue
        members_ = _component(adj, i)
        comp[members_] = len(comps)
        if len(members_) == 1:
            blocks = [set(sets[i])]
        else:
            blocks = _arrange_component(sets, adj, i)
            if blocks is None:
                return None
        union = set().union(*blocks)
        comps.append((union, blocks, len(members_) == 1))
    # nest: larger unions first; a single set before a component with the same union
    idx = sorted(range(len(comps)), key=lambda c: (-len(comps[c][0]), not comps[c][2], c))
    children = {}   # (component, block) -> child components
    roots = []
    placed = []
    for c in idx:
        union = comps[c][0]
        e = next(iter(union))
        host = None
        for p in reversed(placed):   # the smallest placed union holding this one
            if e in comps[p][0]:
                host = p
                break
        if host is None:
            roots.append(c)
        else:
            blocks = comps[host][1]
            b = next(t for t, blk in enumerate(blocks) if e in blk)
            if not union <= blocks[b]:
                return None
            children.setdefault((host, b), []).append(c)
        placed.append(c)
    out = []

    def layout(c):
        stack = [(c, 0)]
        while stack:
            comp_, b = stack.pop()
            blocks = comps[comp_][1]
            if b >= len(blocks):
                continue
            stack.append((comp_, b + 1))
            kids = children.get((comp_, b), [])
            inside = set().union(*(comps[x][0] for x in kids)) if kids else set()
            out.extend(sorted(blocks[b] - inside))
            for x in reversed(kids):
                stack.append((x, 0))

    covered = set()
    for c in roots:
        layout(c)
        covered |= comps[c][0]
    out.extend(x for x in range(k) if x not in covered)
    order = np.asarray(out, np.int64)
    if len(order) != k or not _is_consecutive(ptr, members, order):
        return None
    return order


def _is_consecutive(ptr, members, order) -> bool:
    """Is every vertex's set of cliques consecutive in ``order``?"""
    k = len(ptr) - 1
    if k == 0:
        return True
    pos = np.empty(k, np.int64)
    pos[order] = np.arange(k)
    p = np.repeat(pos, np.diff(ptr))
    nv = int(members.max()) + 1 if len(members) else 0
    lo = np.full(nv, k, np.int64)
    hi = np.full(nv, -1, np.int64)
    np.minimum.at(lo, members, p)
    np.maximum.at(hi, members, p)
    cnt = np.bincount(members, minlength=nv)
    used = cnt > 0
    return bool(np.all(hi[used] - lo[used] + 1 == cnt[used]))


def clique_path(indptr, indices, sweeps: int = 8):
    """The maximal cliques ``(ptr, members)`` in a consecutive order when the graph is an
    interval graph, else ``None`` (see the module doc). Every vertex is in some clique."""
    indptr = np.asarray(indptr, np.int64)
    indices = np.asarray(indices, np.int64)
    n = len(indptr) - 1
    if n == 0:
        return np.zeros(1, np.int64), np.zeros(0, np.int64)
    model = interval_order(indptr, indices, sweeps=sweeps)
    if model is not None:   # verified by interval_order: overlaps are exactly the edges
        return cliques_of_intervals(model[:, 0], model[:, 1])
    cl = chordal_cliques(indptr, indices)
    if cl is None:
        return None   # interval graphs are chordal
    ptr, members, _ = cl
    order = consecutive_order(ptr, members)
    if order is None:
        return None
    return _reorder(ptr, members, order)


def interval_model(indptr, indices) -> np.ndarray | None:
    """An interval model of the graph, ``(n, 2)`` intervals ``[start, end)`` over clique
    positions (two vertices adjacent exactly when their intervals overlap), from
    ``clique_path``; ``None`` when the graph is not an interval graph.

    >>> from tilemem.liveness.graphalg import csr_from_edges
    >>> interval_model(*csr_from_edges(3, [(0, 1), (1, 2)])).tolist()
    [[0, 1], [0, 2], [1, 2]]
    """
    path = clique_path(indptr, indices)
    if path is None:
        return None
    ptr, members = path
    n = len(indptr) - 1
    at = np.repeat(np.arange(len(ptr) - 1, dtype=np.int64), np.diff(ptr))
    start = np.full(n, len(ptr) - 1, np.int64)
    end = np.zeros(n, np.int64)
    np.minimum.at(start, members, at)
    np.maximum.at(end, members, at + 1)
    return np.stack([start, end], axis=1)


def _reorder(ptr, members, order):
    lengths = np.diff(ptr)[order]
    new_ptr = np.zeros(len(order) + 1, np.int64)
    np.cumsum(lengths, out=new_ptr[1:])
    idx = np.concatenate([np.arange(ptr[c], ptr[c + 1]) for c in order]) if len(order) \
        else np.zeros(0, np.int64)
    return new_ptr, members[idx].astype(np.int64)


# ---- chordal graphs that are not interval graphs: a linear order of a clique tree ------------

def tree_order(parent) -> np.ndarray:
    """An order of the nodes of a forest (``parent[c]``, -1 at roots) that keeps every
    subtree's span short: per tree, depth first from one end of a longest path, at each node
    the children with shallower subtrees first (ties: smaller, then lower index) so that
    the longest branch, which a vertex crossing the node most likely continues into, comes
    last. Trees follow each other by lowest node index.

    >>> tree_order(np.array([-1, 0, 0, 1])).tolist()   # 3-1-0-2: starts at an end, 3
    [3, 1, 0, 2]
    """
    parent = np.asarray(parent, np.int64)
    k = len(parent)
    nbr = [[] for _ in range(k)]
    for c in range(k):
        if parent[c] >= 0:
            nbr[c].append(int(parent[c]))
            nbr[int(parent[c])].append(c)

    def bfs(src):
        dist = {src: 0}
        queue = [src]
        for a in queue:
            for b in nbr[a]:
                if b not in dist:
                    dist[b] = dist[a] + 1
                    queue.append(b)
        return dist, queue

    done = np.zeros(k, bool)
    out = []
    for c0 in range(k):
        if done[c0]:
            continue
        dist, comp = bfs(c0)
        far = max(comp, key=lambda x: (dist[x], -x))
        dist, comp = bfs(far)           # rooted at one end of a longest path
        par = {far: -1}
        for a in comp:
            for b in nbr[a]:
                if b not in par:
                    par[b] = a
        height = {a: 0 for a in comp}
        size = {a: 1 for a in comp}
        for a in reversed(comp):
            if par[a] >= 0:
                height[par[a]] = max(height[par[a]], height[a] + 1)
                size[par[a]] += size[a]
        stack = [far]
        while stack:
            a = stack.pop()
            out.append(a)
            done[a] = True
            kids = sorted((b for b in nbr[a] if par.get(b) == a and b != par[a]),
                          key=lambda b: (height[b], size[b], b))
            stack.extend(reversed(kids))
    return np.asarray(out, np.int64)


def ordered_cliques(indptr, indices):
    """``(ptr, members, how)``: the maximal cliques in a consecutive order (``how`` =
    "interval"), else those of a chordal graph along a clique tree (``tree_order``, "chordal"),
    else ``None`` (the graph is not chordal: cover it some other way)."""
    path = clique_path(indptr, indices)
    if path is not None:
        return path[0], path[1], "interval"
    cl = chordal_cliques(indptr, indices)
    if cl is None:
        return None
    ptr, members, parent = cl
    ptr, members = _reorder(ptr, members, tree_order(parent))
    return ptr, members, "chordal"


# ---- colour refinement -------------------------------------------------------------------------

@njit(cache=True)
def _mix1(x):
    """splitmix64's finaliser: a fixed bijection of uint64 that scatters bits."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(cache=True)
def _refine_keys(indptr, indices, colour, el, labelled):
    """One refinement round's keys: ``mix(mix(colour) ^ sum of mix(neighbour colour * 64 +
    edge label))``, compiled (the numpy form cost 0.1 s per round on a dense tile graph).
    ``el``: the edge labels as they come (non-negative ints; read only when ``labelled``),
    not converted first: a copy of millions of entries per call."""
    n = len(indptr) - 1
    key = np.empty(n, np.uint64)
    for v in range(n):
        s = np.uint64(0)
        for k in range(indptr[v], indptr[v + 1]):
            e = np.uint64(el[k]) if labelled else np.uint64(0)
            s += _mix1(np.uint64(colour[indices[k]]) * np.uint64(64) + e)
        key[v] = _mix1(_mix1(np.uint64(colour[v])) ^ s)
    return key


def refine_colours(indptr, indices, labels, edge_labels=None, rounds: int = 16) -> np.ndarray:
    """Colour refinement of a vertex-labelled graph: start from the labels (rows of
    ``labels``, compared as tuples), then repeatedly split colours by the multiset of
    neighbours' colours (with ``edge_labels``, small non-negative ints per CSR entry) until
    stable. Colours are ``0..c-1`` in an order fixed by the labels and the graph alone, so two
    numberings of the same graph get the same colour per vertex (colours and multisets are
    compared through 64-bit hashes: a collision would merely merge two colours).

    >>> from tilemem.liveness.graphalg import csr_from_edges
    >>> c = refine_colours(*csr_from_edges(4, [(0, 1), (1, 2), (2, 3)]), np.zeros(4))
    >>> bool(c[0] == c[3] != c[1] == c[2])      # ends and middles of a path
    True
    """
    indptr = np.asarray(indptr, np.int64)
    indices = np.asarray(indices)   # as it comes (a copy of millions of entries)
    if indices.dtype.kind not in "iu":
        indices = indices.astype(np.int64)
    lab = np.asarray(labels)
    if lab.ndim == 1:
        lab = lab[:, None]
    n = len(indptr) - 1
    if n == 0:
        return np.zeros(0, np.int64)
    _, colour = np.unique(lab, axis=0, return_inverse=True)
    colour = colour.reshape(-1).astype(np.int64)
    num = int(colour.max()) + 1
    labelled = edge_labels is not None
    el = np.zeros(1, np.int64) if not labelled else np.asarray(edge_labels)
    if labelled and el.dtype.kind not in "iu":
        el = el.astype(np.int64)
    for _ in range(rounds):
        key = _refine_keys(indptr, indices, colour, el, labelled)
        order = np.argsort(key, kind="stable")
        step = np.ones(n, np.int64)
        step[0] = 0
        step[1:] = key[order][1:] != key[order][:-1]
        new = np.empty(n, np.int64)
        new[order] = np.cumsum(step)
        new_num = int(new.max()) + 1
        colour = new
        if new_num == num:
            break
        num = new_num
    return colour


def canonical_numbering(indptr, indices, labels):
    """The graph renumbered in a canonical order, ``(canon, indptr, indices)``: ``canon[j]``
    is the vertex numbered ``j``, by colour refinement from ``labels`` (``refine_colours``;
    ties, vertices refinement cannot tell apart, by their old number); rows sorted. So every
    tie a graph algorithm breaks by number is broken the same way however the vertices were
    numbered. ``indices``: rows sorted and unique.

    >>> from tilemem.liveness.graphalg import csr_from_edges
    >>> one = np.ones((3, 1), np.int64)
    >>> a = canonical_numbering(*csr_from_edges(3, [(0, 1), (1, 2)]), one)   # middle: 1
    >>> b = canonical_numbering(*csr_from_edges(3, [(1, 0), (0, 2)]), one)   # middle: 0
    >>> np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2])   # the same graph out
    True
    >>> int(a[0][np.argmax(np.diff(a[1]))]), int(b[0][np.argmax(np.diff(b[1]))])
    (1, 0)
    """
    indptr = np.asarray(indptr, np.int64)
    indices = np.asarray(indices, np.int64)
    k = len(indptr) - 1
    colour = refine_colours(indptr, indices, labels)
    canon = np.lexsort((np.arange(k), colour))
    at = np.empty(k, np.int64)
    at[canon] = np.arange(k)
    src = np.repeat(np.arange(k, dtype=np.int64), np.diff(indptr))
    key = np.sort(at[src] * k + at[indices])   # a bijection: still unique
    new_ptr = np.zeros(k + 1, np.int64)
    np.cumsum(np.bincount(key // max(k, 1), minlength=k), out=new_ptr[1:])
    return canon, new_ptr, (key % max(k, 1)).astype(np.int64)
