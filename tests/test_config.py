"""``tilemem config`` / ``tilemem.configure``: the configuration it answers for a generated report
that does not fit, compiled with the generator (its splits and levers), fits every tile by the
bound (the liveness analysis on the compiled program, an independent expectation); the
margins turn a *fits* within a lever's error into *close*; bad input is one line, exit 2."""
import json

import numpy as np
import pytest

import tilemem
from tilemem.cli import main
from tilemem.figures.config.answer import generator_options, ipu_config
from tilemem.figures.config.margins import Verdict, judge
from tilemem.generate import Levers, generate_report
from tilemem.liveness import max_live_all
from tilemem.load import save_report

KW = dict(tiles=16, steps=740, seed=1, model="transformer", pressure=1.6)
#: the drawn models have no micro-batch to compile: the search keeps the report's
QUERY = dict(max_ipus=3, max_micro_batch=1)


def worst(r):
    return max(m.max_live_bytes for m in max_live_all(r, r.tiles_in_use()))


@pytest.fixture(scope="module")
def answer():
    r = generate_report("mk1", **KW)
    return r, tilemem.configure(r, tilemem.ConfigQuery(**QUERY))


def compiled(c):
    opts = generator_options(c)
    # the stash mapped like the tensors it keeps, as the estimate reads it
    return generate_report("mk1", **{**KW, "splits": opts["splits"]}, stash_mapping="like",
                           levers=Levers(**opts["levers"]))


def test_the_answer_compiled_fits(answer):
    r, c = answer
    tm = r.target.tile_memory
    assert worst(r) > tm                     # the report does not fit as it is
    best = c.best
    assert best is not None and best.verdict == Verdict.FITS
    assert best.ipus == len(best.layers_per_ipu) and sum(best.layers_per_ipu) == c.answer.units
    assert worst(compiled(best)) <= tm
    # every stage's worst tile is under tileMemory by more than the margin, by the estimate
    for s in best.stages:
        assert s.max_live_bytes + best.margin * tm <= tm
        assert s.headroom_bytes == tm - s.max_live_bytes


def test_ranked_and_the_neighbour_with_fewer_ipus(answer):
    r, c = answer
    a = c.answer
    ipus = [x.ipus for x in a.ranked]
    assert ipus == sorted(ipus)              # the default objective: fewest IPUs first
    best = a.best
    for n in a.near_misses:
        assert n.verdict != Verdict.FITS and n.change
    fewer = [n for n in a.near_misses if n.configuration is not None
             and n.configuration.ipus == best.ipus - 1]
    if best.ipus > 1:
        # the search said no configuration of one IPU fewer fits: with every lever, compiled,
        # it does not (the estimate's margins are on the safe side)
        assert fewer
        assert worst(compiled(fewer[0].configuration)) > r.target.tile_memory * 0.97
    frame = c._columns()
    assert list(frame["ipus"]) == ipus


def test_cli_json_and_ipu_config(tmp_path, capsys, answer):
    r, c = answer
    path = tmp_path / "r.capnp"
    save_report(r, path)
    out = tmp_path / "ipu_config.json"
    assert main(["config", str(path), "--max-ipus", "3", "--max-micro-batch", "1",
                 "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Configurations that fit, best first" in text and "PopTorch options" in text
    cfg = json.loads(out.read_text())
    assert cfg == ipu_config(c.best)
    assert set(cfg) == {"layers_per_ipu", "ipus_per_replica", "matmul_proportion",
                        "recompute_checkpoint_every_layer", "optimizer_state_offchip",
                        "replicated_tensor_sharding", "replication_factor",
                        "enable_half_partials", "enable_half_first_order_momentum",
                        "embedding_serialization_factor"}
    assert cfg["ipus_per_replica"] == len(cfg["layers_per_ipu"])
    assert main(["config", str(path), "--max-ipus", "3", "--max-micro-batch", "1",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ranked"][0]["layersPerIpu"] == c.best.layers_per_ipu
    assert doc["ranked"][0]["verdict"] == "fits"


@pytest.mark.parametrize("args, field", [
    (["--max-ipus", "0"], "--max-ipus"), (["--ipus", "-1"], "--ipus"),
    (["--micro-batch", "0"], "--micro-batch"), (["--replicas", "1"], "--replicas"),
    (["--prefer", "nonsense"], "--prefer"), (["-o", "x.txt"], "-o")])
def test_bad_input_one_line_exit_2(args, field, capsys):
    assert main(["config", "examples/mk1-small.json", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tilemem: error:") and field in err[0]


def test_judge_by_hand():
    tm = 1000
    assert [judge(b, tm, 0.02) for b in (979, 980, 981, 1000, 1001)] == [
        Verdict.FITS, Verdict.FITS, Verdict.CLOSE, Verdict.CLOSE, Verdict.CANNOT_FIT]


def test_a_plan_within_its_levers_error_is_close_not_fits(monkeypatch):
    """oom's plan: the same combination, with its levers' error taken wider than the
    headroom it leaves, is *close*; with none, *fits*."""
    import tilemem.figures.config.margins as margins

    r = generate_report("mk1", tiles=16, steps=740, seed=1, model="transformer", pressure=1.3)
    tm = r.target.tile_memory
    d = tilemem.diagnose(r, repack=False, detail=tilemem.Detail(avoid=["offload", "micro-batch"]))
    p = d.summary.plan
    assert p is not None and p.verdict == Verdict.FITS
    need = [t.tile for t in d.tiles if t.verdict_code == "reduceData"]
    from tilemem.figures.plan import PLAN_LEVERS, combination_edits
    from tilemem.figures.whatif.bounds import WhatIfBounds

    combo = [x for x in PLAN_LEVERS if x[1] in p.levers]
    after = WhatIfBounds(r, need).of_edits(combination_edits(combo))[0]
    assert after.max() <= tm * (1 - p.margin)
    # errors wider than any combination's headroom (every tile was over tileMemory): no
    # combination fits, the plan is close at best, its tiles within the margin counted
    wide = {k: (0.6, v[1]) for k, v in margins.LEVER_ERRORS.items()}
    monkeypatch.setattr(margins, "LEVER_ERRORS", wide)
    from tilemem.figures.plan import plan_that_fits

    q = plan_that_fits(r, np.asarray(need), avoid=["offload", "micro-batch"])
    assert q.verdict in (Verdict.CLOSE, Verdict.CANNOT_FIT) and q.tiles_close + q.tiles_left > 0
    assert q.margin >= 0.6 and q.tiles_close == int(
        (WhatIfBounds(r, need).of_edits(combination_edits(
            [x for x in PLAN_LEVERS if x[1] in q.levers]))[0] > tm * (1 - q.margin)).sum()
        ) - q.tiles_left
