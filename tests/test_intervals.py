"""Recovering time from interference (``tilemem.liveness.intervals``), against networkx and brute force.

Independent expectations: networkx's maximal cliques, chordality and asteroidal-triple test
(interval = chordal and AT-free, Lekkerkerker & Boland); a brute force over every order of
at most 7 maximal cliques; the textbook minimal non-interval graphs.
"""
from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from tilemem.liveness.graphalg import csr_from_edges
from tilemem.liveness.intervals import (chordal_cliques, clique_path, consecutive_order, interval_model,
                               ordered_cliques, refine_colours, tree_order)


def _csr(g: nx.Graph):
    return csr_from_edges(g.number_of_nodes(), list(g.edges()))


def _cliques(ptr, members):
    return [members[ptr[c]:ptr[c + 1]].tolist() for c in range(len(ptr) - 1)]


def _consecutive(cliques, n) -> bool:
    """Every vertex's cliques adjacent in this order (written out, no shared code)."""
    for v in range(n):
        at = [i for i, c in enumerate(cliques) if v in c]
        if at and at[-1] - at[0] + 1 != len(at):
            return False
    return True


def _brute_force_interval(g: nx.Graph) -> bool:
    """Interval iff chordal and some order of the maximal cliques is consecutive (Gilmore &
    Hoffman / Fulkerson & Gross); tries every order."""
    if not nx.is_chordal(g):
        return False
    cl = [set(c) for c in nx.find_cliques(g)]
    return any(_consecutive(list(p), g.number_of_nodes())
               for p in itertools.permutations(cl))


def _random_intervals(rng, n):
    t = int(rng.integers(2, 3 * n + 3))
    a = rng.integers(0, t, n)
    b = a + 1 + rng.integers(0, max(1, int(t * rng.uniform(0.05, 0.6))), n)
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from((i, j) for i in range(n) for j in range(i + 1, n)
                     if a[i] < b[j] and a[j] < b[i])
    return g


def _random_chordal(rng, n):
    """Intersection graph of random subtrees of a random tree (every chordal graph is one)."""
    k = int(rng.integers(1, 2 * n + 2))
    nbr = [[] for _ in range(k)]
    for i in range(1, k):
        p = int(rng.integers(0, i))
        nbr[i].append(p)
        nbr[p].append(i)
    subs = []
    for _ in range(n):
        grown = [int(rng.integers(0, k))]
        for _ in range(int(rng.integers(0, 5))):
            x = grown[int(rng.integers(0, len(grown)))]
            if nbr[x]:
                grown.append(nbr[x][int(rng.integers(0, len(nbr[x])))])
        subs.append(set(grown))
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from((i, j) for i in range(n) for j in range(i + 1, n) if subs[i] & subs[j])
    return g


def _is_interval(g):
    return nx.is_chordal(g) and nx.is_at_free(g)


# ---- interval graphs are recognised, with a consecutive arrangement of their maximal cliques ---

@pytest.mark.parametrize("seed", range(4))
def test_random_interval_graphs_are_recognised(seed):
    rng = np.random.default_rng(seed)
    for _ in range(60):
        n = int(rng.integers(1, 45))
        g = _random_intervals(rng, n)
        ip, ix = _csr(g)
        path = clique_path(ip, ix)
        assert path is not None
        cl = _cliques(*path)
        assert sorted(map(sorted, cl)) == sorted(map(sorted, nx.find_cliques(g)))
        assert _consecutive(cl, n)
        # the exact test alone (without the LexBFS sweeps) finds an arrangement too
        ptr, members, _ = chordal_cliques(ip, ix)
        order = consecutive_order(ptr, members)
        assert order is not None and sorted(order.tolist()) == list(range(len(ptr) - 1))
        assert _consecutive([_cliques(ptr, members)[c] for c in order], n)


@pytest.mark.parametrize("kind", ["chordal", "gnp"])
def test_recognition_agrees_with_brute_force(kind):
    rng = np.random.default_rng(11 if kind == "chordal" else 12)
    tried = 0
    while tried < 80:
        n = int(rng.integers(2, 10))
        g = (_random_chordal(rng, n) if kind == "chordal"
             else nx.gnp_random_graph(n, rng.uniform(0.2, 0.7), seed=int(rng.integers(1 << 30))))
        if sum(1 for _ in nx.find_cliques(g)) > 7:
            continue
        tried += 1
        want = _brute_force_interval(g)
        assert want == _is_interval(g)   # the two independent oracles agree
        ip, ix = _csr(g)
        path = clique_path(ip, ix)
        assert (path is not None) == want, sorted(g.edges())
        cl = chordal_cliques(ip, ix)
        assert (cl is not None) == nx.is_chordal(g)
        if cl is not None:
            assert (consecutive_order(cl[0], cl[1]) is not None) == want, sorted(g.edges())


def test_larger_random_graphs_agree_with_networkx():
    rng = np.random.default_rng(7)
    for i in range(90):
        n = int(rng.integers(5, 30))
        g = (_random_intervals(rng, n), _random_chordal(rng, n),
             nx.gnp_random_graph(n, 0.15, seed=i))[i % 3]
        ip, ix = _csr(g)
        want = _is_interval(g)
        assert (clique_path(ip, ix) is not None) == want
        got = ordered_cliques(ip, ix)
        if not nx.is_chordal(g):
            assert got is None
            continue
        ptr, members, how = got
        assert how == ("interval" if want else "chordal")
        assert sorted(map(sorted, _cliques(ptr, members))) == sorted(
            map(sorted, nx.find_cliques(g)))


