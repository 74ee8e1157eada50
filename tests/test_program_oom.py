"""Out-of-memory answers for a whole program (tilemem oom's summary, what-if, diff), checked
against independent computations: tilemem alloc and tilemem liveness on the same reports,
the maximum live bytes recomputed on the changed report a what-if writes, hand-computed
cases, and a pair of compilations whose growth was put there on purpose."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tilemem.cli import main
from tilemem.generate import generate_report
from tilemem.load import load_report, save_report
from tilemem.model import Report
from tilemem.model.target import Target


def run(capsys, *args) -> tuple[int, str, str]:
    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """One program compiled twice: Poplar's default availableMemoryProportion (0.6) and 1.0,
    which lets the convolutions' partial sums grow by two thirds, drawn so that a tile goes
    out of memory with them (the tests below read that tile)."""
    d = tmp_path_factory.mktemp("pair")
    paths = []
    for amp in (0.6, 1.0):
        r = generate_report("mk1", tiles=16, steps=400, seed=3, available_memory_proportion=amp)
        p = d / f"amp{amp}.capnp"
        save_report(r, p)
        paths.append(p)
    return paths


def test_the_summary_agrees_with_alloc_and_liveness(pair, capsys):
    before = pair[0]
    rc, out, _ = run(capsys, "oom", before, "--method", "heuristic", "--json")
    assert rc == 0
    doc = json.loads(out)
    s, tiles = doc["summary"], doc["tiles"]
    rc, out, _ = run(capsys, "alloc", before, "--method", "heuristic", "--json")
    alloc = json.loads(out)["summary"]
    # the same packer on the same tiles: the same tiles fit, the same bytes overflow
    assert s["tilesThatFitAfter"] == alloc["tilesThatFit"]
    assert s["overflowBytesAfter"] == alloc["overflowBytes"]
    assert s["tilesThatFitBefore"] == alloc["tilesThatFitBefore"]
    rc, out, _ = run(capsys, "liveness", before, "--json")
    live = {t["tile"]: t["maxLiveBytes"] for t in json.loads(out)["tiles"]}
    tm = s["tileMemory"]
    for t in tiles:
        assert t["maxLiveBytes"] == live[t["tile"]]
    assert s["verdicts"]["reduceData"] == sum(live[t["tile"]] > tm for t in tiles)
    assert sum(s["verdicts"].values()) == s["outOfMemory"] == len(tiles)
    need = [live[t["tile"]] - tm for t in tiles if live[t["tile"]] > tm]
    assert s["bytesToFree"]["total"] == sum(need)


def test_the_summary_comes_first_and_the_output_is_short(pair, capsys):
    rc, out, _ = run(capsys, "oom", pair[1], "--no-repack")
    assert rc == 0
    lines = out.splitlines()
    # the headline first (wrapped at 80 columns when the report's path is long, as under
    # pytest-xdist's longer temporary paths)
    headline = " ".join(out.split("\n\n")[0].split())
    assert "tiles out of memory" in headline
    assert any("Out-of-memory tiles, worst first" in x for x in lines[:40])
    assert len(lines) < 250


def _tiny(sizes, names, tile_memory=64):
    """One tile, every variable in its own class and all interfering: the maximum live
    bytes are the sum of the sizes (hand-computed)."""
    n = len(sizes)
    t = Target(num_tiles=1, tile_memory=tile_memory, interleaved_memory_start=tile_memory,
               memory_element_offsets=[0])
    return Report.from_columns(
        target=t, var_id=range(n), tile=[0] * n, size=sizes, alignment=[4] * n,
        offset=np.cumsum([0] + list(sizes[:-1])).tolist(), category=["variable"] * n,
        eq_class=range(n), interference=[[j for j in range(n) if j != i] for i in range(n)],
        names=names)


def test_what_if_by_hand(tmp_path, capsys):
    # 40 + 24 + 16 = 80 bytes live in 64: offloading the momentum (24) leaves 56, which
    # fits; halving the activations instead leaves 60, which fits too; scaling by 0.9 does
    # not (36 + 24 + 16 = 76)
    p = tmp_path / "tiny.json"
    save_report(_tiny([40, 24, 16], ["l1/acts#0", "l1/momentum#0", "l1/w#0"]), p)
    for opts, reduce in ((["--offload", "*/momentum"], 0), (["--scale", "*/acts=0.5"], 0),
                         (["--scale", "*/acts=0.9"], 1)):
        out_report = tmp_path / "changed.json"
        rc, out, _ = run(capsys, "what-if", p, *opts, "--json", "-o", out_report)
        assert rc == 0
        s = json.loads(out)["summary"]
        assert s["verdicts"]["reduceData"] == reduce, opts
        # the changed report, reopened: its maximum live bytes say the same
        rc, out, _ = run(capsys, "liveness", out_report, "--json")
        ml = json.loads(out)["tiles"][0]["maxLiveBytes"]
        assert (ml > 64) == bool(reduce)


def test_what_if_counts_match_liveness_on_the_changed_report(pair, tmp_path, capsys):
    changed = tmp_path / "changed.capnp"
    rc, out, _ = run(capsys, "what-if", pair[1], "--scale", "*/partials=0.5", "--offload",
                     "re:momentum$", "--json", "-o", changed)
    assert rc == 0
    doc = json.loads(out)
    s = doc["summary"]
    assert [e["edit"] for e in s["edits"]] == ["offload re:momentum$", "scale */partials by 0.5"]
    assert all(e["variables"] > 0 for e in s["edits"]) and s["assumptions"]
    rc, out, _ = run(capsys, "liveness", changed, "--json")
    live = {t["tile"]: t["maxLiveBytes"] for t in json.loads(out)["tiles"]}
    tm = s["tileMemory"]
    for t in doc["tiles"]:
        assert t["maxLiveBytes"] == live[t["tile"]]
    # every tile whose live data no longer fits is in question
    assert {t for t, b in live.items() if b > tm} <= {t["tile"] for t in doc["tiles"]}
    r = load_report(changed)
    orig = load_report(pair[1])
    assert r.allocated.sum() < orig.allocated.sum()     # the momentum went


def test_next_steps_are_what_the_what_if_finds(capsys, tmp_path):
    # two tiles that need less data; offloading the tensor the summary ranks first must
    # bring as many under tileMemory as it says, by the what-if's own count
    r = generate_report("mk1", tiles=16, steps=400, seed=2, pressure=1.25)
    p = tmp_path / "hot.capnp"
    save_report(r, p)
    rc, out, _ = run(capsys, "oom", p, "--no-repack", "--json")
    s = json.loads(out)["summary"]
    assert s["verdicts"]["reduceData"] >= 1 and s["nextSteps"]
    for step in [x for x in s["nextSteps"] if not x["command"]][:3]:
        opt, _, arg = step["whatIf"].partition(" ")
        rc, out, _ = run(capsys, "what-if", p, opt, arg.strip("'"), "--json")
        w = json.loads(out)["summary"]
        # the step's count is the what-if's: the tiles that needed less data and no longer
        # do (sizes only went down, so no other tile comes to need less data)
        assert w["verdicts"]["reduceData"] == s["verdicts"]["reduceData"] - step["tilesFixed"]


def test_diff_names_the_growth_that_put_tiles_out_of_memory(pair, capsys):
    rc, out, _ = run(capsys, "diff", pair[0], pair[1], "--json")
    assert rc == 0
    d = json.loads(out)
    assert d["tilesCompared"] and d["gained"]
    # only the partial sums were made larger: they are what grew on the new tiles
    grew = [c for c in d["causeOfGained"] if c["delta"] >= 64]
    assert grew and all(c["name"].endswith("/partials") for c in grew)
    assert all(c["name"].endswith("/partials") for c in d["tensorsGrown"])
    rc, out, _ = run(capsys, "diff", pair[0], pair[1])
    assert rc == 0 and "went out of memory" in out and "/partials" in out


def test_diff_of_different_tile_counts_says_what_is_left_out(pair, tmp_path, capsys):
    other = tmp_path / "other.capnp"
    save_report(generate_report("mk1", tiles=8, steps=400, seed=3), other)
    rc, out, _ = run(capsys, "diff", pair[0], other, "--json")
    assert rc == 0
    d = json.loads(out)
    assert not d["tilesCompared"] and "left out" in d["leftOut"] and d["categories"]


@pytest.mark.parametrize("args,field", [
    (["what-if", "{r}", "--offload", "re:("], "--offload"),
    (["what-if", "{r}", "--scale", "layer1/acts"], "--scale"),
    (["what-if", "{r}", "--scale", "x=-1"], "--scale"),
    (["what-if", "{r}"], "--offload"),
    (["diff", "{r}", "{broken}"], None),
])
def test_bad_input_is_one_line_and_writes_nothing(pair, tmp_path, capsys, args, field):
    broken = tmp_path / "broken.json"
    broken.write_text('{"vars": [')
    out = tmp_path / "out.json"
    argv = [str(pair[0]) if a == "{r}" else str(broken) if a == "{broken}" else a for a in args]
    rc, _, err = run(capsys, *argv, "-o", out)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tilemem: error:"), err
    if field:
        assert field in lines[0]
    assert not out.exists() and not list(tmp_path.glob(".*tmp"))


def test_a_pattern_that_matches_nothing_says_so(pair, capsys):
    rc, out, err = run(capsys, "what-if", pair[0], "--offload", "no/such/tensor", "--json")
    assert rc == 0
    assert "no/such/tensor" in err and "matches no" in err
    assert json.loads(out)["summary"]["edits"][0]["variables"] == 0


def test_the_what_if_assumption_is_said(pair, capsys):
    rc, out, _ = run(capsys, "what-if", pair[0], "--offload", "*/momentum")
    assert rc == 0
    assert "assumes the same program with other sizes" in " ".join(out.split())
    assert Path(pair[0]).exists()


def test_names_are_printed_as_they_are(tmp_path, capsys):
    # names are data, not markup: brackets in them reach the user unchanged
    p = tmp_path / "brackets.json"
    save_report(_tiny([40, 24, 16], ["l[bold]1/acts#0", "l1/m[sz]#0", "w[/]#0"]), p)
    rc, out, _ = run(capsys, "oom", p, "--no-repack")
    assert rc == 0
    text = " ".join(out.split())
    assert "l[bold]1/acts" in text and "l1/m[sz]" in text and "w[/]" in text


def test_layers_at_the_peaks_by_hand():
    # tile 0 holds m/l1/a (8) and m/l1/b (4) at its peak, tile 1 m/l1/a (8) and m/l2/c (16):
    # m prefixes everything (left out); m/l1 is at both peaks with 20 bytes, m/l2 at one
    from types import SimpleNamespace as NS

    from tilemem.figures.program import peak_tensors

    t = Target(num_tiles=2, tile_memory=64, interleaved_memory_start=64,
               memory_element_offsets=[0])
    r = Report.from_columns(target=t, var_id=range(4), tile=[0, 0, 1, 1], size=[8, 4, 8, 16],
                            alignment=[4] * 4, offset=[0, 8, 0, 8], category=["variable"] * 4,
                            eq_class=[0, 1, 0, 1], interference=[[1], [0]],
                            names=["m/l1/a#0", "m/l1/b#0", "m/l1/a#1", "m/l2/c#1"])
    diagnoses = [NS(tile=0), NS(tile=1)]
    peaks = {0: NS(peak_rows=np.array([0, 1])), 1: NS(peak_rows=np.array([2, 3]))}
    tensors, layers = peak_tensors(r, diagnoses, peaks, top=5)
    assert [(x.name, x.tiles, x.bytes) for x in tensors] == [
        ("m/l1/a", 2, 16), ("m/l2/c", 1, 16), ("m/l1/b", 1, 4)]
    assert [(x.name, x.tiles, x.bytes) for x in layers] == [("m/l1", 2, 20), ("m/l2", 1, 16)]


def test_what_if_repack_writes_an_allocation_the_checker_accepts(pair, tmp_path, capsys):
    changed = tmp_path / "repacked.capnp"
    rc, out, _ = run(capsys, "what-if", pair[1], "--scale", "*/partials=0.5", "--repack",
                     "--method", "heuristic", "--json", "-o", changed)
    assert rc == 0
    doc = json.loads(out)
    fits = [t["tile"] for t in doc["tiles"] if t["verdictCode"] == "repackFits"]
    assert fits
    rc, out, _ = run(capsys, "check", changed, "--json")
    res = json.loads(out)
    assert rc == 0 and res["ok"], res
    # the tiles the summary says fit once re-packed fit in the report it wrote
    r = load_report(changed)
    a = r.allocated
    high = np.zeros(r.num_tiles, np.int64)
    np.maximum.at(high, r.tile[a], r.offset[a] + r.size[a])
    assert (high[fits] <= r.target.tile_memory).all()
