"""Memory maps (tilemem.plot): the drawn rectangles are the allocation, files are valid."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tilemem.cli import cli, main
from tilemem.files import load_report, save_report
from tilemem.model import Report
from tilemem.plot import (draw_tile_map, plot_tile, plot_tiles, save_figure, tile_map,
                          _lanes)
from tilemem.report import memory_figures
from tilemem.target import Target

SEED = Path(__file__).parents[1] / "examples" / "seed.json"
SMALL = Target(num_tiles=2, tile_memory=1024, interleaved_memory_start=512,
               memory_element_offsets=np.array([0, 256, 512, 768]))
MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF-", "svg": b"<?xml"}


def stepped_report(n=400, seed=0, overflow=True):
    """One busy tile with a timeline: variables placed greedily without checking rules
    (the map draws whatever the allocation is), some past tileMemory."""
    rng = np.random.default_rng(seed)
    size = (rng.integers(1, 40, n) * 4).astype(np.int64)
    start = rng.integers(0, 50, n)
    steps = np.stack([start, start + rng.integers(1, 10, n)], 1)
    steps[:3] = [[0, 0], [0, 0], [0, 0]]            # always-live ones
    offset = np.zeros(n, np.int64)
    cursor = 0
    for i in range(n):                                # reuse addresses in four rounds
        offset[i] = cursor
        cursor = (cursor + size[i]) % (1400 if overflow else 900)
    offset = offset // 4 * 4
    cats = rng.choice(["variable", "message", "stack", "rearrangement"], n)
    return Report.from_columns(
        target=SMALL, var_id=np.arange(n), tile=np.zeros(n, int), size=size,
        alignment=[4] * n, offset=offset, category=list(cats), eq_class=np.arange(n),
        interference=[[] for _ in range(n)], always_live=np.arange(n) < 3, class_steps=steps)


def drawn_rectangles(ax):
    """(x0, x1, y0, y1) of every rectangle in the ``vars:*`` collections, by category."""
    out = {}
    for coll in ax.collections:
        gid = coll.get_gid() or ""
        if not gid.startswith("vars:"):
            continue
        rects = []
        for path in coll.get_paths():
            v = path.vertices
            rects.append((v[:, 0].min(), v[:, 0].max(), v[:, 1].min(), v[:, 1].max()))
        out[gid[5:]] = sorted(rects)
    return out


def expected_rectangles(r, tile, offsets=None, ys=None):
    off = r.offset if offsets is None else offsets
    out = {}
    for i in r.tile_rows(tile).tolist():
        if r.size[i] == 0:
            continue
        y0, y1 = ys[i]
        out.setdefault(r.category_name(i), []).append(
            (float(off[i]), float(off[i] + r.size[i]), float(y0), float(y1)))
    return {k: sorted(v) for k, v in out.items()}


def test_lanes_separate_variables_that_share_bytes():
    rng = np.random.default_rng(1)
    x0 = rng.integers(0, 1000, 300)
    x1 = x0 + rng.integers(1, 100, 300)
    lane = _lanes(x0, x1)
    for i in range(300):
        share = (x0 < x1[i]) & (x0[i] < x1) & (np.arange(300) != i)
        assert not (lane[share] == lane[i]).any()
    # disjoint variables all sit in lane 0
    assert (_lanes(np.array([0, 10, 20]), np.array([10, 20, 30])) == 0).all()


def test_seed_map_rectangles_are_the_allocation(tmp_path):
    r = load_report(SEED)
    fig, (m,) = plot_tile(r, 0)
    ax = fig.axes[0]
    ys = {int(row): (y0, y1) for row, y0, y1 in zip(m.rows, m.y0, m.y1)}
    assert drawn_rectangles(ax) == expected_rectangles(r, 0, ys=ys)
    # no steps in the seed: a time axis only if the interference has an interval model
    assert m.y_kind in ("points", "lanes")
    # layer0/in#0 and message#0 share bytes: on the y axis (steps or lanes) they are apart
    rows = {r.name(int(i)): int(i) for i in m.rows}
    a, b = ys[rows["layer0/in#0"]], ys[rows["message#0"]]
    assert a[1] <= b[0] or b[1] <= a[0]
    # the gap strip draws the tile's gaps, coloured by cause
    strip = fig.axes[1]
    gaps = {c.get_gid()[5:]: [tuple(p.vertices[:, 0][[0, 1]]) for p in c.get_paths()]
            for c in strip.collections if (c.get_gid() or "").startswith("gaps:")}
    assert gaps == {"elementConstraint": [(3568.0, 16384.0)],
                    "interleavedBoundary": [(16448.0, 131072.0)]}
    # no label soup: only the region labels and the title-ish texts
    assert len(ax.texts) <= 4
    for fmt in ("png", "svg", "pdf"):
        path = tmp_path / f"seed.{fmt}"
        save_figure(fig, path)
        data = path.read_bytes()
        assert data.startswith(MAGIC[fmt]) and len(data) > 5000


def test_lanes_when_there_is_no_timeline():
    # classes 0-1-2-3-0 interfere in a cycle: no interval model, so no timeline
    r = Report.from_columns(
        target=SMALL, var_id=[0, 1, 2, 3, 4], tile=[0] * 5, size=[64, 64, 32, 32, 16],
        alignment=[4] * 5, offset=[0, 64, 0, 64, 200], eq_class=[0, 1, 2, 3, 0],
        category=["variable", "message", "stack", "variable", "variable"],
        interference=[[1, 3], [2], [3], []])
    m = tile_map(r, 0)
    assert m.y_kind == "lanes"
    lanes = dict(zip(m.rows.tolist(), m.y0.tolist()))
    assert lanes == {0: 0.0, 1: 0.0, 2: 1.0, 3: 1.0, 4: 0.0}
    fig, _ = plot_tile(r, 0)
    ys = {int(row): (y0, y1) for row, y0, y1 in zip(m.rows, m.y0, m.y1)}
    assert drawn_rectangles(fig.axes[0]) == expected_rectangles(r, 0, ys=ys)
    assert fig.axes[0].get_ylabel().startswith("lane")


def test_timeline_map_and_overflow_highlight(tmp_path):
    r = stepped_report()
    f = memory_figures(r)
    assert f.highest_end[0] > 1024                  # the allocation overflows
    fig, (m,) = plot_tile(r, 0)
    assert m.y_kind == "steps"
    # the y extent of every variable is its class's steps; always-live ones span the run
    first, last = r.class_steps[3:, 0].min(), r.class_steps[3:, 1].max()
    ys = {}
    for i in range(r.num_vars):
        s, e = r.class_steps[r.eq_class[i]]
        ys[i] = (first, last) if r.always_live[i] else (s, e)
    ax = fig.axes[0]
    assert drawn_rectangles(ax) == expected_rectangles(r, 0, ys=ys)
    assert ax.get_xlim()[1] > 1024                    # the overflow zone is on the axis
    assert "OUT OF MEMORY" in ax.get_title(loc="left")
    path = tmp_path / "steps.png"
    save_figure(fig, path)
    assert path.read_bytes().startswith(MAGIC["png"])


def test_compare_draws_both_allocations_on_one_scale():
    r = stepped_report(overflow=False)
    other = r.offset.copy()
    other[r.tile_rows(0)] = np.concatenate([[0], np.cumsum(r.size)[:-1]])  # stacked, no reuse
    fig, maps = plot_tile(r, 0, compare=other, compare_label="stacked")
    a, b = fig.axes[0], fig.axes[2]
    assert a.get_xlim() == b.get_xlim() and a.get_ylim() == b.get_ylim()
    ys = {int(row): (y0, y1) for row, y0, y1 in zip(maps[0].rows, maps[0].y0, maps[0].y1)}
    assert drawn_rectangles(a) == expected_rectangles(r, 0, ys=ys)
    assert drawn_rectangles(b) == expected_rectangles(r, 0, other, ys=ys)
    assert b.get_title(loc="left").startswith("stacked: tile 0")


def test_thousands_of_variables_stay_one_artist_per_category():
    r = stepped_report(n=5000, seed=3)
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.add_subplot()
    artists = draw_tile_map(ax, tile_map(r, 0))
    assert set(artists["vars"]) == {"variable", "message", "stack", "rearrangement"}
    assert sum(len(c.get_paths()) for c in artists["vars"].values()) == 5000
    assert len(ax.texts) <= 4 and len(ax.patches) <= 2


def test_plot_tiles_data_and_files(tmp_path):
    r = stepped_report()
    f = memory_figures(r)
    fig, data = plot_tiles(f)
    assert data["totalIncludingGaps"].tolist() == f.highest_end.tolist()
    assert data["outOfMemory"].tolist() == [0]
    edges, counts = data["histogram"]
    assert counts.sum() == 1                          # one tile in use
    top = fig.axes[0]
    stairs = {p.get_gid(): p for p in top.patches if p.get_gid()}
    assert stairs["includingGaps"].get_data().values.tolist() == f.highest_end.tolist()
    assert stairs["excludingGaps"].get_data().values.tolist() == f.total.tolist()
    for fmt in ("png", "svg", "pdf"):
        path = tmp_path / f"tiles.{fmt}"
        save_figure(fig, path)
        assert path.read_bytes().startswith(MAGIC[fmt])


def test_pictures_are_deterministic(tmp_path):
    r = load_report(SEED)
    for fmt in ("png", "svg", "pdf"):
        a, b = tmp_path / f"a.{fmt}", tmp_path / f"b.{fmt}"
        save_figure(plot_tile(r, 1)[0], a)
        save_figure(plot_tile(r, 1)[0], b)
        assert a.read_bytes() == b.read_bytes(), fmt


def test_cli_plot_commands(tmp_path):
    runner = CliRunner()
    out = tmp_path / "map.svg"
    res = runner.invoke(cli, ["plot", str(SEED), "--tile", "1", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_bytes().startswith(MAGIC["svg"])
    out = tmp_path / "tiles.png"
    res = runner.invoke(cli, ["plot-tiles", str(SEED), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_bytes().startswith(MAGIC["png"])
    assert main(["plot", str(SEED), "--tile", "1", "-o", str(tmp_path / "m.gif")]) == 2
    assert main(["plot", str(SEED), "--tile", "7", "-o", str(tmp_path / "m.png")]) == 2
    assert not (tmp_path / "m.png").exists() and not (tmp_path / "m.gif").exists()


def test_cli_plot_other_allocation(tmp_path):
    r = load_report(SEED)
    off = r.offset.copy()
    row = int(r.rows_of_vars([6257])[0])
    off[row] = 32768                                  # move layer0/out#0 up one element
    save_report(r.with_offsets(off), tmp_path / "alloc.json")
    fig, (m,) = plot_tile(r, 0, off)
    assert 32768 in m.x0.tolist()
    res = CliRunner().invoke(cli, ["plot", str(SEED), "--tile", "0", "--allocation",
                                   str(tmp_path / "alloc.json"), "-o", str(tmp_path / "a.png")])
    assert res.exit_code == 0, res.output


def test_cli_compare_uses_the_packer(tmp_path):
    pytest.importorskip("tilemem.pack.driver", reason="packer (tilemem.pack.driver) not landed")
    out = tmp_path / "cmp.png"
    res = CliRunner().invoke(cli, ["plot", str(SEED), "--tile", "0", "--compare",
                                   "--time-limit", "2", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_bytes().startswith(MAGIC["png"])


def test_generated_example_maps(tmp_path):
    example = Path(__file__).parents[1] / "examples" / "mk1-small.capnp"
    if not example.exists():
        pytest.skip("examples/mk1-small.capnp not present")
    r = load_report(example)
    f = memory_figures(r)
    tile = int(f.out_of_memory()[0])
    fig, (m,) = plot_tile(r, tile)
    ys = {int(row): (y0, y1) for row, y0, y1 in zip(m.rows, m.y0, m.y1)}
    assert m.y_kind == "steps"                  # the example carries equivalenceClassSteps
    assert drawn_rectangles(fig.axes[0]) == expected_rectangles(r, tile, ys=ys)
    assert fig.axes[0].get_xlim()[1] > r.target.tile_memory
    fig2, data = plot_tiles(f)
    assert set(data["outOfMemory"].tolist()) == set(f.out_of_memory().tolist())
    for fig_, name in ((fig, "map.png"), (fig2, "tiles.png")):
        save_figure(fig_, tmp_path / name)
        assert (tmp_path / name).read_bytes().startswith(MAGIC["png"])
        assert (tmp_path / name).stat().st_size > 20000
