"""Multi-IPU generated reports: a program pipelined over IPUs, checked against the rules.

Expectations come from the documents, not from the generator: numTiles is numIPUs x tilesPerIPU
(000, 7.1.1), an inter-IPU copy is a GlobalExchange with message buffers (globalMessage, 002)
on the sending and the receiving IPU, and the allocation passes the independent checkers.
"""
import functools
import json

import numpy as np
import pytest
from click.testing import CliRunner

from generate_checker import violations
from tilemem.check import check_allocation
from tilemem.cli import cli, main
from tilemem.load import load_report, save_report
from tilemem.generate import generate_report

PER_IPU, STEPS = 24, 120


@functools.lru_cache(maxsize=None)
def gen(ipus=2, preset="mk1", seed=1):
    return generate_report(preset, tiles=PER_IPU, steps=STEPS, seed=seed, ipus=ipus)


def base_names(r, rows):
    return [r.name(i).rpartition("#")[0] for i in rows]


def rows_named(r, pattern):
    return np.array([i for i in range(r.num_vars) if pattern in r.name(i)], np.int64)


def test_tiles_are_numbered_over_all_ipus():
    r = gen()
    assert r.num_tiles == 2 * PER_IPU
    assert r.target.tiles_per_ipu == PER_IPU and r.target.num_ipus == 2
    assert r.tiles_in_use().tolist() == list(range(2 * PER_IPU))
    # the #n suffix of every name is the global tile number
    for i in np.linspace(0, r.num_vars - 1, 200).astype(int).tolist():
        assert r.name(i).rpartition("#")[2] == str(r.tile[i])


def test_both_ipus_carry_model_variables_and_each_layer_stays_on_one_ipu():
    r = gen()
    ipu = r.tile // PER_IPU
    model = np.flatnonzero(~r.always_live & (np.array(r.categories)[r.category] == "variable"))
    counts = np.bincount(ipu[model], minlength=2)
    assert counts.min() > 0.2 * counts.sum()
    by_tensor = {}
    for row, name in zip(model.tolist(), base_names(r, model)):
        by_tensor.setdefault(name, set()).add(int(ipu[row]))
    layer = {n: s for n, s in by_tensor.items() if n.startswith("layer")}
    assert layer and all(len(s) == 1 for s in layer.values())
    # consecutive stages: layer numbers on IPU 0 all come before those on IPU 1
    first = {int(n.split("/")[0][5:]): next(iter(s)) for n, s in layer.items()}
    on0 = [k for k, v in first.items() if v == 0]
    on1 = [k for k, v in first.items() if v == 1]
    assert on0 and on1 and max(on0) < min(on1)
    # the loss scale is needed on every IPU
    ls = rows_named(r, "lossScaling/lossScale#")
    assert set(ipu[ls].tolist()) == {0, 1}


@pytest.mark.parametrize("direction,src,dst", [("fwd/stage0to1", 0, 1), ("bwd/stage1to0", 1, 0)])
def test_inter_ipu_copies_have_exchange_buffers_on_both_sides(direction, src, dst):
    r = gen()
    ipu = r.tile // PER_IPU
    cats = np.array(r.categories)[r.category]
    send = rows_named(r, f"pipeline/{direction}/<globalMessage:send>#")
    recv = rows_named(r, f"pipeline/{direction}/<globalMessage:recv>#")
    out = rows_named(r, f"pipeline/{direction}/out#")
    assert len(send) and len(recv) and len(out)
    assert set(ipu[send].tolist()) == {src} and set(ipu[recv].tolist()) == {dst}
    assert set(ipu[out].tolist()) == {dst}
    assert set(cats[send]) == set(cats[recv]) == {"globalMessage"}
    # same bytes leave and arrive
    assert r.size[send].sum() == r.size[recv].sum()
    # exchange buffers are short-lived: send, exchange, receive, unpack
    steps = r.class_steps
    s_cls, r_cls = int(r.eq_class[send[0]]), int(r.eq_class[recv[0]])
    assert steps[s_cls, 1] - steps[s_cls, 0] <= 2 and steps[r_cls, 1] - steps[r_cls, 0] <= 2
    assert steps[s_cls, 0] < steps[r_cls, 0]  # sent before received
    # exchange code is always live on the tiles of both sides
    gx = np.flatnonzero(cats == "globalExchangeCode")
    assert set(ipu[gx].tolist()) == {0, 1}
    assert r.always_live[gx].all() and r.executable[gx].all()


def test_first_fit_offsets_are_valid_on_both_ipus():
    r = gen()
    assert violations(r) == []
    res = check_allocation(r)
    assert res.ok, [str(v) for v in res.violations[:5]]


