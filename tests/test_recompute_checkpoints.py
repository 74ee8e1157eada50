"""``what-if --recompute``'s checkpoints: the recomputation of a segment reads its checkpoint
again, so a checkpoint that the report lets die in the forward pass (a first layer's input,
a pipeline stage's input, when the layer's backward does not read it) lives to that read in
the estimate. Checked on a hand-built report (maximum live bytes computed by hand) and
against the program generated with recomputation (what it keeps live at the replay)."""
import numpy as np
import pytest

import tilemem

from tilemem.figures.whatif.edits import apply_recompute, lever_edits
from tilemem.generate import Levers, generate_report
from tilemem.liveness import max_live, max_live_all
from tilemem.model import Report


def steps_report(rows, tiles=None):
    """One class a row, ``(name, size, [start, end))``, on tile 0 (or ``tiles``); classes
    interfere where their steps meet."""
    names, size, steps = zip(*rows)
    steps = np.array(steps)
    n = len(rows)
    tiles = [0] * n if tiles is None else list(tiles)
    meet = [[j for j in range(n) if j != i and steps[i, 0] < steps[j, 1]
             and steps[j, 0] < steps[i, 1]] for i in range(n)]
    return Report.from_columns(
        var_id=range(n), tile=tiles, size=list(size), alignment=[4] * n, offset=[0] * n,
        category=["variable"] * n, eq_class=range(n), interference=meet,
        names=[f"{x}#{t}" for x, t in zip(names, tiles)], class_steps=steps)


def overlap(r, i, j) -> bool:
    """Whether rows ``i`` and ``j`` of ``r`` are live at once (their classes' steps meet)."""
    (a, b), (c, d) = r.class_steps[r.eq_class[[i, j]]].tolist()
    return a < d and c < b


def test_a_first_layers_input_lives_to_its_recomputation():
    # two layers; the input is read by layer0's forward only (an elementwise layer's
    # backward reads its output); layer0's output is read by layer1 and by layer0's
    # backward (step 9); layer1's output and the loss's gradient are read by layer1's
    # backward (step 7); the weights live throughout
    r = steps_report([
        ("layer0/weights", 32, [0, 12]),
        ("input", 100, [0, 2]),
        ("layer0/fwd/act", 64, [1, 10]),
        ("layer1/fwd/act", 64, [2, 8]),
        ("loss/gradient", 64, [3, 8]),
    ])
    # --recompute-at 0: one segment, layers 0-1, whose checkpoint is the input; it is
    # recomputed after the loss's backward, before layer1's backward (step 7) reads its
    # output: layer0's output again, from the input, which lives to then
    changed, _, rows = apply_recompute(r, lever_edits(recompute="0"))
    assert [changed.name(i) for i in rows.tolist()] == ["layer0/fwd/act#0"]
    inp, copy, gradient, l1_out = 1, r.num_vars, 4, 3
    assert overlap(changed, inp, copy) and overlap(changed, inp, gradient)
    assert overlap(changed, copy, gradient) and overlap(changed, copy, l1_out)
    # by hand: at the recomputation the weights (32), the input (100), the copy (64),
    # layer1's output and the gradient (64 each): 324; before it, at steps 3-6, 260; at
    # step 7 (no input) 224
    assert max_live(changed, 0).max_live_bytes == 324


def test_what_if_answers_a_tile_whose_only_change_is_a_checkpoints_lifetime():
    # tile 1 holds a part of the input and of the gradient only: recomputation copies
    # nothing there, but the input now lives to the recomputation, beside the gradient,
    # which takes the tile over tileMemory (262,144 B): it is in question after the change
    r = steps_report([
        ("layer0/weights", 32, [0, 12]),
        ("input", 100, [0, 2]),
        ("layer0/fwd/act", 150_000, [1, 10]),
        ("layer1/fwd/act", 150_000, [2, 8]),
        ("loss/gradient", 64, [3, 8]),
        ("input", 200_000, [0, 2]),
        ("loss/gradient", 100_000, [3, 8]),
    ], tiles=[0, 0, 0, 0, 0, 1, 1])
    assert max_live(r, 1).max_live_bytes == 200_000
    w = tilemem.what_if(r, levers=tilemem.Levers(recompute=(0,)), repack=False)
    assert max_live(w.report, 1).max_live_bytes == 300_000
    row = w.to_frame().set_index("tile").loc[1]
    assert row["max_live_bytes"] == 300_000


