"""``tilemem config``'s recomputation from a checkpoint every 2nd layer of a stage
(``recompute-at``) beside one at every layer: where only it fits, the search finds it, and the
program compiled with its checkpoints (the generator's ``Levers.recompute``) fits; ``-o``
writes the best configuration an ``IPUConfig`` can say, which has no key for it."""
import json

import numpy as np
import pytest

import tilemem
from tilemem.cli import main
from tilemem.figures.config.answer import generator_options
from tilemem.figures.config.margins import Verdict
from tilemem.figures.config.stages import Choice, layer_numbers
from tilemem.generate import Levers, generate_report
from tilemem.liveness import max_live_all
from tilemem.load import save_report

#: a cnn a checkpoint at every layer's input does not bring under tileMemory by the margin
KW = dict(tiles=16, steps=400, seed=1, model="cnn", pressure=1.3)
#: recomputation alone, on one IPU
OTHERS = ("half-momentum", "half-partials", "rts", "rts-weights", "offload", "serialise", "amp")


def test_checkpoints_every_2nd_layer_of_a_stage():
    c = Choice(recompute=True, checkpoint_every=2)
    assert c.names == ("recompute-at",)
    assert c.checkpoints([4, 5, 6, 7, 8]) == (4, 6, 8)
    assert Choice(recompute=True).checkpoints([4, 5]) == "all"
    assert c.without("recompute-at") == Choice() == Choice(recompute=True).without("recompute")
    assert layer_numbers(["layer3", "layer10"]) == [3, 10]
    assert layer_numbers(["layer3", "head"]) == []


@pytest.fixture(scope="module")
def found():
    r = generate_report("mk1", **KW)
    return r, tilemem.configure(r, tilemem.ConfigQuery(ipus=1, max_micro_batch=1,
                                                       avoid=OTHERS))


def test_where_only_checkpoints_at_some_layers_fit_the_search_finds_them(found):
    r, c = found
    tm = r.target.tile_memory
    best = c.best
    assert best is not None and best.levers == ["recompute-at"]
    assert best.checkpoints == list(range(0, best.layers_per_ipu[0], 2))
    # a checkpoint at every layer: not under tileMemory by its margin (the search's reason)
    every = tilemem.configure(r, tilemem.ConfigQuery(ipus=1, max_micro_batch=1,
                                                     avoid=OTHERS + ("recompute-at",)))
    assert every.best is None
    # compiled with those checkpoints, every tile fits (the liveness bound of the program)
    opts = generator_options(best)
    assert opts["levers"]["recompute"] == tuple(best.checkpoints)
    compiled = generate_report("mk1", **KW, levers=Levers(**opts["levers"]))
    assert max(m.max_live_bytes for m in max_live_all(compiled, compiled.tiles_in_use())) <= tm
    assert best.verdict == Verdict.FITS


def test_the_ipu_config_written_is_one_it_can_say(found, tmp_path, capsys):
    r, c = found
    assert c.best_in_ipu_config is None   # the only configuration that fits needs recompute-at
    path = tmp_path / "r.capnp"
    save_report(r, path)
    out = tmp_path / "ipu_config.json"
    assert main(["config", str(path), "--ipus", "1", "--max-micro-batch", "1",
                 "--avoid", ",".join(OTHERS), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert not out.exists() and "checkpoints at some layers only" in text
    assert "recomputationCheckpoint at the input of layers 0, 2" in text
    # allowed every lever: a configuration an IPUConfig can say is written
    assert main(["config", str(path), "--ipus", "1", "--max-micro-batch", "1",
                 "-o", str(out)]) == 0
    capsys.readouterr()
    got = json.loads(out.read_text())
    assert got["ipus_per_replica"] == 1 and got["layers_per_ipu"] == [44]
