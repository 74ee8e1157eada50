"""Liveness analyser: maximum live bytes against an independent brute force, every exact path
(steps sweep, chordal, branch and bound), bounds when the search is cut short, timelines,
class graphs, and the `tilemem liveness` command."""
from __future__ import annotations

import itertools
import json
from dataclasses import replace

import networkx as nx
import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import importlib

# the stage module (``tilemem.liveness`` as an attribute is the API's function)
liveness = importlib.import_module("tilemem.liveness")
from tilemem.cli import cli
from tilemem.load import save_report
from tilemem.liveness import (always_live_bytes, class_graph, max_live, max_live_all,
                              timeline)
from tilemem.liveness.graphalg import csr_from_edges, interval_order, max_weight_clique
from tilemem.model import Csr, Report
from tilemem.model.target import MK1


def make(size, eq_class, interference, tile=None, always_live=None, steps=None, tiles=1):
    n = len(size)
    return Report.from_columns(
        target=MK1.with_tiles(tiles), var_id=list(range(n)),
        tile=tile if tile is not None else [0] * n, size=size, alignment=[4] * n,
        offset=[0] * n, category=["variable"] * n, eq_class=eq_class,
        interference=interference, always_live=always_live, class_steps=steps)


# ---- independent oracle: brute force over the variables of a tile ------------------------------

def brute_max_live(sizes, classes, always, lists, rows):
    """Heaviest set of pairwise-conflicting variables among ``rows``, from the definition:
    conflict when either is alwaysLive, same class, or either class lists the other."""
    listed = {(a, b) for a, lst in enumerate(lists) for b in lst}

    def conflict(i, j):
        return (always[i] or always[j] or classes[i] == classes[j]
                or (classes[i], classes[j]) in listed or (classes[j], classes[i]) in listed)

    best = 0
    for k in range(len(rows) + 1):
        for sub in itertools.combinations(rows, k):
            if all(conflict(i, j) for i, j in itertools.combinations(sub, 2)):
                best = max(best, sum(sizes[i] for i in sub))
    return best


@st.composite
def small_reports(draw):
    k = draw(st.integers(1, 7))                     # classes
    mode = draw(st.sampled_from(["none", "consistent", "superset"]))
    steps = None
    if mode == "none":
        pairs = [(a, b) for a in range(k) for b in range(k)]
        chosen = draw(st.lists(st.sampled_from(pairs), max_size=20))
        lists = [[] for _ in range(k)]
        for a, b in chosen:                         # one-sided lists and self entries allowed
            lists[a].append(b)
    else:
        starts = draw(st.lists(st.integers(0, 10), min_size=k, max_size=k))
        lens = draw(st.lists(st.integers(0, 6), min_size=k, max_size=k))
        steps = [[s, s + d] for s, d in zip(starts, lens)]
        lists = [[] for _ in range(k)]
        for a in range(k):
            for b in range(a + 1, k):
                if max(steps[a][0], steps[b][0]) < min(steps[a][1], steps[b][1]):
                    if mode == "consistent" or draw(st.booleans()):
                        lists[a].append(b)
    n = draw(st.integers(1, 11))
    tiles = draw(st.integers(1, 3))
    tile = draw(st.lists(st.integers(0, tiles - 1), min_size=n, max_size=n))
    cls = draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n))
    size = draw(st.lists(st.integers(0, 64), min_size=n, max_size=n))
    always = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    r = make(size, cls, lists, tile=tile, always_live=always, steps=steps, tiles=tiles)
    return r, lists


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_reports())
def test_max_live_equals_brute_force(case):
    r, lists = case
    sizes, classes = r.size.tolist(), r.eq_class.tolist()
    always = r.always_live.tolist()
    for m in max_live_all(r):
        rows = r.tile_rows(m.tile).tolist()
        expected = brute_max_live(sizes, classes, always, lists, rows)
        assert m.max_live_bytes == expected
        assert m.exact and m.upper_bound_bytes == expected
        # the peak set is real: pairwise conflicting, of exactly that weight
        peak = m.peak_rows.tolist()
        assert sum(sizes[i] for i in peak) == expected
        assert brute_max_live(sizes, classes, always, lists, peak) == expected
        assert set(r.tile_rows(m.tile)[r.always_live[r.tile_rows(m.tile)]]) <= set(peak)
        assert m.always_live_bytes == sum(sizes[i] for i in rows if always[i])


