"""Parts of the generator against hand-computed cases and brute force: the linear tile mapping
of 003, lifetimes along control flow, and the interference of segment lifetimes (whose
overlap relation is tested in test_model_overlap.py)."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tilemem.generate.lifetimes import Lifetimes, live_segments, merge
from tilemem.generate.mapping import linear_tile_mapping, map_tensors


# ---- calcLinearTileMapping ----------------------------------------------------------------
def test_mapping_hand_computed():
    # 10 elements, grain 2, at least 4 per tile, 8 tiles -> 4 per tile on 3 tiles (4, 4, 2)
    tiles, elems = linear_tile_mapping(8, 10, 4, 2)
    assert tiles.tolist() == [0, 1, 2] and elems.tolist() == [4, 4, 2]
    # many elements: ceil(grains / tiles) grains per tile -> 1000 floats on 8 tiles
    tiles, elems = linear_tile_mapping(8, 1000, 64, 2)
    assert tiles.tolist() == list(range(8)) and elems.tolist() == [126] * 7 + [118]


def test_mapping_offset_and_direction_as_in_003():
    # 003 (calcLinearTileMappingAndNewOffset): 8 tiles, a mapping over 4 tiles; offset 2 uses
    # tiles 2..5 (new offset 6); offset 6 wraps to 6, 7, 0, 1 (new offset 2)
    assert linear_tile_mapping(8, 16, 4, 1, offset=2)[0].tolist() == [2, 3, 4, 5]
    assert linear_tile_mapping(8, 16, 4, 1, offset=6)[0].tolist() == [6, 7, 0, 1]
    # descending: the first tile is numTiles - 1 - offset, then decreasing
    assert linear_tile_mapping(8, 16, 4, 1, offset=0, ascending=False)[0].tolist() == \
        [7, 6, 5, 4]
    assert linear_tile_mapping(8, 16, 4, 1, offset=6, ascending=False)[0].tolist() == \
        [1, 0, 7, 6]


@settings(max_examples=300, deadline=None)
@given(num_tiles=st.integers(1, 50), n=st.integers(0, 5000), min_e=st.integers(0, 400),
       grain=st.integers(1, 8), offset=st.integers(0, 100), asc=st.booleans())
def test_mapping_properties(num_tiles, n, min_e, grain, offset, asc):
    tiles, elems = linear_tile_mapping(num_tiles, n, min_e, grain, offset % num_tiles, asc)
    assert elems.sum() == n
    assert len(set(tiles.tolist())) == len(tiles) <= num_tiles
    assert np.all((tiles >= 0) & (tiles < num_tiles))
    if n == 0:
        return
    assert np.all(elems[:-1] % grain == 0)                 # whole grains ...
    assert np.all(elems[:-1] == elems[0]) and elems[-1] <= elems[0]  # ... evenly, rest last
    assert np.all(elems[:-1] >= min_e)                     # the minimum per tile
    if len(tiles) < num_tiles:                             # tiles left unused only if the
        assert elems[0] >= min_e or elems[0] >= n          # minimum forced it
    first = offset % num_tiles if asc else num_tiles - 1 - offset % num_tiles
    step = 1 if asc else -1
    assert tiles.tolist() == [(first + step * k) % num_tiles for k in range(len(tiles))]


def test_map_tensors_is_the_mapping_of_each_tensor():
    args = dict(n=[100, 0, 37, 5000], m=[16, 4, 1, 128], g=[4, 2, 2, 1], o=[3, 0, 7, 5],
                a=[True, False, False, True])
    owner, tiles, elems = map_tensors(8, args["n"], args["m"], args["g"], args["o"], args["a"])
    for i in range(4):
        t, e = linear_tile_mapping(8, args["n"][i], args["m"][i], args["g"][i], args["o"][i],
                                   args["a"][i])
        assert tiles[owner == i].tolist() == t.tolist()
        assert elems[owner == i].tolist() == e.tolist()


# ---- lifetimes ----------------------------------------------------------------------------
def test_live_segments_hand_computed():
    branch = [(10, 14, 14, 20)]          # If: then [10, 14), else [14, 20)
    assert live_segments(5, [8], [], branch) == [(5, 9)]
    assert live_segments(5, [12], [], branch) == [(5, 13)]           # used in then only
    assert live_segments(5, [16], [], branch) == [(5, 10), (14, 17)]  # else only: skips then
    assert live_segments(5, [12, 16], [], branch) == [(5, 13), (14, 17)]
    assert live_segments(5, [25], [], branch) == [(5, 26)]           # used after the If
    assert live_segments(11, [22], [], branch) == [(11, 14), (20, 23)]  # leaves then, skips else
    loop = [(3, 30)]
    assert live_segments(1, [16], loop, branch) == [(1, 30)]         # survives the iterations
    assert live_segments(12, [4], loop, branch) == [(3, 30)]         # loop-carried
    assert live_segments(7, [], loop, branch) == [(7, 8)]             # never read


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 10)), max_size=8))
def test_merge_is_the_union(segs):
    segs = [(a, a + d) for a, d in segs]
    merged = merge(segs)
    cover = {x for a, b in segs for x in range(a, b)}
    assert {x for a, b in merged for x in range(a, b)} == cover
    assert all(b < c for (_, b), (c, _) in zip(merged, merged[1:]))   # disjoint, not touching


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 8)), min_size=1,
                         max_size=3), min_size=1, max_size=25))
def test_interference_is_brute_force_step_sharing(lifetimes):
    lt = Lifetimes()
    classes = [lt.class_of(merge([(a, a + d) for a, d in segs])) for segs in lifetimes]
    steps = {c: {x for a, b in merge([(a, a + d) for a, d in segs]) for x in range(a, b)}
             for c, segs in zip(classes, lifetimes)}
    inter = lt.interference()
    for a in range(lt.num_classes):
        expect = sorted(b for b in range(lt.num_classes) if b != a and steps[a] & steps[b])
        assert inter.row(a).tolist() == expect
    hull = lt.hulls()
    for c, s in steps.items():
        assert hull[c].tolist() == [min(s), max(s) + 1]
