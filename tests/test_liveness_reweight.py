"""TileCliques (each tile's class graph taken apart once, any sizes answered from it) against
``max_live_all`` searched afresh on the report at those sizes, and against brute force: on
random graphs (chordal or not: then the tile is searched at each re-weighting) and on
generated reports, with variables re-sized and offloaded."""
import itertools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilemem.generate import generate_report
from tilemem.liveness import max_live_all
from tilemem.liveness.reweight import TileCliques
from tilemem.model import Report, symmetric_closure
from tilemem.model.target import MK1

from liveness_oracle import brute_force


def random_report(rng, classes: int, density: float, tiles: int = 3) -> tuple[Report, set]:
    edges = {(a, b) for a, b in itertools.combinations(range(classes), 2)
             if rng.random() < density}
    n = 4 * classes
    src = np.array([e[0] for e in edges], np.int64)
    dst = np.array([e[1] for e in edges], np.int64)
    r = Report.from_columns(
        target=MK1.with_tiles(tiles), var_id=range(n), tile=rng.integers(0, tiles, n),
        size=rng.integers(0, 50, n) * 4, alignment=[4] * n, offset=[0] * n,
        category=["variable"] * n, eq_class=rng.integers(0, classes, n),
        always_live=rng.random(n) < 0.1, interference=symmetric_closure(classes, src, dst))
    return r, edges


def fresh(r: Report, size, allocated, tiles) -> list[int]:
    """``max_live_all`` on the report with those sizes, offloaded rows off their tiles."""
    from tilemem.figures.whatif.edits import changed_report

    return [m.max_live_bytes for m in max_live_all(changed_report(r, size, allocated), tiles)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(2, 10), st.floats(0.2, 0.8))
def test_random_graphs_against_brute_force_and_a_fresh_search(seed, classes, density):
    rng = np.random.default_rng(seed)
    r, edges = random_report(rng, classes, density)
    tiles = np.arange(r.num_tiles)[::-1]          # any order of tiles
    tc = TileCliques(r, tiles)
    for k in range(3):
        size = r.size * rng.integers(0, 3, r.num_vars) if k else r.size
        allocated = r.allocated & (rng.random(r.num_vars) > 0.25 * k)
        got = tc.max_live(size, allocated).tolist()
        assert got == [brute_force(r, size, allocated, t, edges) for t in tiles.tolist()]
        assert got == fresh(r, size, allocated, tiles)


def test_a_tile_not_chordal_is_searched_at_each_weighting():
    rng = np.random.default_rng(1)
    cycle = {(0, 1), (1, 2), (2, 3), (0, 3)}                # a chordless 4-cycle
    r = Report.from_columns(
        target=MK1.with_tiles(1), var_id=range(4), tile=[0] * 4, size=[8, 4, 16, 2],
        alignment=[4] * 4, offset=[0] * 4, category=["variable"] * 4, eq_class=range(4),
        interference=[[1, 3], [0, 2], [1, 3], [0, 2]])
    tc = TileCliques(r, [0])
    assert not tc.chordal[0]
    for size in (r.size, np.array([1, 30, 2, 40]), rng.integers(0, 9, 4)):
        assert tc.max_live(size).tolist() == [brute_force(r, size, r.allocated, 0, cycle)]


@pytest.mark.parametrize("model,splits,steps", [
    ("cnn", None, True), ("cnn", (11,), True), ("transformer", None, False),
    ("transformer", (1,), True)])
def test_generated_reports_equal_a_fresh_search(model, splits, steps):
    """One IPU (an interval class graph) and pipelined (the report's class graph is not
    chordal), with and without class steps: every tile, sizes re-drawn and rows offloaded."""
    r = generate_report("mk1", tiles=12, steps=200 if model == "cnn" else 500, seed=3,
                        model=model, splits=splits, pressure=1.2)
    if not steps:
        r = replace(r, class_steps=None, _cache={})
    rng = np.random.default_rng(0)
    tiles = r.tiles_in_use()
    tc = TileCliques(r, tiles)
    for k in range(3):
        size = (r.size * rng.uniform(0, 2, r.num_vars)).astype(np.int64) if k else r.size
        allocated = r.allocated & (rng.random(r.num_vars) > 0.2 * k)
        assert tc.max_live(size, allocated).tolist() == fresh(r, size, allocated, tiles)


def test_a_search_stopped_by_its_budget_counts_its_upper_bound_and_is_not_asked_twice(
        monkeypatch):
    """A tile whose search ran out of time counts the search's proven upper bound (an
    estimate read as "fits" is then never under for lack of time); the same weights asked
    again are answered without a search."""
    from tilemem.liveness import graphalg
    import importlib

    rw = importlib.import_module("tilemem.liveness.reweight")
    r = Report.from_columns(
        target=MK1.with_tiles(1), var_id=range(4), tile=[0] * 4, size=[8, 4, 16, 2],
        alignment=[4] * 4, offset=[0] * 4, category=["variable"] * 4, eq_class=range(4),
        interference=[[1, 3], [0, 2], [1, 3], [0, 2]])      # a chordless 4-cycle
    cycle = {(0, 1), (1, 2), (2, 3), (0, 3)}
    truth = brute_force(r, r.size, r.allocated, 0, cycle)
    calls = []

    def stopped(ip, ix, w, **kw):   # what a search stopped early returns: a clique, a bound
        calls.append(1)
        return graphalg.Clique(int(w.max()), np.zeros(0, np.int64), int(w.sum()), False,
                               "greedy")
    monkeypatch.setattr(rw, "max_weight_clique", stopped)
    tc = TileCliques(r, [0])
    first = tc.max_live(r.size).tolist()
    assert first == [int(r.size.sum())] and first[0] >= truth and len(calls) == 1
    assert tc.max_live(r.size).tolist() == first and len(calls) == 1
    tc.max_live(r.size * 2)
    assert len(calls) == 2
