"""``tilemem config``'s check of every tile that could reach tileMemory (``StageBounds.verify``)
leaves out, as the search tiles' bounds do (``StageBounds.bound``), the levers that change
nothing on a stage: one that cannot be estimated there (recomputation on a stage whose kept
activations are of no numbered layer) made ``config`` fail with what-if's one-line error
instead of answering (ResNet-50 at 64 x 64 on 184 Mk2 tiles, its third stage of four)."""
import numpy as np
import pytest

from tilemem.figures.config.stages import Choice, Stages
from tilemem.figures.config.units import config_units
from tilemem.generate import generate_report
from tilemem.generate.archs import arch_shape


@pytest.fixture(scope="module")
def third_stage():
    r = generate_report("mk2", tiles=184, seed=1, model="cnn",
                        shape=arch_shape("resnet50", image=64))
    cu = config_units(r)
    # the split config chose on 4 IPUs; its third stage holds layers 63 .. 120 (made anew
    # each call: verify adds the tiles it finds to the stage's search tiles)
    return lambda: Stages(cu.m, cu.m.r, [24, 63, 121], 4, lead=cu.lead)[2]


def test_a_lever_that_changes_nothing_on_a_stage_is_left_out_of_its_check(third_stage):
    a, b = third_stage(), third_stage()
    assert a is not None and not a.useful("recompute")
    assert len(np.setdiff1d(a.check_tiles, a.tiles))   # verify has tiles to check
    limit = int(0.5 * a.report.target.tile_memory)
    with_it = Choice(recompute=True, checkpoint_every=2)
    got = a.verify(with_it, 0.6, 1, limit)   # raised ReportError before
    # the same tiles as without the lever, which changes nothing here
    want = b.verify(Choice(), 0.6, 1, limit)
    assert len(want) and np.array_equal(got, want)


def test_many_tiles_are_checked_a_batch_at_a_time_with_the_same_answer(third_stage, monkeypatch):
    """A stage with more tiles to check than ``VERIFY_KEPT`` takes them apart a batch at a
    time (a Pod stage's class graphs, kept all at once, took tens of GB): the same tiles."""
    from tilemem.figures.config import stages

    a = third_stage()
    limit = int(0.5 * a.report.target.tile_memory)
    want = a.verify(Choice(), 0.6, 1, limit)
    monkeypatch.setattr(stages, "VERIFY_KEPT", 3)
    b = third_stage()
    assert len(np.setdiff1d(b.check_tiles, b.tiles)) > 3
    got = b.verify(Choice(), 0.6, 1, limit)
    assert len(want) and np.array_equal(got, want)
    assert b._checks[1][1] is None   # nothing kept