# ---- hand-computed cases ------------------------------------------------------------------------

def test_chordless_cycle_needs_search():
    # classes 0-1-2-3-0 (a 4-cycle), heavy 0 and 2 do not interfere: best is an edge, 3 + 1
    r = make([3, 1, 3, 1], [0, 1, 2, 3], [[1, 3], [2], [3], []])
    m = max_live(r, 0)
    assert (m.max_live_bytes, m.exact) == (4, True)
    assert m.method in ("bounds", "branch-and-bound")
    assert len(m.peak_classes) == 2


def test_only_always_live_and_empty_tiles():
    r = make([8, 4], [0, 0], [[]], tile=[0, 0], always_live=[1, 1], tiles=2)
    a, b = max_live_all(r)
    assert (a.max_live_bytes, a.always_live_bytes, a.exact) == (12, 12, True)
    assert a.peak_classes.tolist() == [] and a.peak_rows.tolist() == [0, 1]
    assert (b.max_live_bytes, b.method, b.peak_rows.tolist()) == (0, "empty", [])


def test_same_class_variables_add_up():
    # three variables of one class on a tile are live together
    r = make([4, 8, 16, 100], [0, 0, 0, 1], [[], []])
    m = max_live(r, 0)
    assert m.max_live_bytes == 100 and m.peak_classes.tolist() == [1]
    r = make([4, 8, 16, 20], [0, 0, 0, 1], [[], []])
    assert max_live(r, 0).max_live_bytes == 28


def test_steps_paths():
    steps = [[0, 4], [2, 6], [5, 9]]                 # 0-1 and 1-2 overlap
    sizes = [10, 20, 30]
    r = make(sizes, [0, 1, 2], [[1], [2], []], steps=steps)
    m = max_live(r, 0)
    assert (m.max_live_bytes, m.method, m.peak_classes.tolist()) == (50, "steps", [1, 2])
    # interference a strict subset of the step overlaps (If/Else): sweep is only a bound
    r = make(sizes, [0, 1, 2], [[1], [], []], steps=steps)
    m = max_live(r, 0)
    assert (m.max_live_bytes, m.exact, m.method) == (30, True, "chordal")
    # a strict subset whose heaviest step is still a clique (3 and 4 overlap, do not
    # interfere, elsewhere): that step is the answer, no class graph built
    r = make(sizes + [5, 5], [0, 1, 2, 3, 4], [[1], [2], [], [], []],
             steps=steps + [[10, 14], [12, 16]])
    m = max_live(r, 0)
    assert (m.max_live_bytes, m.exact, m.method, m.peak_classes.tolist()) == (
        50, True, "steps", [1, 2])
    # empty step interval: a class alone
    r = make([5, 100], [0, 1], [[], []], steps=[[0, 3], [4, 4]])
    m = max_live(r, 0)
    assert (m.max_live_bytes, m.peak_classes.tolist()) == (100, [1])


def test_search_budget_gives_valid_bounds():
    # a dense random graph whose greedy clique does not meet the bounds
    rng = np.random.default_rng(3)
    n = 120
    edges = [(a, b) for a in range(n) for b in range(a + 1, n) if rng.random() < 0.6]
    ip, ix = csr_from_edges(n, edges)
    w = rng.integers(1, 100, n)
    full = max_weight_clique(ip, ix, w)
    cut = max_weight_clique(ip, ix, w, node_limit=1)
    assert full.exact
    assert cut.weight <= full.weight <= cut.upper
    g = nx.Graph(edges)
    assert all(g.has_edge(a, b) for a, b in itertools.combinations(cut.members.tolist(), 2))
    assert int(w[cut.members].sum()) == cut.weight
    if not cut.exact:
        assert cut.method == "greedy"


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=30),
    st.lists(st.integers(0, 50), min_size=n, max_size=n))))