# chordal graphs that are not interval graphs, each with an asteroidal triple (3 vertices,
# each two joined by a path avoiding the third's neighbours): 2, 4, 6 / 3, 4, 5 / 3, 4, 5
BIPARTITE_CLAW = [(0, 1), (1, 2), (0, 3), (3, 4), (0, 5), (5, 6)]
NET = [(0, 1), (1, 2), (0, 2), (0, 3), (1, 4), (2, 5)]
SUN = [(0, 1), (1, 2), (0, 2), (3, 0), (3, 1), (4, 1), (4, 2), (5, 2), (5, 0)]


@pytest.mark.parametrize("edges,n,chordal", [
    ([(0, 1), (1, 2), (2, 3), (3, 0)], 4, False),                 # C4
    ([(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)], 5, False),         # C5
    (BIPARTITE_CLAW, 7, True), (NET, 6, True), (SUN, 6, True),
], ids=["C4", "C5", "bipartite claw", "net", "3-sun"])
def test_non_interval_graphs_are_rejected(edges, n, chordal):
    g = nx.Graph(edges)
    assert not _is_interval(g) and nx.is_chordal(g) == chordal   # the oracle agrees
    ip, ix = csr_from_edges(n, edges)
    assert clique_path(ip, ix) is None
    got = ordered_cliques(ip, ix)
    if chordal:
        ptr, members, how = got
        assert how == "chordal"
        assert sorted(map(sorted, _cliques(ptr, members))) == sorted(
            map(sorted, nx.find_cliques(g)))
        assert consecutive_order(ptr, members) is None
    else:
        assert got is None and chordal_cliques(ip, ix) is None


def test_clique_tree_has_the_clique_intersection_property():
    """Every vertex's cliques are connected in the tree, and the tree order's spans only
    include cliques between a vertex's first and last (it is a permutation of the cliques)."""
    rng = np.random.default_rng(3)
    for _ in range(60):
        n = int(rng.integers(1, 25))
        g = _random_chordal(rng, n)
        ptr, members, parent = chordal_cliques(*_csr(g))
        cl = [set(c) for c in _cliques(ptr, members)]
        k = len(cl)
        assert sum(parent < 0) == nx.number_connected_components(g)
        for v in range(n):
            mine = [c for c in range(k) if v in cl[c]]
            assert sum(1 for c in mine if parent[c] in mine) == len(mine) - 1
        assert sorted(tree_order(parent).tolist()) == list(range(k))


def test_tree_order_starts_at_an_end_of_a_longest_path():
    # a path 0-1-2-3-4 with a short branch 2-5: one end of the path first, the branch before
    # the long way on
    parent = np.array([-1, 0, 1, 2, 3, 2])
    order = tree_order(parent).tolist()
    assert order[0] in (0, 4) and sorted(order) == list(range(6))
    assert order.index(5) < order.index(4 if order[0] == 0 else 0)


# ---- colour refinement ------------------------------------------------------------------------

def test_colours_do_not_depend_on_the_numbering():
    rng = np.random.default_rng(5)
    for _ in range(20):
        n = int(rng.integers(2, 40))
        g = nx.gnp_random_graph(n, 0.2, seed=int(rng.integers(1 << 30)))
        labels = rng.integers(0, 3, n)
        perm = rng.permutation(n)   # vertex v becomes perm[v]
        h = nx.relabel_nodes(g, {v: int(perm[v]) for v in range(n)})
        lab_h = np.empty(n, np.int64)
        lab_h[perm] = labels
        a = refine_colours(*_csr(g), labels)
        b = refine_colours(*csr_from_edges(n, list(h.edges())), lab_h)
        assert np.array_equal(a, b[perm])
        # refinement only splits: equal colours have equal labels and equal degrees
        deg = np.array([g.degree(v) for v in range(n)])
        for c in np.unique(a):
            assert len(set(labels[a == c])) == 1 and len(set(deg[a == c])) == 1


def test_colours_tell_a_path_end_from_its_middle():
    c = refine_colours(*csr_from_edges(5, [(0, 1), (1, 2), (2, 3), (3, 4)]), np.zeros(5))
    assert c[0] == c[4] and c[1] == c[3] and len({c[0], c[1], c[2]}) == 3


def test_interval_model_overlaps_are_the_edges():
    rng = np.random.default_rng(9)
    for i in range(40):
        n = int(rng.integers(1, 30))
        g = _random_intervals(rng, n) if i % 2 else _random_chordal(rng, n)
        model = interval_model(*_csr(g))
        assert (model is not None) == _is_interval(g)
        if model is not None:
            a, b = model[:, 0], model[:, 1]
            assert np.all(a < b)
            got = {(u, v) for u in range(n) for v in range(u + 1, n)
                   if a[u] < b[v] and a[v] < b[u]}
            assert got == {tuple(sorted(e)) for e in g.edges()}
