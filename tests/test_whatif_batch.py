"""A micro-batch's estimate by the linear tile mapping's rule (``tilemem.figures.whatif.batch.
micro_batch_sizes``, ``tilemem.figures.whatif.spread``), against cases computed by hand from
003's rule, and against the generator's programs compiled at the other micro-batch."""
from __future__ import annotations

import numpy as np
import pytest

from tilemem.figures.whatif.batch import micro_batch_sizes
from tilemem.figures.whatif.edits import apply_edits, parse_edits
from tilemem.figures.whatif.spread import spread_report, spread_rows
from tilemem.model import Report
from tilemem.model.target import MK1


def _report(tiles, sizes, names, T=8):
    """The tensors of ``names`` (one class a tensor, live over part of the program: per
    sample) and a weight ``w`` of 4 bytes on tile 0, live throughout (persistent), last."""
    k = len(tiles)
    tensors = sorted({n.split("#")[0] for n in names})
    cls = [tensors.index(n.split("#")[0]) for n in names] + [len(tensors)]
    m = len(tensors) + 1
    return Report.from_columns(
        target=MK1.with_tiles(T, tiles_per_ipu=T), var_id=range(k + 1), tile=list(tiles) + [0],
        size=list(sizes) + [4], alignment=[4] * (k + 1), offset=[0] * (k + 1),
        category=["variable"] * (k + 1), eq_class=cls,
        interference=[[j for j in range(m) if j != i] for i in range(m)],
        names=list(names) + ["w#0"],
        class_steps=np.array([[2 + i, 10 + i] for i in range(len(tensors))] + [[0, 20]]))


def test_a_halved_tensor_at_its_minimum_keeps_its_bytes_a_tile_on_fewer_tiles():
    # 4 tiles of 8, from tile 4 ascending (the remainder, 40, on the last, tile 7):
    # 232 bytes -> 116: at its minimum (64 a tile) 64 on tile 4 and 52 on tile 5; planned onto
    # its four tiles, half of each: 32, 32, 32, 20. The larger of the two on each.
    r = _report([4, 5, 6, 7], [64, 64, 64, 40], ["a#4", "a#5", "a#6", "a#7"])
    assert micro_batch_sizes(r, r.size, np.arange(4), 0.5).tolist() == [64, 52, 32, 20]


def test_a_descending_tensor_keeps_its_first_tiles_from_the_top():
    # the remainder (16) at the run's start, tile 1: mapped descending from tile 3
    r = _report([1, 2, 3], [16, 64, 64], ["a#1", "a#2", "a#3"])
    # 144 -> 72: 64 on tile 3, 8 on tile 2, none on tile 1 (halves: 8, 32, 32)
    assert micro_batch_sizes(r, r.size, np.arange(3), 0.5).tolist() == [8, 32, 64]


def test_a_tensor_on_every_tile_is_spread_by_the_tiles():
    r = _report(list(range(4)), [40, 40, 40, 40], [f"a#{t}" for t in range(4)], T=4)
    assert micro_batch_sizes(r, r.size, np.arange(4), 0.5).tolist() == [20] * 4


def test_a_doubled_tensor_at_its_minimum_spreads_onto_more_tiles():
    # a run wrapping round, tiles 6, 7, 0 (8 tiles), 48 a tile, the remainder 16 on tile 0:
    # 112 bytes -> 224 at twice the micro-batch: 48 a tile on tiles 6, 7, 0, 1, and 32 on tile
    # 2; the report's own rows scale (the other reading), the new tiles hold their parts
    r = _report([6, 7, 0], [48, 48, 16], ["a#6", "a#7", "a#0"])
    s = spread_report(r, 2.0)
    assert spread_rows(s) == 4
    assert sorted(zip(s.tile[4:].tolist(), s.size[4:].tolist())) == [(1, 48), (2, 32)]
    assert set(s.eq_class[4:].tolist()) == {0}
    changed, _ = apply_edits(r, parse_edits(micro_batch=2.0))
    a = np.flatnonzero(changed.eq_class == 0)
    got = dict(zip(changed.tile[a].tolist(), changed.size[a].tolist()))
    assert got == {6: 96, 7: 96, 0: 32, 1: 48, 2: 32}
    assert changed.size[3] == 4   # the weight: not per sample
    # only the tiles asked
    assert sorted(spread_report(r, 2.0, tiles=[2, 5]).tile[4:].tolist()) == [2]


def test_past_every_tile_a_doubled_tensor_takes_more_on_each():
    # 4 tiles, the tensor on 3 of them at 40: 120 -> 480 needs 120 a tile on all 4
    r = _report([0, 1, 2], [40, 40, 40], ["a#0", "a#1", "a#2"], T=4)
    s = spread_report(r, 4.0)
    assert s.tile[4:].tolist() == [3] and s.size[4:].tolist() == [120]


@pytest.mark.parametrize("model", ["transformer", "cnn"])
def test_the_estimate_is_not_under_the_compiled_program(model):
    """Four BERT-Base layers and ResNet-50 (``benchmarks/levers.py``'s shapes) at micro-batch
    8 on 64 tiles and the same program compiled at 4 and 16 (the generator draws the same
    program at any size): on every tile, the estimate of the other micro-batch is at least the
    compiled bytes less ``rules.LEVER_ERRORS["micro-batch"]`` (measured on other seeds)."""
    from tilemem.generate import generate_report
    from tilemem.generate.cnnshape import CnnShape
    from tilemem.generate.transformershape import Shape
    from tilemem.liveness import max_live_all
    from tilemem.rules import LEVER_ERRORS

    def shape(b):
        if model == "cnn":
            return CnnShape.parse("resnet50", image=224, micro_batch=b)
        return Shape(layers=4, hidden=768, heads=12, seq_len=128, vocab=30522, micro_batch=b)

    def bound(r):
        tiles = r.tiles_in_use()
        out = np.zeros(r.num_tiles, np.int64)
        out[tiles] = [m.max_live_bytes for m in max_live_all(r, tiles)]
        return out

    reports = {b: generate_report("mk1", tiles=64, seed=7, model=model, shape=shape(b))
               for b in (4, 8, 16)}
    margin = LEVER_ERRORS["micro-batch"][0]
    for b, f in ((4, 0.5), (16, 2.0)):
        changed, _ = apply_edits(reports[8], parse_edits(micro_batch=f))
        est, act = bound(changed)[:64], bound(reports[b])
        assert (est >= np.floor(act * (1 - margin))).all(), (b, est - act)
