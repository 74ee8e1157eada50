"""Interference kept to the pairs of classes that share a tile (reports over several IPUs):
the pruning itself against brute force, and every consumer's answers the same on a pruned and
an unpruned reading of one multi-IPU report."""
from dataclasses import replace
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilemem.check import check_allocation
from tilemem.generate import generate_report
from tilemem.load import load_report, save_report
from tilemem.model import Csr, Report, symmetric_closure
from tilemem.model.interference import SharedTiles, prune_csr, pruned, tile_interference
from tilemem.model.target import MK1


def brute_force(tile, cls, allocated, inter: Csr):
    tiles_of = {}
    for t, c, a in zip(tile.tolist(), cls.tolist(), allocated.tolist()):
        if a:
            tiles_of.setdefault(c, set()).add(t)
    return [[b for b in inter.row(a).tolist() if tiles_of.get(a, set()) & tiles_of.get(b, set())]
            for a in range(inter.num_rows)]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_prune_keeps_exactly_the_pairs_that_share_a_tile(data):
    n_cls = data.draw(st.integers(1, 12))
    n_tiles = data.draw(st.integers(1, 200))   # ranges wider than a 64-bit word
    n = data.draw(st.integers(0, 40))
    tile = np.array(data.draw(st.lists(st.integers(0, n_tiles - 1), min_size=n, max_size=n)),
                    np.int64)
    cls = np.array(data.draw(st.lists(st.integers(0, n_cls - 1), min_size=n, max_size=n)),
                   np.int64)
    allocated = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    lists = data.draw(st.lists(st.lists(st.integers(0, n_cls - 1), max_size=n_cls),
                               min_size=n_cls, max_size=n_cls))
    inter = Csr.from_lists(lists)
    got, dropped = prune_csr(inter, tile, cls, allocated)
    want = brute_force(tile, cls, allocated, inter)
    assert got.to_lists() == want
    assert dropped == inter.nnz - sum(map(len, want))


def test_hand_computed_mask():
    # classes 0 and 1 share tile 0; 1 and 2 share tile 70 (second word); 0 and 2 share none;
    # class 3 has only an unallocated variable
    tile = np.array([0, 0, 70, 70, 5, 9])
    cls = np.array([0, 1, 1, 2, 0, 3])
    shares = SharedTiles.of(tile, cls, np.array([1, 1, 1, 1, 1, 0], bool), 4)
    src = np.array([0, 1, 0, 2, 3, 0])
    dst = np.array([1, 2, 2, 0, 0, 0])
    assert shares.mask(src, dst).tolist() == [True, True, False, False, False, True]


@lru_cache(maxsize=None)
def reports():
    """A generated 3-IPU report (pruned by the generator) and an unpruned reading of it: the
    pairs of classes whose steps overlap (hulls) and that share no tile added back, as the
    all-pairs relation of a pipelined program has them."""
    r = generate_report("mk1", tiles=8, steps=240, ipus=3, seed=5)
    assert r.interference_dropped == -1   # pruned IPU by IPU
    s = r.class_steps
    k = r.num_classes
    a, b = np.triu_indices(k, 1)
    meet = (s[a, 0] < s[b, 1]) & (s[b, 0] < s[a, 1])
    a, b = a[meet], b[meet]
    far = ~SharedTiles.of(r.tile, r.eq_class, r.allocated, k).mask(a, b)
    src = np.concatenate([r.interference.row_ids(), a[far]])
    dst = np.concatenate([r.interference.indices, b[far]])
    full = replace(r, interference=symmetric_closure(k, src, dst), interference_dropped=None,
                   _cache={})
    assert full.interference.nnz > 1.5 * r.interference.nnz   # many pairs are across IPUs
    return r, full


def test_unpruned_reading_prunes_to_the_generated_relation():
    r, full = reports()
    assert tile_interference(full) == r.interference
    p = pruned(full)
    assert p.interference == r.interference
    assert p.interference_dropped == full.interference.nnz - r.interference.nnz


