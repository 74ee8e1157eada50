"""``tilemem config`` with a stage that holds no layer: the part of the program before its first
layer (a language model's embedding) is a unit of its own (``tilemem.figures.config.units``),
so where the embedding weighs on the first IPU the search may put it alone there, as
published configurations do (``layers_per_ipu: [0, ...]``); compiled with the generator
(``generate --splits 0,...``) that configuration fits, and ``-o`` writes the 0."""
import json

import numpy as np
import pytest

import tilemem
from tilemem.cli import main
from tilemem.figures.config.answer import generator_options
from tilemem.figures.config.units import config_units
from tilemem.generate import Levers, generate_report
from tilemem.generate.transformershape import Shape
from tilemem.liveness import max_live_all
from tilemem.load import save_report

#: a small language model whose embedding (a vocabulary of 4000, hidden 128) weighs as much
#: as its layers, on 32 tiles: out of memory on one IPU
KW = dict(tiles=32, seed=1, model="transformer",
          shape=Shape(layers=4, hidden=128, heads=4, seq_len=64, vocab=4000, micro_batch=1))


def worst(r):
    return max(m.max_live_bytes for m in max_live_all(r, r.tiles_in_use()))


@pytest.fixture(scope="module")
def report():
    return generate_report("mk1", **KW)


def test_the_embedding_is_a_unit_before_the_layers(report):
    cu = config_units(report)
    assert cu.lead == 1 and cu.labels[0].startswith("embedding")
    assert cu.labels[1:] == ["layer0", "layer1", "layer2", "layer3"]
    assert [cu.layers(0, 1), cu.layers(0, 3), cu.layers(1, 5)] == [0, 2, 4]
    assert cu.to_layer(1) == 0


def test_on_three_ipus_the_embedding_alone_on_the_first_compiled_fits(report, tmp_path, capsys):
    tm = report.target.tile_memory
    assert worst(report) > tm
    c = tilemem.configure(report, tilemem.ConfigQuery(ipus=3, max_micro_batch=1))
    best = c.best
    assert best is not None and best.layers_per_ipu[0] == 0 and sum(best.layers_per_ipu) == 4
    assert best.split_indices[0] == 0
    opts = generator_options(best)
    compiled = generate_report("mk1", **KW, splits=opts["splits"], stash_mapping="like",
                               levers=Levers(**opts["levers"]))
    assert compiled.target.num_ipus == 3 and worst(compiled) <= tm
    # written as optimum-graphcore's layers_per_ipu, with its 0
    path = tmp_path / "r.capnp"
    save_report(report, path)
    out = tmp_path / "ipu_config.json"
    assert main(["config", str(path), "--ipus", "3", "--max-micro-batch", "1",
                 "-o", str(out)]) == 0
    capsys.readouterr()
    got = json.loads(out.read_text())
    assert got["layers_per_ipu"] == best.layers_per_ipu and got["ipus_per_replica"] == 3
