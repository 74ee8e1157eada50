"""oom's "split over N IPUs" next step under both readings of the stash: what a pipelined
stage keeps for the micro-batches in flight (its input, the backward recomputing, or its
activations) is the pipelined compilation's option, which a one-IPU report cannot tell. The
step's split must fit under both (by split's own estimate and by the program generated with
those splits), names the heavier reading in its command, and says which it assumed."""
from dataclasses import replace

import numpy as np

from tilemem.figures.program import split_step
from tilemem.figures.split.estimate import SplitModel
from tilemem.figures.split.search import answer
from tilemem.generate import generate_report
from tilemem.liveness import max_live_all


def step_of(r):
    bound = np.array([x.max_live_bytes for x in max_live_all(r)])
    tiles = np.flatnonzero(bound > r.target.tile_memory)
    rows = np.concatenate([r.tile_rows(t) for t in tiles])
    return split_step(r, tiles, rows)


def cuts_of(m, step):
    at = step.action.split(" at ", 1)[1].split(" (", 1)[0].split(", ")
    return [m.units.labels.index(u) for u in at]


def fits_generated(kw, cuts) -> bool:
    """The program generated with those splits fits, its stash mapped either way (like the
    tensors it keeps or linearly over the IPU: the report cannot tell which)."""
    for mapping in ("like", "linear"):
        p = generate_report("mk2", splits=tuple(cuts), stash_mapping=mapping, **kw)
        if max(x.max_live_bytes for x in max_live_all(p)) > p.target.tile_memory:
            return False
    return True


def test_transformer_step_fits_both_readings():
    kw = dict(tiles=64, steps=1000, seed=1, pressure=1.2, model="transformer")
    r = generate_report("mk2", **kw)
    step = step_of(r)
    assert "the report cannot tell which" in step.action
    m = SplitModel(r)
    cuts = cuts_of(m, step)
    n = len(cuts) + 1
    # the stage stashing its activations needs one IPU more here than stashing its input
    assert step.command == f"split --ipus {n} --stash activations" and n == 4
    for stash in ("inputs", "activations"):
        assert answer(SplitModel(r, stash), n, cuts, "").fits
    assert fits_generated(kw, cuts)        # the family stashes its activations


def test_without_steps_the_stash_is_the_stage_input():
    r = generate_report("mk2", tiles=64, steps=1000, seed=2, pressure=1.2, model="transformer")
    step = step_of(replace(r, class_steps=None, _cache={}))
    assert "no class steps" in step.action and "--stash" not in step.command


def test_only_recomputation_fits_is_said():
    kw = dict(tiles=64, steps=300, seed=5, pressure=1.6, model="cnn")
    r = generate_report("mk2", **kw)
    step = step_of(r)
    assert "only if the backward recomputes" in step.action
    assert "--stash" not in step.command
    cuts = cuts_of(SplitModel(r), step)
    assert answer(SplitModel(r), len(cuts) + 1, cuts, "").fits
    assert fits_generated(kw, cuts)        # the cnn family stashes its stage inputs
