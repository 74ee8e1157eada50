"""A pipeline stage that recomputes stashes only its checkpoints (``Crossings.checkpoint_rows``):
``config`` estimates such a stage on its report with that stash, not every activation still
live at the handover. Checked against the generator's names (a layer's input is the previous
layer's residual output) and against the program compiled with recomputation."""
import numpy as np
import pytest

from tilemem.figures.config.margins import lever_margin, split_margin
from tilemem.figures.config.stages import Choice, Stages
from tilemem.figures.config.units import config_units
from tilemem.generate import Levers, generate_report
from tilemem.levers import DEFAULT_AMP
from tilemem.liveness import max_live_all
from tilemem.model.names import base_name

KW = dict(tiles=8, steps=600, seed=5, model="transformer", pressure=1.8, stash_mapping="like")


@pytest.fixture(scope="module")
def one_ipu():
    r = generate_report("mk1", **KW)
    return r, config_units(r)


def layer_input(k: int) -> str:
    """The generator's name for layer ``k``'s input (the residual stream)."""
    return "embedding/norm/Norm/out" if k == 0 else f"layer{k - 1}/mlp/residual/out"


@pytest.mark.parametrize("i,j,every", [(2, 5, 1), (2, 5, 2), (3, 5, 1), (2, 4, 2)])
def test_the_checkpoints_are_the_inputs_of_the_checkpointed_layers(one_ipu, i, j, every):
    r, cu = one_ipu
    rows = cu.m.checkpoint_rows(i, j, every, cu.lead)
    layers = range(i - cu.lead, j - cu.lead, every)
    assert {base_name(n) for n in r.names(rows)} == {layer_input(k) for k in layers}


def test_a_stage_with_the_embedding_keeps_what_the_embedding_keeps(one_ipu):
    r, cu = one_ipu
    assert cu.lead == 1
    got = {base_name(n) for n in r.names(cu.m.checkpoint_rows(0, 3, 1, cu.lead))}
    # the embedding is not recomputed: what its backward reads is kept (the generator's
    # stage_saved: the embedding's output and its norm's statistics), then layer 0's and
    # layer 1's inputs
    assert {"embedding/tokens/out", "embedding/norm/Norm/stats", layer_input(0),
            layer_input(1)} <= got
    assert not any(n.startswith("layer") and n != layer_input(1) for n in got)
    # fewer bytes than every activation still live at the handover
    m = cu.m
    assert r.size[m.checkpoint_rows(0, 3, 1, cu.lead)].sum() < r.size[m.stash_rows(0, 3)].sum()


def test_a_recomputing_stage_is_estimated_on_its_checkpoints_and_not_under_the_program():
    """Two stages, the first recomputing: its estimate is under the one that stashes every
    activation, and not under the program compiled so by more than its margin."""
    r = generate_report("mk1", **KW)
    cu = config_units(r)
    cut = cu.lead + 3                      # stage 0: the embedding and layers 0-2
    stages = Stages(cu.m, r, [cut], 2, lead=cu.lead)
    sb = stages[0]
    on = Choice(recompute=True)
    _, est = sb.worst(on, DEFAULT_AMP, 1)
    _, kept_all = sb.worst(Choice(), DEFAULT_AMP, 1)
    assert sb.under(on) is not sb and est < kept_all
    compiled = generate_report("mk1", **KW, splits=(3,), levers=Levers(recompute="all"))
    tpi = compiled.target.ipu_tiles
    first = np.arange(tpi)                 # IPU 0: stage 0's tiles
    first = first[np.isin(first, compiled.tiles_in_use())]
    actual = max(x.max_live_bytes for x in max_live_all(compiled, first))
    tm = r.target.tile_memory
    margin = split_margin(2) + lever_margin(["recompute"])
    assert est >= actual - margin * tm


def test_a_stash_made_again_takes_the_stages_names_and_they_are_the_same(one_ipu):
    r, cu = one_ipu
    m = cu.m
    base = m.stage_report(0, 0, 3, 2)
    kept = m.checkpoint_rows(0, 3, 1, cu.lead)
    taken = m.stage_report(0, 0, 3, 2, kept=kept, names_of=base)
    gathered = m.stage_report(0, 0, 3, 2, kept=kept)
    assert taken.names() == gathered.names() and taken.num_vars < base.num_vars
