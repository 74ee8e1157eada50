"""``balanced_cuts``: the split of a program's units into stages whose largest proxy is
smallest, checked against brute force on small programs, and on the cut grid of a program
of thousands of units (``cut_grid``) within one grid step of it."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tilemem.figures.split.cuts import balanced_cuts, source_cuts
from tilemem.figures.split.cross import CUT_GRID, cut_grid


class Units:
    """A stand-in for ``SplitModel``: a stage's proxy is the sum of its units' weights."""

    def __init__(self, w):
        self.w = np.asarray(w, np.float64)
        self.L = len(self.w)
        self.c = np.concatenate([[0.0], np.cumsum(self.w)])

    def proxy(self, s, i, j, n):
        return float(self.c[j] - self.c[i])


def heaviest(m, cuts):
    b = [0] + list(cuts) + [m.L]
    return max(m.proxy(s, b[s], b[s + 1], len(b) - 1) for s in range(len(b) - 1))


def best_by_brute_force(m, n):
    return min(heaviest(m, c) for c in itertools.combinations(range(1, m.L), n - 1))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 50), min_size=2, max_size=9), st.integers(2, 4))
def test_small_programs_get_the_best_split(w, n):
    m = Units(w)
    n = min(n, m.L)
    cuts = balanced_cuts(m, n)
    assert len(cuts) == n - 1 and cuts == sorted(set(cuts)) and 0 < cuts[0] and cuts[-1] < m.L
    assert heaviest(m, cuts) == pytest.approx(best_by_brute_force(m, n), rel=1e-6)


def test_the_grid_is_every_unit_up_to_its_size_then_evenly_spaced():
    assert cut_grid(5).tolist() == [0, 1, 2, 3, 4, 5]
    g = cut_grid(10 * CUT_GRID)
    assert len(g) == CUT_GRID + 1 and g[0] == 0 and g[-1] == 10 * CUT_GRID
    assert set(np.diff(g).tolist()) == {10}
    assert len(cut_grid(1000, n=300)) == 301   # never fewer boundaries than stages


@pytest.mark.parametrize("n", [2, 4, 16])
def test_a_program_of_thousands_of_units_is_cut_on_the_grid_within_a_step(n):
    rng = np.random.default_rng(n)
    m = Units(rng.integers(1, 100, 3000))
    cuts = balanced_cuts(m, n)
    assert set(cuts) <= set(cut_grid(m.L, n).tolist())
    # the best split on every unit is within the heaviest unit of the total over n; the
    # grid's is within the heaviest grid step of that (each cut moved to a boundary)
    g = cut_grid(m.L, n)
    step = max(m.proxy(0, a, b, n) for a, b in zip(g[:-1], g[1:]))
    assert heaviest(m, cuts) <= m.c[-1] / n + m.w.max() + step + 1e-6


@pytest.mark.parametrize("stash", ["activations", "inputs"])
def test_a_stages_stash_bytes_are_its_rows_bytes(stash):
    # kept per tile for every (start, handover) a split asks for, made a handover at a time:
    # the same as the rows the stage stashes, counted tile by tile
    from tilemem.rules import inferred_stash_depth
    from tilemem.figures.split.estimate import SplitModel
    from tilemem.generate import generate_report

    for kw in (dict(model="transformer", ipus=2, steps=200), dict(model="cnn", steps=200)):
        m = SplitModel(generate_report("mk1", tiles=8, seed=3, **kw), stash, "like")
        r = m.r
        for j in range(1, m.L + 1):
            for i in range(j):
                rows = m.stash_rows(i, j)
                want = np.bincount(r.tile[rows], r.size[rows], minlength=m.tiles)
                depth = inferred_stash_depth(0, 3)
                assert np.array_equal(m.stash_tiles(0, i, j, 3), depth * want), (kw, i, j)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 50), min_size=3, max_size=9), st.integers(2, 5), st.data())
def test_boundaries_that_must_stay_cuts_do_and_the_rest_is_the_best_split(w, n, data):
    # a report compiled over several IPUs: its boundaries stay cuts (no stage joins two
    # IPUs' classes); the others as good as brute force finds among the splits keeping them
    m = Units(w)
    n = min(n, m.L)
    fixed = sorted(data.draw(st.sets(st.integers(1, m.L - 1), min_size=1, max_size=n - 1)))
    cuts = balanced_cuts(m, n, fixed)
    assert len(cuts) == n - 1 and cuts == sorted(set(cuts)) and set(fixed) <= set(cuts)
    best = min(heaviest(m, c) for c in itertools.combinations(range(1, m.L), n - 1)
               if set(fixed) <= set(c))
    assert heaviest(m, cuts) == pytest.approx(best, rel=1e-6)


def test_config_keeps_a_pipelined_reports_own_boundaries():
    # classes of two IPUs share no tile in the report, so it keeps no interference between
    # them (rules.INFERRED_INTERFERENCE_WITHIN_TILE): a stage joining layers of both was
    # estimated as if they never lived together, under the program compiled so
    import tilemem
    from tilemem.figures.config.units import config_units
    from tilemem.generate import generate_report

    r = generate_report("mk1", tiles=8, steps=600, seed=5, model="transformer",
                        pressure=1.8, splits=(2,), stash_mapping="like")
    cu = config_units(r)
    assert source_cuts(cu.m) == [cu.lead + 2]   # layer 2's unit (after the embedding's)
    for n in (2, 3, 4):
        assert source_cuts(cu.m)[0] in balanced_cuts(cu.m, n, source_cuts(cu.m))
    got = tilemem.configure(r, tilemem.ConfigQuery(ipus=3, max_micro_batch=1)).answer
    assert got.ranked
    for c in got.ranked + [x.configuration for x in got.near_misses if x.configuration]:
        assert 2 in c.split_indices   # layers: where each IPU's first layer is