def test_the_recomputation_makes_its_last_layers_temporaries_again():
    # as above, with layer1's partial sums (step 2, read by its reduction) and a smaller
    # exchange buffer: the recomputation ends with layer1, whose largest temporary is live
    # again there, beside the input, layer0's recomputed output, layer1's output and the
    # gradient
    r = steps_report([
        ("layer0/weights", 32, [0, 12]),
        ("input", 100, [0, 2]),
        ("layer0/fwd/act", 64, [1, 10]),
        ("layer1/fwd/act", 64, [2, 8]),
        ("loss/gradient", 64, [3, 8]),
        ("layer1/fwd/partials", 50, [2, 3]),
        ("layer1/fwd/<message>", 20, [2, 3]),
    ])
    changed, applied, rows = apply_recompute(r, lever_edits(recompute="0"))
    assert sorted(changed.name(i) for i in rows.tolist()) == ["layer0/fwd/act#0",
                                                            "layer1/fwd/partials#0"]
    # what it says it recomputes: the activation, not the temporary made again beside it
    assert (applied[0].tensors, applied[0].variables, applied[0].bytes_before) == (1, 1, 64)
    again = r.num_vars + [changed.name(i) for i in rows.tolist()].index("layer1/fwd/partials#0")
    assert overlap(changed, again, 1) and not overlap(changed, again, 5)
    # by hand: at the recomputation 32 + 100 + 64 + 64 + 64 + 50 = 374; at step 2 the
    # weights, the input, layer0's forward copy, layer1's output and both temporaries: 330
    assert max_live(changed, 0).max_live_bytes == 374


def test_a_kept_checkpoint_read_by_the_next_backward_keeps_its_lifetime():
    # layer1's input is layer0's output, kept for layer0's backward; layer1 has weights,
    # so its backward reads its input (the weight gradient): nothing is recomputed and the
    # input keeps its lifetime
    r = steps_report([
        ("layer0/weights", 32, [0, 12]),
        ("layer1/weights", 32, [0, 12]),
        ("input", 40, [0, 11]),
        ("layer0/fwd/act", 64, [1, 10]),
        ("layer1/fwd/act", 64, [2, 8]),
        ("loss/gradient", 64, [3, 8]),
    ])
    changed, _, rows = apply_recompute(r, lever_edits(recompute="all"))
    assert len(rows) == 0 and changed.num_vars == r.num_vars
    assert changed.class_steps[changed.eq_class].tolist() == r.class_steps[r.eq_class].tolist()


def test_a_kept_checkpoint_the_next_backward_does_not_read_dies_at_the_recomputation():
    # the same without layer1's weights (an elementwise layer: its backward reads its
    # output, step 7): with every layer recomputed, layer1's checkpoint (layer0's output) is
    # read by layer1's recomputation just before step 7, then recomputed with layer0 just
    # before layer0's backward first reads it (step 9); not live at step 7
    r = steps_report([
        ("layer0/weights", 32, [0, 12]),
        ("input", 40, [0, 11]),
        ("layer0/fwd/act", 64, [1, 10]),
        ("layer1/fwd/act", 64, [2, 8]),
        ("loss/gradient", 64, [3, 8]),
        ("layer1/bwd/gradIn", 64, [7, 10]),
    ])
    changed, _, rows = apply_recompute(r, lever_edits(recompute="all"))
    assert [changed.name(i) for i in rows.tolist()] == ["layer0/fwd/act#0"]
    act, copy, l1_out, gradient, grad_in = 2, r.num_vars, 3, 4, 5
    assert overlap(changed, act, l1_out) and overlap(changed, act, gradient)
    assert not overlap(changed, act, grad_in)    # layer1's backward: neither is live
    assert not overlap(changed, copy, l1_out) and overlap(changed, copy, grad_in)
    # by hand, step 7: weights 32, input 40, layer1's output 64, the gradient 64 and
    # layer1's gradIn 64 = 264; at layer1's recomputation layer0's output instead of the
    # gradIn, 264; at layer0's, the weights, the input, the copy and the gradIn, 200 (with
    # layer0's output kept throughout: 328 at step 7)
    assert max_live(changed, 0).max_live_bytes == 264
    assert max_live(r, 0).max_live_bytes == 328


def elementwise_layer(base) -> int:
    """A layer past the first few whose forward is elementwise (its backward reads its
    output, not its input), from the generated names."""
    names = {base.name(i).split("#")[0] for i in range(base.num_vars)}
    return next(i for i in range(4, 200) if f"layer{i}/fwd/activations" in names)


@pytest.fixture(scope="module")
def pipelined():
    """A cnn over 2 IPUs whose second stage starts with an elementwise layer, generated
    without and with every layer recomputed."""
    kw = dict(tiles=12, steps=200, seed=3, model="cnn", pressure=1.2)
    split = elementwise_layer(generate_report("mk1", **kw))
    kw["splits"] = (split,)
    return (split, generate_report("mk1", **kw),
            generate_report("mk1", levers=Levers(recompute="all"), **kw))