def test_max_weight_clique_graph_level(case):
    n, edges, w = case
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from((a, b) for a, b in edges if a != b)
    best = max((sum(w[v] for v in c) for c in nx.enumerate_all_cliques(g)), default=0)
    c = max_weight_clique(*csr_from_edges(n, edges), np.array(w))
    assert c.exact and c.weight == best == c.upper


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.floats(0, 1), st.integers(0, 2 ** 31))
def test_greedy_clique_is_the_greedy_rule(n, p, seed):
    """The compiled greedy (members counted per vertex) against the rule read plainly: from
    each seed, its neighbours heaviest first (ties by id), each taken when adjacent to every
    member taken; the heaviest of those cliques (the first seed's on a tie)."""
    from tilemem.liveness.graphalg import _greedy_clique

    rng = np.random.default_rng(seed)
    edges = [(a, b) for a in range(n) for b in range(a + 1, n) if rng.random() < p]
    w = rng.integers(0, 9, n).astype(np.int64)
    seeds = np.unique(rng.integers(0, n, min(n, 6))).astype(np.int64)
    adj = {v: set() for v in range(n)}
    for a, b in edges:
        adj[a].add(b)
        adj[b].add(a)
    best = (-1, [])
    for s in seeds.tolist():
        clique = [s]
        for u in sorted(adj[s], key=lambda v: (-w[v], v)):
            if all(u in adj[m] for m in clique):
                clique.append(u)
        total = int(w[clique].sum())
        if total > best[0]:
            best = (total, sorted(clique))
    got_w, got = _greedy_clique(*csr_from_edges(n, edges), w, seeds)
    assert (int(got_w), got.tolist()) == best


# ---- timeline -----------------------------------------------------------------------------------

def overlap_graph(iv):
    n = len(iv)
    return {(a, b) for a in range(n) for b in range(a + 1, n)
            if max(iv[a][0], iv[b][0]) < min(iv[a][1], iv[b][1])}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 10)), min_size=1, max_size=25),
       st.randoms(use_true_random=False))
def test_interval_order_recovers_interval_graphs(spans, rnd):
    iv = [(s, s + d) for s, d in spans]
    perm = list(range(len(iv)))
    rnd.shuffle(perm)                                 # vertex ids unrelated to time
    iv = [iv[p] for p in perm]
    edges = overlap_graph(iv)
    model = interval_order(*csr_from_edges(len(iv), edges))
    assert model is not None
    assert overlap_graph(model.tolist()) == edges


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 9).flatmap(lambda n: st.tuples(st.just(n), st.lists(
    st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=25))))
def test_interval_order_never_wrong(case):
    n, edges = case
    e = {(min(a, b), max(a, b)) for a, b in edges if a != b}
    model = interval_order(*csr_from_edges(n, e))
    if model is not None:
        assert overlap_graph(model.tolist()) == e


def test_interval_order_rejects_non_interval_graphs():
    c4 = [(0, 1), (1, 2), (2, 3), (3, 0)]
    # chordal but not interval: a claw with subdivided edges (asteroidal triple 2, 4, 6)
    t2 = [(0, 1), (1, 2), (0, 3), (3, 4), (0, 5), (5, 6)]
    assert interval_order(*csr_from_edges(4, c4)) is None
    assert interval_order(*csr_from_edges(7, t2)) is None


def test_timeline():
    steps = [[0, 4], [2, 6], [5, 9]]
    r = make([1, 1, 1], [0, 1, 2], [[1], [2], []], steps=steps)
    assert timeline(r).tolist() == steps
    r = replace(r, class_steps=None)
    tl = timeline(r)
    assert overlap_graph(tl.tolist()) == {(0, 1), (1, 2)}
    # per tile: classes of other tiles get [-1, -1]
    r = make([1, 1, 1, 1], [0, 1, 2, 3], [[1, 3], [2], [3], []], tile=[0, 0, 0, 1], tiles=2)
    tl = timeline(r, 0)
    assert tl[3].tolist() == [-1, -1]
    assert overlap_graph(tl[:3].tolist()) == {(0, 1), (1, 2)}
    assert timeline(r) is None                        # the whole graph is a 4-cycle


