"""ReweightedBound (the class graph's maximal cliques found once): the maximum live bytes it
gives for other sizes, and with classes added over a range of steps, against brute force over
every set of classes on the tile; ``None`` for a graph that is not chordal; and split's stage
estimates by it against the same stages searched on their own reports (``max_live_all``)."""
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilemem.figures.split.estimate import SplitModel
from tilemem.generate import generate_report
from tilemem.liveness.cliques import Extra, ReweightedBound
from tilemem.model import Report, symmetric_closure
from tilemem.model.target import MK1

from liveness_oracle import brute_force


def subtree_graph(rng, classes: int, tree: int = 10):
    """A random chordal graph: the classes are subtrees of a random tree, two interfering when
    they share a node (every chordal graph is such an intersection graph)."""
    parent = [-1] + [int(rng.integers(0, k)) for k in range(1, tree)]
    adj = [set() for _ in range(tree)]
    for k in range(1, tree):
        adj[k].add(parent[k])
        adj[parent[k]].add(k)
    subtrees = []
    for _ in range(classes):
        grown = {int(rng.integers(0, tree))}
        for _ in range(int(rng.integers(0, 4))):
            grown.add(int(rng.choice(sorted(set().union(*(adj[v] for v in grown))))))
        subtrees.append(grown)
    return [(a, b) for a, b in itertools.combinations(range(classes), 2)
            if subtrees[a] & subtrees[b]]


def report_of(edges, classes, rng, tiles=3, steps=None):
    n = 4 * classes
    cls = rng.integers(0, classes, n)
    src = np.array([e[0] for e in edges], np.int64)
    dst = np.array([e[1] for e in edges], np.int64)
    return Report.from_columns(
        target=MK1.with_tiles(tiles), var_id=range(n), tile=rng.integers(0, tiles, n),
        size=rng.integers(0, 50, n) * 4, alignment=[4] * n, offset=[0] * n,
        category=["variable"] * n, eq_class=cls, always_live=rng.random(n) < 0.1,
        interference=symmetric_closure(classes, src, dst), class_steps=steps)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(2, 11))
def test_chordal_graphs_against_brute_force(seed, classes):
    rng = np.random.default_rng(seed)
    edges = subtree_graph(rng, classes)
    r = report_of(edges, classes, rng)
    b = ReweightedBound.of(r)
    assert b is not None
    for size in (r.size, r.size * rng.integers(0, 3, r.num_vars)):
        peak, al = b.max_live(b.node_weights(size), np.arange(r.num_tiles))
        want = [brute_force(r, size, r.allocated, t, set(edges)) for t in range(r.num_tiles)]
        assert peak.tolist() == want
        assert al.tolist() == [int(size[(r.tile == t) & r.always_live].sum())
                               for t in range(r.num_tiles)]


def test_not_chordal_is_none():
    rng = np.random.default_rng(0)
    r = report_of([(0, 1), (1, 2), (2, 3), (3, 0)], 4, rng)      # a chordless 4-cycle
    assert ReweightedBound.of(r) is None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(2, 9), st.integers(1, 3))
def test_added_classes_against_brute_force(seed, classes, added):
    """Classes live over steps (an interval graph), and ``added`` copies of rows live over
    ranges of their own: the graph with them added, searched by brute force."""
    rng = np.random.default_rng(seed)
    steps = np.sort(rng.integers(0, 12, (classes, 2)), axis=1)
    steps[:, 1] += 1
    edges = [(a, b) for a, b in itertools.combinations(range(classes), 2)
             if steps[a, 0] < steps[b, 1] and steps[b, 0] < steps[a, 1]]
    r = report_of(edges, classes, rng, steps=steps)
    extra = []
    for _ in range(added):
        a = int(rng.integers(0, 12))
        extra.append(Extra(np.flatnonzero((rng.random(r.num_vars) < 0.2) & r.allocated),
                           a, a + int(rng.integers(1, 4))))
    b = ReweightedBound.of(r)
    peak, _ = b.max_live(b.node_weights(r.size), np.arange(r.num_tiles), extra)
    # the same graph written out: the added classes as classes of their own
    C = classes + added
    span = np.concatenate([steps, [[e.start, e.end] for e in extra]])
    all_edges = set(edges)
    for k in range(classes, C):
        for c in range(C):
            if c != k and span[c, 0] < span[k, 1] and span[c, 1] > span[k, 0]:
                all_edges.add((min(c, k), max(c, k)))
    rows = np.concatenate([e.rows for e in extra])
    big = Report.from_columns(
        target=r.target, var_id=range(r.num_vars + len(rows)),
        tile=np.concatenate([r.tile, r.tile[rows]]),
        size=np.concatenate([r.size, r.size[rows]]), alignment=[4] * (r.num_vars + len(rows)),
        offset=[0] * (r.num_vars + len(rows)), category=["variable"] * (r.num_vars + len(rows)),
        eq_class=np.concatenate([r.eq_class, np.repeat(np.arange(classes, C),
                                                        [len(e.rows) for e in extra])]),
        always_live=np.concatenate([r.always_live, np.zeros(len(rows), bool)]),
        interference=symmetric_closure(C, np.array([e[0] for e in all_edges], np.int64),
                                       np.array([e[1] for e in all_edges], np.int64)))
    assert peak.tolist() == [brute_force(big, big.size, big.allocated, t, all_edges)
                             for t in range(r.num_tiles)]


@pytest.mark.parametrize("model,steps,stash", [
    ("cnn", True, "inputs"), ("cnn", False, "inputs"), ("transformer", True, "activations"),
    ("transformer", False, "inputs")])
def test_split_stages_by_cliques_equal_each_stage_searched(model, steps, stash):
    """Every stage of a few splits: the estimate by the report's maximal cliques equals the
    one from searching the stage's own report (``max_live_all``, the path taken when the
    report's class graph is not chordal)."""
    from dataclasses import replace

    r = generate_report("mk2", tiles=16, steps=300 if model == "cnn" else None, seed=3,
                        pressure=2.0, model=model)
    if not steps:
        r = replace(r, class_steps=None, _cache={})
    fast, slow = SplitModel(r, stash), SplitModel(r, stash)
    slow._bound = False
    assert fast.L >= 4
    for n, (i, j) in [(1, (0, fast.L)), (2, (0, fast.L // 2)), (2, (fast.L // 2, fast.L)),
                      (3, (1, fast.L - 1))]:
        s = 0 if i == 0 else (n - 1 if j == fast.L else 1)
        got, want = fast.stage(s, i, j, n), slow.stage(s, i, j, n)
        assert fast._bound
        for a, b in zip(got, want):
            assert a.tolist() == b.tolist()