def rows_named(r, prefix):
    return np.array([i for i in range(r.num_vars) if r.name(i).startswith(prefix)])


def test_a_stage_input_lives_to_its_stages_recomputation(pipelined):
    split, base, compiled = pipelined
    stage_input = "pipeline/fwd/stage0to1/out"
    grad_in = f"layer{split + 1}/bwd/gradIn"    # what the next layer's backward writes

    def meet(r, a, b):
        sa = r.class_steps[r.eq_class[rows_named(r, a)]]
        sb = r.class_steps[r.eq_class[rows_named(r, b)]]
        return bool((np.minimum(sa[:, None, 1], sb[None, :, 1])
                     > np.maximum(sa[:, None, 0], sb[None, :, 0])).any())

    # the compiled program: the stage's input is read by the stage's first layer's
    # recomputation, after the next layer's backward ...
    assert meet(compiled, stage_input, grad_in)
    # ... where the report without recomputation lets it die in the forward pass
    assert not meet(base, stage_input, grad_in)
    # the estimate keeps it to the recomputation too
    changed, _, _ = apply_recompute(base, lever_edits(recompute=True))
    assert meet(changed, stage_input, grad_in)


def test_the_pipelined_estimate_within_its_stated_error(pipelined):
    """Stated error: under by 1 % at most (the replay's own temporaries are not estimated:
    none at the peaks here), over by 8 % (a layer's output kept whole where the next layer
    reads it in its backward, a forward copy kept to the end of its layer's forward)."""
    _, base, compiled = pipelined
    changed, _, _ = apply_recompute(base, lever_edits(recompute=True))
    tiles = np.arange(base.num_tiles)
    est = np.array([m.max_live_bytes for m in max_live_all(changed, tiles)])
    act = np.array([m.max_live_bytes for m in max_live_all(compiled, tiles)])
    assert (est >= 0.99 * act).all() and (est <= 1.08 * act).all()


def test_over_several_ipus_the_new_classes_interfere_only_where_they_share_a_tile(
        pipelined, monkeypatch):
    """The recomputed report of a pipelined program keeps its new classes' interference to
    the pairs that share a tile (as the report keeps its own), and every tile's maximum live
    bytes are those of the relation in full."""
    from tilemem.figures.whatif import recompute

    _, base, _ = pipelined
    pruned = recompute._recomputation(base, "all").report
    monkeypatch.setattr(recompute, "prunes", lambda target: False)
    full = recompute._recomputation(base, "all").report
    assert pruned.interference_dropped == -1 and full.interference_dropped is None
    assert len(pruned.interference.indices) < len(full.interference.indices)
    tiles = full.tiles_in_use()
    assert ([m.max_live_bytes for m in max_live_all(pruned, tiles)]
            == [m.max_live_bytes for m in max_live_all(full, tiles)])


def test_the_pods_bounds_go_ipu_by_ipu_and_equal_the_whole_changed_reports(pipelined):
    """oom's next steps and plan (``WhatIfBounds``) take a recomputation IPU by IPU on a
    report ordered by tile (each IPU's changed part, never the Pod's): every tile's bound
    is ``max_live_all`` on the whole changed report, alone and with another lever."""
    from tilemem.figures.whatif.edits import RECOMPUTE, apply_edits, recompute_of
    from tilemem.figures.whatif.bounds import WhatIfBounds
    from tilemem.model.ipuview import order_by_tile, tile_ordered

    _, base, _ = pipelined
    r = order_by_tile(base)
    assert tile_ordered(r) and r.target.num_ipus == 2
    tiles = r.tiles_in_use()
    bounds = WhatIfBounds(r, tiles)
    for edits in (lever_edits(recompute=True),
                  lever_edits(recompute=True, half_momentum=True)):
        got, applied = bounds.of_edits(edits)
        changed, _ = apply_edits(r, edits)
        whole, _, _ = apply_recompute(changed, edits, base=r)
        assert got.tolist() == [m.max_live_bytes for m in max_live_all(whole, tiles)]
        e = next(x for x in edits if x.kind == RECOMPUTE)
        rc = recompute_of(r, e)
        assert applied[-1].variables == len(rc.rows) - rc.temporaries > 0
    # each IPU's part holds its own rows and their copies only
    parts = bounds._recomputed_parts(e.pattern, recompute_of(r, e))
    assert len(parts) == 2
    for pos, lo, part, _ in parts:
        assert (r.target.ipu_of(tiles[pos]) == r.target.ipu_of(part.base.tile)[0]).all()
        assert part.report.num_vars == part.base.num_vars + len(part.rows) < r.num_vars
