"""Figures users act on (issue 13): fit counts that the checker backs, sums of variables that
share memory said as such, and partial reports (variables of only some tiles) summarised as
partial, their missing tiles counted neither as fitting nor as empty."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from tilemem.cli import cli
from tilemem.figures.summary import covered_bytes_per_tile, in_dump, info, tiles_fitting
from tilemem.load import save_report
from tilemem.model import Report
from tilemem.model.target import Target

# 4 tiles of 256 bytes, interleaved from 128
T4 = Target(4, 256, 128, np.array([0, 64, 128, 192]))


def overlapping() -> Report:
    """Tile 0: two variables of interfering classes both at offset 0 (small, but invalid);
    tile 1: the same two variables placed apart (valid); tile 2: over memory; tile 3 empty."""
    return Report.from_columns(
        target=T4, var_id=range(5), tile=[0, 0, 1, 1, 2], size=[32, 32, 32, 32, 300],
        alignment=[4] * 5, offset=[0, 0, 0, 32, 0], category=["variable"] * 5,
        eq_class=[0, 1, 0, 1, 2], interference=[[1], [0], []])


def run(*args):
    res = CliRunner().invoke(cli, [str(a) for a in args])
    return res.exit_code, res.output


# ---- alloc: a tile whose offsets overlap does not fit ---------------------------------------

def test_tiles_fitting_needs_the_checker():
    r = overlapping()
    # tile 0 is within memory but its offsets overlap; tile 2 is over memory; tile 3 is not
    # in the dump: only tile 1 fits
    assert tiles_fitting(r, [0, 1, 2, 3]) == 1
    assert tiles_fitting(r, [0]) == 0
    assert tiles_fitting(r, [0], offsets=[0, 32, 0, 32, 0]) == 1   # placed apart: fits


def test_alloc_does_not_count_overlapping_offsets_as_fitting(tmp_path):
    path = tmp_path / "r.json"
    save_report(overlapping(), path)
    code, out = run("alloc", path, "--tiles", "0,1", "--method", "heuristic", "--workers", "1",
                    "--json")
    assert code == 0, out
    s = json.loads(out)["summary"]
    assert (s["tilesThatFitBefore"], s["tilesThatFitAfter"]) == (1, 2)
    code, out = run("alloc", path, "--tiles", "0,1", "--method", "heuristic", "--workers", "1")
    assert "tiles that fit: 1 of 2 with the report's offsets (within memory and accepted by " \
           "the checker), 2 after" in " ".join(out.split())


# ---- sums of variables that share memory -------------------------------------------------------

def test_covered_bytes_count_shared_bytes_once():
    r = overlapping()
    assert covered_bytes_per_tile(r).tolist() == [32, 64, 300, 0]


def shared() -> Report:
    """One tile whose variables sum to more than tileMemory but share bytes (non-interfering
    classes): 3 x 200 bytes, all at 0, on a 256-byte tile."""
    return Report.from_columns(
        target=T4.with_tiles(1), var_id=range(3), tile=[0, 0, 0], size=[200, 200, 200],
        alignment=[4] * 3, offset=[0, 0, 0], category=["variable"] * 3,
        eq_class=[0, 1, 2], interference=[[], [], []])


def test_info_says_what_its_bytes_are(tmp_path):
    d = info(shared())
    row = d.top_tiles[0]
    assert (row.bytes, row.sum_of_sizes, row.out_of_memory) == (200, 600, False)
    path = tmp_path / "s.json"
    save_report(shared(), path)
    code, out = run("info", path)
    text = " ".join(out.split())
    assert code == 0
    assert "sum of sizes 600 (before overlapping)" in text
    assert "200 after overlapping" in text


def test_plot_legend_shows_bytes_after_overlapping():
    import matplotlib
    matplotlib.use("Agg")
    from tilemem.plot.maps import plot_tile

    fig, _ = plot_tile(shared(), 0)
    labels = [t.get_text() for ax in fig.axes if ax.get_legend()
              for t in ax.get_legend().get_texts()]
    assert "variable (200 B)" in labels
    titles = [ax.get_legend().get_title().get_text() for ax in fig.axes if ax.get_legend()]
    assert any("after overlapping" in t for t in titles)