# ---- class graph, always-live bytes -------------------------------------------------------------

def test_class_graph_and_always_live():
    r = make([8, 4, 2, 6], [0, 1, 2, 2], [[1], [], [0]], tile=[0, 0, 0, 1],
             always_live=[0, 0, 1, 0], tiles=2)
    g = class_graph(r)
    assert sorted(g.edges()) == [(0, 1), (0, 2)] and g.number_of_nodes() == 3
    g0 = class_graph(r, 0)
    assert g0.nodes[2] == {"bytes": 0, "always_live": 2}
    assert class_graph(r, 1).number_of_nodes() == 1
    assert always_live_bytes(r).tolist() == [2, 0]


def test_unsorted_interference_csr():
    # a Csr handed to from_columns as is: rows unsorted, one-sided
    inter = Csr(np.array([0, 2, 2, 2]), np.array([2, 1]))
    r = make([5, 6, 7], [0, 1, 2], inter)
    assert max_live(r, 0).max_live_bytes == 12        # 0-2 is an edge, 0-1 too, 1-2 not


# ---- the conflict structure the packers read ---------------------------------------------------

@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_reports(), st.booleans(), st.randoms(use_true_random=False))
def test_tile_conflicts_follow_the_rule(case, dense, rnd):
    """Every view of ``TileConflicts`` (the compiled pair test, the class matrix, the conflict
    graph of a subset, the pairs, the conflict bytes) says what the rule says, read here from
    the columns: either alwaysLive, same class, or either class lists the other. ``dense``
    False: past the dense limit (set to 0 here), where the test searches the class rows."""
    r, lists = case
    listed = {(a, b) for a, lst in enumerate(lists) for b in lst}
    cls, al, size = r.eq_class.tolist(), r.always_live.tolist(), r.size.tolist()

    def rule(i, j):  # model rows
        return i != j and bool(al[i] or al[j] or cls[i] == cls[j] or (cls[i], cls[j]) in listed
                               or (cls[j], cls[i]) in listed)

    with pytest.MonkeyPatch.context() as mp:
        if not dense:
            mp.setattr(liveness.conflicts, "DENSE_MAX", 0)
        for t in range(r.num_tiles):
            tc = liveness.tile_conflicts(r, t)
            rows = tc.rows.tolist()
            n = len(rows)
            assert (tc.class_matrix is not None) == (dense or n == 0)  # 0 x 0 is small
            if dense:
                k = len(tc.classes)
                ids = tc.classes.tolist()
                assert tc.class_matrix.tolist() == [
                    [a == b or (ids[a], ids[b]) in listed or (ids[b], ids[a]) in listed
                     for b in range(k)] for a in range(k)]
            for i in range(n):
                for j in range(n):
                    assert tc.conflicts(i, j) == rule(rows[i], rows[j])
            pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if rule(rows[i], rows[j])]
            assert list(zip(*(x.tolist() for x in tc.conflict_pairs()))) == pairs
            sub = sorted(rnd.sample(range(n), rnd.randint(0, n)))
            ptr, idx = tc.conflict_csr(np.array(sub, np.int64), sort=True)
            for a, i in enumerate(sub):
                assert idx[ptr[a]:ptr[a + 1]].tolist() == [
                    b for b, j in enumerate(sub) if rule(rows[i], rows[j])]
            assert tc.conflict_bytes(r.size[tc.rows]).tolist() == [
                sum(size[rows[j]] for j in range(n) if j == i or rule(rows[i], rows[j]))
                for i in range(n)]


# ---- MiniMalloc instances: the chordal path equals an interval sweep ------------------------------

def read_minimalloc(path):
    rows = [line.split(",") for line in path.read_text().split()[1:]]
    return [(int(lo), int(hi), int(size)) for _, lo, hi, size in (r[:4] for r in rows)]


def sweep(buffers):
    events = sorted([(lo, 1, s) for lo, hi, s in buffers] + [(hi, 0, -s) for lo, hi, s in buffers])
    live = best = 0
    for _, _, d in events:                          # ends (0) before starts (1) at equal times
        live += d
        best = max(best, live)
    return best