def test_json_and_capnp_readers_prune_and_say_how_much(tmp_path):
    r, full = reports()
    save_report(full, tmp_path / "full.json")     # JSON as written: every pair
    got = load_report(tmp_path / "full.json")
    assert got.interference == r.interference
    assert got.interference_dropped == full.interference.nnz - r.interference.nnz
    save_report(got, tmp_path / "p.capnp")
    back = load_report(tmp_path / "p.capnp")
    assert back.interference == r.interference
    assert back.interference_dropped == got.interference_dropped
    from tilemem.load import stream

    stream.convert_json_to_capnp(tmp_path / "full.json", tmp_path / "s.capnp")
    conv = load_report(tmp_path / "s.capnp")
    assert conv.interference == r.interference
    assert conv.interference_dropped == got.interference_dropped


def test_one_ipu_is_not_pruned(tmp_path):
    one = Report.from_columns(target=MK1.with_tiles(2), var_id=[0, 1], tile=[0, 1],
                              size=[8, 8], alignment=[4, 4], offset=[0, 0],
                              category=["variable"] * 2, eq_class=[0, 1],
                              interference=[[1], [0]])
    save_report(one, tmp_path / "one.json")
    back = load_report(tmp_path / "one.json")
    assert back.interference.to_lists() == [[1], [0]] and back.interference_dropped is None
    assert tile_interference(one) is one.interference


def test_liveness_is_the_same_pruned_or_not():
    from tilemem.liveness import class_intervals, max_live_all, timeline

    r, full = reports()
    tiles = np.arange(r.num_tiles)
    a = [m.max_live_bytes for m in max_live_all(r, tiles)]
    b = [m.max_live_bytes for m in max_live_all(full, tiles)]
    assert a == b and max(a) > 0
    ia, ib = class_intervals(r), class_intervals(full)
    assert (ia is None and ib is None) or np.array_equal(ia, ib)
    stepless_r = replace(r, class_steps=None, _cache={})
    stepless_full = replace(full, class_steps=None, _cache={})
    for t in (0, 9, 17):
        la, lb = timeline(stepless_r, t), timeline(stepless_full, t)
        assert (la is None and lb is None) or np.array_equal(la, lb)


def test_check_verdicts_are_the_same_pruned_or_not():
    r, full = reports()
    assert check_allocation(r).to_json() == check_allocation(full).to_json()
    # every variable at 0: the conflicts decide the violations
    zero = np.where(r.allocated, 0, r.offset)
    va, vb = check_allocation(r, zero), check_allocation(full, zero)
    assert not va.ok and va.num_violations > 0 and va.to_json() == vb.to_json()


def test_heuristic_alloc_is_the_same_pruned_or_not():
    import math

    from tilemem.api import Packing, allocate

    r, full = reports()
    once = Packing(method="heuristic", workers=1, deterministic=True, budget=math.inf)
    a = allocate(r, packing=once)
    b = allocate(full, packing=once)
    assert np.array_equal(a.offsets, b.offsets)
    assert check_allocation(r, a.offsets).num_violations == 0


@pytest.mark.parametrize("steps", [True, False])
def test_split_and_batch_are_the_same_pruned_or_not(steps):
    from tilemem.figures.whatif.batch import micro_batch_rows
    from tilemem.figures.split.estimate import SplitModel
    from tilemem.figures.split.search import best_split

    r, full = reports()
    if not steps:   # the readings of the graph alone (a class's degree)
        r = replace(r, class_steps=None, _cache={})
        full = replace(full, class_steps=None, _cache={})
    assert np.array_equal(micro_batch_rows(r), micro_batch_rows(full))
    # four stages of the report's three IPUs (whose boundaries every split keeps)
    sa, sb = best_split(SplitModel(r), 4), best_split(SplitModel(full), 4)
    assert [s.max_live_bytes for s in sa.stages] == [s.max_live_bytes for s in sb.stages]
    assert sa.split_points == sb.split_points


def test_info_says_what_was_kept(tmp_path):
    from tilemem.figures.summary import info

    r, full = reports()
    save_report(full, tmp_path / "full.json")
    d = info(load_report(tmp_path / "full.json"))
    assert d.interference_pruned.kept == r.interference.nnz
    assert d.interference_pruned.dropped == full.interference.nnz - r.interference.nnz
    assert info(r).interference_pruned.dropped is None   # never built
    save_report(r, tmp_path / "gen.capnp")    # as generate --ipus N writes it
    back = load_report(tmp_path / "gen.capnp")
    assert back.interference_dropped == -1 and back.interference == r.interference
