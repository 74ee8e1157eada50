"""The report-wide interval model (``tilemem.liveness.class_intervals``) and the search
sections read off it, against brute force and the per-tile recognition.

Independent expectations: overlaps of the model against the interference pair by pair;
networkx's maximal cliques of each tile's class graph (the sections must be exactly those
cliques, as sets, plus the always-live variables); the checker on the packers' results.
"""
from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from tilemem.check import check_allocation
from tilemem.liveness import class_intervals
from tilemem.model import Report
from tilemem.pack.run.driver import RunOptions, allocate
from tilemem.pack.run.plan import Policy
from tilemem.pack.problem import TileProblem
from tilemem.pack.search.sweep import _sections


def _report(rng, num_classes, tiles, per_tile, interval=True):
    """Classes with random lifetimes (an interval graph), or a 4-cycle added (not one);
    variables of random classes spread over ``tiles`` tiles, distinct sizes."""
    t = 3 * num_classes
    a = rng.integers(0, t, num_classes)
    b = a + 1 + rng.integers(0, t // 3, num_classes)
    inter = [[j for j in range(num_classes) if j != i and a[i] < b[j] and a[j] < b[i]]
             for i in range(num_classes)]
    if not interval:   # classes 0-1-2-3-0 as a chordless 4-cycle, isolated from the rest
        for i in range(4):
            inter[i] = [(i + 1) % 4, (i + 3) % 4]
        for i in range(4, num_classes):
            inter[i] = [j for j in inter[i] if j >= 4]
    n = tiles * per_tile
    cls = rng.integers(0, num_classes, n)
    return Report.from_columns(
        var_id=range(n), tile=np.repeat(np.arange(tiles), per_tile),
        size=4 * (1 + rng.permutation(n)), alignment=[4] * n, offset=[0] * n,
        category=["variable"] * n, eq_class=cls, interference=inter,
        always_live=(rng.random(n) < 0.05).astype(int))


def _meets(iv, i, j):
    return bool(iv[i, 0] < iv[j, 1] and iv[j, 0] < iv[i, 1])


@pytest.mark.parametrize("seed", range(5))
def test_the_model_overlaps_exactly_where_classes_interfere(seed):
    r = _report(np.random.default_rng(seed), 40, 3, 30)
    iv = class_intervals(r)
    assert iv is not None and iv.shape == (40, 2)
    for i in range(40):
        row = set(r.interference.row(i).tolist())
        for j in range(40):
            if i != j:
                assert _meets(iv, i, j) == (j in row), (i, j)


def test_a_report_whose_class_graph_is_not_interval_has_no_model():
    r = _report(np.random.default_rng(7), 30, 2, 20, interval=False)
    assert class_intervals(r) is None


def test_renumbering_the_classes_gives_the_same_model():
    rng = np.random.default_rng(3)
    r = _report(rng, 30, 2, 40)
    perm = rng.permutation(30)           # class c is called perm[c] in the copy
    inter = [[] for _ in range(30)]
    for c in range(30):
        inter[perm[c]] = sorted(perm[r.interference.row(c)].tolist())
    r2 = Report.from_columns(var_id=r.var_id, tile=r.tile, size=r.size,
                             alignment=r.alignment, offset=r.offset,
                             category=["variable"] * r.num_vars, eq_class=perm[r.eq_class],
                             interference=inter, always_live=r.always_live.astype(int))
    assert np.array_equal(class_intervals(r2)[perm], class_intervals(r))


@pytest.mark.parametrize("seed", range(3))
def test_sections_read_off_the_model_are_each_tiles_maximal_cliques(seed):
    r = _report(np.random.default_rng(seed), 50, 4, 60)
    iv = class_intervals(r)
    for tile in range(4):
        p = TileProblem.from_report(r, tile, class_intervals=iv)
        ptr, members, _, how = _sections(p, np.maximum(p.size, 1))
        assert how == "interval"
        secs = [members[ptr[i]:ptr[i + 1]] for i in range(len(ptr) - 1)]
        assert all(np.all(np.diff(s) > 0) for s in secs)   # members increasing
        al = p.conflicts.always_live.astype(bool)
        cls = p.conflicts.local_class
        g = nx.Graph()
        rest = np.flatnonzero(~al)
        g.add_nodes_from(set(cls[rest].tolist()))
        for x in g.nodes:
            for y in g.nodes:
                if x < y and p.conflicts.class_matrix[x, y]:
                    g.add_edge(x, y)
        expected = {frozenset(c) for c in nx.find_cliques(g)}
        got = {frozenset(cls[s[~al[s]]].tolist()) for s in secs}
        assert got == expected
        for s in secs:   # every always-live variable in every section
            assert set(np.flatnonzero(al).tolist()) <= set(s.tolist())


def test_alloc_on_a_multi_tile_report_without_lifetimes_passes_the_checker():
    r = _report(np.random.default_rng(11), 60, 3, 80)
    a = allocate(r, method="exact", policy=Policy(time_limit=2), run=RunOptions(workers=1))
    assert check_allocation(r, a.offsets).ok
    assert all(t.overflow_bytes == 0 for t in a.tiles)