def minimalloc_report(buffers, with_steps):
    spans = sorted({(lo, hi) for lo, hi, _ in buffers})
    cls = {s: i for i, s in enumerate(spans)}
    lo = np.array([s[0] for s in spans])
    hi = np.array([s[1] for s in spans])
    ov = (np.maximum(lo[:, None], lo[None, :]) < np.minimum(hi[:, None], hi[None, :]))
    np.fill_diagonal(ov, False)
    lists = [np.flatnonzero(row).tolist() for row in ov]
    return make([s for _, _, s in buffers], [cls[(a, b)] for a, b, _ in buffers], lists,
                steps=[list(s) for s in spans] if with_steps else None)


def test_minimalloc_instances(minimalloc_dir):
    expected = {"A": 1048576, "C": 1039360, "D": 986112}   # the shared README's figures
    for path in sorted(minimalloc_dir.glob("*.csv")):
        buffers = read_minimalloc(path)
        truth = sweep(buffers)
        for with_steps in (False, True):
            m = max_live(minimalloc_report(buffers, with_steps), 0)
            assert (m.max_live_bytes, m.exact) == (truth, True), path.name
            assert m.method == ("steps" if with_steps else "chordal")
        name = path.name.split(".")[0]
        if name in expected:
            assert truth == expected[name]


@pytest.fixture
def minimalloc_dir():
    from pathlib import Path

    d = Path(__file__).resolve().parents[1] / ".." / "shared" / "benchmarks" / "minimalloc"
    if not d.is_dir() or not list(d.glob("*.csv")):
        pytest.skip(f"MiniMalloc instances not found at {d} (shared benchmark data is absent)")
    return d


# ---- generated reports --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def generated():
    from tilemem.generate import generate_report

    return generate_report("mk1", tiles=12, steps=120, seed=3)


def test_generated_report(generated):
    r = generated
    with_steps = max_live_all(r)
    without = max_live_all(replace(r, class_steps=None))
    assert [m.max_live_bytes for m in with_steps] == [m.max_live_bytes for m in without]
    assert all(m.exact for m in with_steps)
    # the generator's allocation is valid, so it spans at least every tile's peak live set
    ends = np.zeros(r.num_tiles, np.int64)
    a = r.allocated
    np.maximum.at(ends, r.tile[a], r.offset[a] + r.size[a])
    assert all(m.max_live_bytes <= ends[m.tile] for m in with_steps)
    assert all(m.always_live_bytes > 0 and m.max_live_bytes > m.always_live_bytes
               for m in with_steps)


# ---- command ------------------------------------------------------------------------------------

def test_liveness_command(tmp_path, generated):
    p = tmp_path / "g.json"
    save_report(generated, p)
    run = CliRunner().invoke(cli, ["liveness", str(p), "--json"])
    assert run.exit_code == 0, run.output
    d = json.loads(run.output)
    found = {m.tile: m for m in max_live_all(generated)}
    assert [t["tile"] for t in d["tiles"]] == list(range(generated.num_tiles))
    for t in d["tiles"]:
        m = found[t["tile"]]
        assert (t["alwaysLiveBytes"], t["maxLiveBytes"], t["exact"]) == (
            m.always_live_bytes, m.max_live_bytes, m.exact)
        assert sum(v["bytes"] for v in t["peakVars"]) == m.max_live_bytes - m.always_live_bytes
    run = CliRunner().invoke(cli, ["liveness", str(p), "--tile", "3", "--top", "4"])
    assert run.exit_code == 0, run.output
    assert "Variable Storage Liveness: Tile 3" in run.output
    assert f"{found[3].max_live_bytes:,}" in run.output
    assert "Live Vars (excluding always-live)" in run.output
    run = CliRunner().invoke(cli, ["liveness", str(p)])
    peak = max(found.values(), key=lambda m: m.max_live_bytes)
    assert f"on tile {peak.tile}" in run.output
    from tilemem.cli import main
    assert main(["liveness", str(p), "--tile", "999"]) == 2