def test_each_ipu_has_its_own_hot_spots_and_the_first_stage_stashes():
    r = gen()
    per_tile = np.bincount(r.tile, r.size, minlength=r.num_tiles).reshape(2, PER_IPU)
    # not one profile repeated: different tensors, mapped from different offsets
    assert np.corrcoef(per_tile[0], per_tile[1])[0, 1] < 0.95
    stash = rows_named(r, "pipeline/stage0/stash#")
    assert len(stash) and set((r.tile[stash] // PER_IPU).tolist()) == {0}
    assert len(rows_named(r, "pipeline/stage1/stash#")) == 0     # the last stage keeps none
    # a FIFO across iterations: live from the first step of the training loop
    input_cls = int(r.eq_class[rows_named(r, "input#")[0]])
    assert r.class_steps[int(r.eq_class[stash[0]]), 0] <= r.class_steps[input_cls, 0]


def test_more_ipus_and_mk2():
    r = gen(ipus=3, preset="mk2")
    assert r.num_tiles == 3 * PER_IPU and r.target.num_ipus == 3
    ipu = r.tile // PER_IPU
    for name in ("fwd/stage0to1", "fwd/stage1to2", "bwd/stage2to1", "bwd/stage1to0"):
        assert len(rows_named(r, f"pipeline/{name}/<globalMessage:recv>#"))
    assert set(ipu[rows_named(r, "lossScaling/nonFinite/<globalMessage:recv>#")].tolist()) \
        == {0, 1, 2}
    assert check_allocation(r).ok


def test_one_ipu_is_the_single_ipu_program():
    a = generate_report("mk1", tiles=8, steps=60, seed=2)
    b = generate_report("mk1", tiles=8, steps=60, seed=2, ipus=1)
    assert a == b and a.target.tiles_per_ipu is None
    assert "globalMessage" not in set(np.array(a.categories)[a.category])


def test_round_trip_keeps_tiles_per_ipu(tmp_path):
    r = gen()
    for ext in (".json", ".capnp"):
        p = tmp_path / f"g{ext}"
        save_report(r, p)
        back = load_report(p)
        assert back == r and back.target.tiles_per_ipu == PER_IPU


def test_bad_tiles_per_ipu_is_one_line_error(tmp_path, capsys):
    r = generate_report("mk1", tiles=4, steps=60, seed=1, ipus=2)
    p = tmp_path / "g.json"
    save_report(r, p)
    d = json.loads(p.read_text())
    d["tilesPerIPU"] = 3                     # does not divide numTiles 8
    p.write_text(json.dumps(d))
    capsys.readouterr()
    assert main(["info", str(p)]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("tilemem: error: ") and "tilesPerIPU" in err


def test_cli_generate_ipus_then_check_info_report_oom(tmp_path):
    out = tmp_path / "two.capnp"
    runner = CliRunner()
    res = runner.invoke(cli, ["generate", "--ipus", "2", "--tiles", str(PER_IPU), "--steps",
                              str(STEPS), "--seed", "1", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "2 IPUs" in res.output
    assert load_report(out) == gen()
    assert main(["check", str(out)]) == 0           # the report's own first-fit offsets
    res = runner.invoke(cli, ["info", "--json", str(out)])
    d = json.loads(res.output)
    assert d["target"]["numIPUs"] == 2 and d["target"]["tilesPerIPU"] == PER_IPU
    assert all(row["ipu"] == row["tile"] // PER_IPU for row in d["topTiles"])
    res = runner.invoke(cli, ["report", str(out)])
    assert res.exit_code == 0, res.output
    assert "(IPU " in res.output
    over = [t for t in range(gen().num_tiles) if t in set(gen().tile[
        gen().offset + gen().size > gen().target.tile_memory].tolist())]
    if over:
        res = runner.invoke(cli, ["oom", "--json", "--no-repack", "--tiles", str(over[0]),
                                  str(out)])
        assert res.exit_code == 0, res.output
        (tile,) = json.loads(res.output)["tiles"]
        assert tile["tile"] == over[0] and tile["ipu"] == over[0] // PER_IPU


def test_target_without_tiles_per_ipu_is_inferred_from_the_geometry():
    from tilemem.model.target import MK1, MK2

    assert MK2.with_tiles(4 * 1472).num_ipus == 4
    assert int(MK2.with_tiles(4 * 1472).ipu_of(1472 * 3 + 5)) == 3
    assert MK1.with_tiles(1216).num_ipus == 1
    assert MK1.with_tiles(1000).num_ipus == 1           # not a whole number of IPUs
