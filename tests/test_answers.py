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


# ---- partial reports ---------------------------------------------------------------------------

T6 = Target(6, 256, 128, np.array([0, 64, 128, 192]))


def partial() -> Report:
    """numTiles 6, variables of tiles 1 (fits: 64 B) and 4 (out of memory: 300 B) only."""
    return Report.from_columns(
        target=T6, var_id=[10, 11, 12], tile=[1, 4, 4], size=[64, 200, 100],
        alignment=[4] * 3, offset=[0, 0, 200], category=["variable"] * 3,
        eq_class=[0, 0, 0], interference=[[]])


@pytest.fixture()
def partial_path(tmp_path):
    path = tmp_path / "partial.json"
    save_report(partial(), path)
    return path


def test_partial_report_figures():
    r = partial()
    assert in_dump(r).tolist() == [False, True, False, False, True, False]
    assert tiles_fitting(r, range(6)) == 1                  # tile 1; absent tiles do not fit
    assert info(r).tiles_in_use == 2


def test_report_says_partial_and_leaves_absent_tiles_out(partial_path):
    code, out = run("report", partial_path)
    assert code == 0, out
    text = " ".join(out.split())
    assert "2 of 6 tiles in the dump (a partial report: the other 4 are not counted as " \
           "fitting or as empty)" in text
    # the histogram counts the two tiles of the dump, not four empty ones
    hist = [line for line in out.splitlines() if line.strip()[:1].isdigit() and "-" in line]
    assert sum(int(line.split()[-1]) for line in hist) == 2
    code, out = run("report", partial_path, "--json")
    assert json.loads(out)["memory"]["tilesInDump"] == [1, 4]
    code, out = run("info", partial_path)
    assert "2 of 6 tiles in the dump" in " ".join(out.split())


def test_full_report_json_has_no_dump_list(tmp_path):
    path = tmp_path / "full.json"
    save_report(Report.from_columns(target=T4.with_tiles(1), var_id=[0], tile=[0], size=[8],
                                    alignment=[4], offset=[0], category=["variable"],
                                    eq_class=[0], interference=[[]]), path)
    code, out = run("report", path, "--json")
    assert code == 0 and "tilesInDump" not in json.loads(out)["memory"]


def test_plot_tiles_marks_absent_tiles():
    import matplotlib
    matplotlib.use("Agg")
    from tilemem.figures.memory import memory_figures
    from tilemem.plot.maps import plot_tiles
    from tilemem.plot.pagedata import histogram_columns

    f = memory_figures(partial())
    fig, data = plot_tiles(f)
    assert data["inDump"].tolist() == [1, 4]
    assert int(data["histogram"][1].sum()) == 2 and int(data["histogramIncludingGaps"][1].sum()) == 2
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert titles[0].startswith("2 of 6 tiles in the dump (partial report)")
    assert titles[1].startswith("Tiles in the dump (2 of 6)")
    assert any(a.get_gid() == "notInDump" for a in fig.axes[0].patches)
    assert int(histogram_columns(f)["excl"].sum()) == 2


def test_alloc_fit_counts_leave_absent_tiles_out(partial_path):
    code, out = run("alloc", partial_path, "--tiles", "0-5", "--method", "heuristic",
                    "--workers", "1", "--json")
    assert code == 0, out
    s = json.loads(out)["summary"]
    # before: tile 1 only (tile 4 is over memory); after: tile 1 and the re-packed tile 4
    # (200 + 100 bytes of one class cannot share: 300 > 256, so tile 4 still overflows)
    assert (s["tilesThatFitBefore"], s["tilesThatFitAfter"]) == (1, 1)
    assert (s["tilesInDump"], s["numTiles"]) == (2, 6)
    code, out = run("alloc", partial_path, "--method", "heuristic", "--workers", "1")
    assert "2 of 6 tiles in the dump" in " ".join(out.split())


def test_oom_on_a_partial_report_says_so(partial_path):
    code, out = run("oom", partial_path, "--tiles", "0,1", "--no-repack")
    text = " ".join(out.split())
    assert code == 0, out
    assert text.startswith("None of the tiles asked for (0, 1) is out of memory; the fullest of "
                           "them is tile 1 with 64 B")
    assert "worst tile 4 (44 B over)" in text and "2 of 6 tiles in the dump" in text


def test_generate_partial_keeps_the_worst_oom_tiles(tmp_path):
    from tilemem.figures.summary import highest_end_per_tile
    from tilemem.generate import generate_report
    from tilemem.load import load_report

    full = generate_report("mk1", tiles=8, steps=100, seed=1, pressure=1.5)
    excess = highest_end_per_tile(full) - full.target.tile_memory
    worst = sorted(np.flatnonzero(excess > 0).tolist(), key=lambda t: (-excess[t], t))[:3]
    out = tmp_path / "p.json"
    code, text = run("generate", "--tiles", "8", "--steps", "100", "--seed", "1",
                     "--pressure", "1.5", "--partial", "3", "-o", out)
    assert code == 0, text
    p = load_report(out)
    assert p.num_tiles == 8 and sorted(p.tiles_in_use().tolist()) == sorted(worst)
    for t in worst:       # every variable of a kept tile, with its offset
        assert sorted(p.var_id[p.tile_rows(t)].tolist()) == sorted(full.var_id[full.tile_rows(t)].tolist())
    assert "partial: the variables of 3 of them only" in " ".join(text.split())
