"""``benchmarks/config.py``'s path from an answer to the program it compiles: the shape's
names, and a configuration written as ``ipu_config.json`` read back by the generator's
``--config`` reader, with what the file cannot say (the weights sharded, checkpoints at
chosen layers) added as the PopTorch options say it."""
import importlib.util
import pathlib
import sys

import pytest

from tilemem.figures.config.answer import Configuration
from tilemem.figures.config.margins import Verdict
from tilemem.generate import Levers

_path = pathlib.Path(__file__).parent.parent / "benchmarks" / "config.py"
_spec = importlib.util.spec_from_file_location("bench_config", _path)
bench = importlib.util.module_from_spec(_spec)
sys.modules["bench_config"] = bench   # its dataclasses look their module up
_spec.loader.exec_module(bench)


def test_shape_names():
    assert bench.parse_shape("bert-base").label == "bert-base@128"   # the former names
    assert bench.parse_shape("bert-large") == bench.Shape("bert-large", 128)
    assert bench.parse_shape("gpt2").seq_len == 1024
    assert bench.parse_shape("GPT2-medium@128").cli() == ["--arch", "gpt2-medium",
                                                          "--seq-len", "128"]
    assert bench.parse_shape("vit-base-16").image == 224
    assert bench.parse_shape("resnet50@64").cli() == ["--arch", "resnet50", "--image-size", "64"]
    with pytest.raises(ValueError, match="unknown shape"):
        bench.parse_shape("bert-huge")


def config(levers, **kw):
    base = dict(ipus=2, micro_batch=2, split_indices=[0], layers_per_ipu=[0, 12],
                levers=levers, amps=[0.3, 0.6], replicas=4, serialise=1,
                verdict=Verdict.FITS, margin=0.05, cost=1.0, balance=1.0, stages=[])
    base.update(kw)
    return Configuration(**base)


@pytest.mark.parametrize("levers, extra, want", [
    (["half-partials", "rts"], {}, Levers(amp=(0.3, 0.6), half_partials=True, replicas=4,
                                          rts=True)),
    (["rts-weights"], {}, Levers(amp=(0.3, 0.6), replicas=4, rts=True, rts_weights=True)),
    (["recompute-at", "offload"], {"checkpoints": [0, 2, 4], "replicas": 1},
     Levers(amp=(0.3, 0.6), recompute=(0, 2, 4), offload_state=True)),
])
def test_written_read_back_and_what_the_file_cannot_say(tmp_path, levers, extra, want):
    c = config(levers, **extra)
    path = str(tmp_path / "ipu_config.json")
    bench.write_ipu_config(c, path)
    got, splits, how = bench.levers_of(c, bench.parse_shape("bert-base"), path)
    assert (got, splits) == (want, (0,))
    assert how.startswith("ipu_config.json")
    assert ("+" in how) == bool(set(levers) & set(bench.UNSAID))
