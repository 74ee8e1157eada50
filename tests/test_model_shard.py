"""A report kept to one IPU's tiles (tilemem.model.shard) answers every per-tile question of
those tiles as the whole report does. Independent expectations: the whole report's own
answers (its rows, names, constraints, conflicts, bounds, a deterministic packing of each
tile) and a hand-made case."""
from dataclasses import replace

import numpy as np
import pytest

from tilemem.generate import generate_report
from tilemem.model import MK1, Report
from tilemem.model.shard import ipu_shard, ipu_tiles, report_nbytes, restrict


@pytest.fixture(scope="module")
def two_ipus():
    return replace(generate_report("mk1", tiles=6, steps=60, seed=3, ipus=2), class_steps=None)


def test_a_shard_holds_its_tiles_rows_and_nothing_else(two_ipus):
    r = two_ipus
    for ipu in (0, 1):
        s = ipu_shard(r, ipu)
        tiles = ipu_tiles(r, ipu)
        assert s.tiles_in_use().tolist() == tiles.tolist()
        assert s.num_vars == sum(len(r.tile_rows(t)) for t in tiles) < r.num_vars
        assert report_nbytes(s) < report_nbytes(r)
        for t in tiles.tolist():
            whole, part = r.tile_rows(t), s.tile_rows(t)
            for col in ("var_id", "size", "alignment", "offset", "always_live"):
                assert (getattr(s, col)[part] == getattr(r, col)[whole]).all(), col
            assert s.names(part) == r.names(whole)
            # classes renumbered by rank: same partition, same order
            a, b = r.eq_class[whole], s.eq_class[part]
            assert (np.argsort(a, kind="stable") == np.argsort(b, kind="stable")).all()
            assert (np.unique(a, return_inverse=True)[1] == np.unique(b, return_inverse=True)[1]).all()
            # the interference among this tile's classes, read back in the whole's ids
            back = dict(zip(b.tolist(), a.tolist()))
            for y, x in back.items():
                want = set(np.intersect1d(r.interference.row(x), a).tolist())
                got = {back[v] for v in s.interference.row(y).tolist() if v in back}
                assert got == want
            # the allocation order names the same variables
            assert (s.var_id[s.allocation_order.row(t)] == r.var_id[r.allocation_order.row(t)]).all()


def test_every_tile_packs_the_same_on_its_shard(two_ipus):
    """The bounds and a deterministic packing (heuristic, then the exact portfolio) of each
    tile: the same on the shard as on the whole report, offset for offset."""
    from tilemem.pack.bounds import TileBound
    from tilemem.pack.kinds import Pass
    from tilemem.pack.run.tasks import BoundsTask, TileTask, _bounds, _Shared, _solve
    from tilemem.rules import DEFAULT_RULES

    r = two_ipus
    whole = _Shared(r, DEFAULT_RULES)
    for ipu in (0, 1):
        part = _Shared(ipu_shard(r, ipu), DEFAULT_RULES)
        tiles = ipu_tiles(r, ipu).tolist()
        bounds = _bounds(whole, BoundsTask(tiles, 5.0), None)
        assert _bounds(part, BoundsTask(tiles, 5.0), None) == bounds
        for t in tiles:
            for how in (Pass.HEURISTIC, Pass.AUTO):
                task = TileTask(t, how, None, None, TileBound.of(bounds[t]), 0.2, 0,
                                deterministic=True)
                _, res_w, off_w = _solve(whole, task, None)
                _, res_p, off_p = _solve(part, task, None)
                assert (off_w == off_p).all()
                assert res_w.total_including_gaps == res_p.total_including_gaps


def test_restrict_by_hand():
    r = Report.from_columns(target=MK1.with_tiles(3), var_id=[10, 11, 12, 13],
                            tile=[2, 0, 2, 1], size=[8, 4, 4, 16], alignment=[4] * 4,
                            offset=[0, 0, 8, 0], category=["variable"] * 4,
                            eq_class=[3, 0, 1, 3], interference=[[3], [3], [], [0, 1]],
                            element_constraints=[[12], [], [10], []],
                            names=["a#2", "b", "c", "d"])
    s = restrict(r, [2])
    assert s.var_id.tolist() == [10, 12] and s.names() == ["a#2", "c"]
    assert s.eq_class.tolist() == [1, 0]          # classes 1 and 3, by rank
    assert s.interference.to_lists() == [[1], [0]]
    assert s.element_constraints.to_lists() == [[1], [0]]
    assert s.tiles_in_use().tolist() == [2] and s.num_tiles == 3
    assert restrict(r, [0, 1, 2]) is r            # every variable: nothing built


def test_rows_of_tiles_are_the_same_by_range_and_by_scan(two_ipus):
    """On a report ordered by (IPU, tile) (as generated) the rows come from each tile's
    range; the scan of the tile column (any row order) is called directly: both give the
    tiles' allocated rows, checked against a plain mask of the column."""
    from tilemem.model.ipuview import tile_ordered
    from tilemem.model.shard import _scanned_rows, rows_of_tiles

    assert tile_ordered(two_ipus)
    tiles = np.array([0, 3, 7, 11, 99, -1])   # 99 and -1 are no tiles of the report
    want = np.flatnonzero(np.isin(two_ipus.tile, tiles) & two_ipus.allocated)
    assert rows_of_tiles(two_ipus, tiles).tolist() == want.tolist()
    assert _scanned_rows(two_ipus, tiles).tolist() == want.tolist()
