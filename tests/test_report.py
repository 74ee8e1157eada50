"""Memory figures (tilemem.figures.memory): hand-computed cases, a byte-painting oracle, JSON shape, CLI."""
from __future__ import annotations

import json
from pathlib import Path

import msgspec
import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilemem.cli import cli
from tilemem.figures.memory import GAP_CAUSES, REGIONS, memory_figures, tile_histogram
from tilemem.generate import generate_report
from tilemem.load import load_report, save_report
from tilemem.load.allocation import offsets_from_file
from tilemem.model import CATEGORIES, Report
from tilemem.model.target import Target
from tilemem.text import summary_text

SEED = Path(__file__).parents[1] / "examples" / "seed.json"
# 4 elements of 256 bytes; interleaved from 512; tileMemory 1024
SMALL = Target(num_tiles=3, tile_memory=1024, interleaved_memory_start=512,
               memory_element_offsets=np.array([0, 256, 512, 768]))


def by_tile(f, tile):
    return {k: int(v[tile]) for k, v in f.by_tile.items()}


def test_seed_figures_by_hand():
    f = memory_figures(load_report(SEED))
    # tile 0: [0,3568) covered ([3440,3504) and [3440,3568) overlap), [16384,16448),
    # interleaved [131072,131328). tile 1: [0,2112), interleaved [131072,131712).
    assert by_tile(f, 0) == dict(
        interleaved=256, interleavedIncludingGaps=256, nonInterleaved=3632,
        nonInterleavedIncludingGaps=16448, overflowed=0, overflowedIncludingGaps=0,
        total=3888, totalIncludingGaps=131328)
    assert by_tile(f, 1) == dict(
        interleaved=640, interleavedIncludingGaps=640, nonInterleaved=2112,
        nonInterleavedIncludingGaps=2112, overflowed=0, overflowedIncludingGaps=0,
        total=2752, totalIncludingGaps=131712)
    cat = {name: i for i, name in enumerate(f.categories)}
    ni = REGIONS.index("nonInterleaved")
    # layer0/in#0 (variable, 64) and message#0 (128) share bytes; so do layer0/in#1 (128)
    # and rearrangement#1 (64)
    assert f.overlapped[cat["variable"], ni].tolist() == [64, 128]
    assert f.overlapped[cat["message"], ni].tolist() == [128, 0]
    assert f.overlapped[cat["rearrangement"], ni].tolist() == [0, 64]
    assert f.non_overlapped[cat["variable"], ni].tolist() == [16 + 64, 0]
    assert f.after_overlapping[ni].tolist() == [128, 128]
    assert f.category_totals()[cat["stack"]].tolist() == [2048, 1024]
    # gaps: the hole below layer0/out#0 (element constraint with layer0/in#0 in element 0),
    # and the unused end of the non-interleaved region below the interleaved weights
    assert [tuple(g) for g in f.gap_list(0)] == [
        (0, "nonInterleaved", 3568, 16384, "elementConstraint"),
        (0, "nonInterleaved", 16448, 131072, "interleavedBoundary")]
    assert [tuple(g) for g in f.gap_list(1)] == [
        (1, "nonInterleaved", 2112, 131072, "interleavedBoundary")]


def small_report():
    # tile 0: alignment hole, region-constrained variable above the non-interleaved end,
    #         overflowed pair sharing bytes
    # tile 1: element-constraint hole, fragmentation hole
    # tile 2: a variable across the region boundary; a zero-size and an unallocated one
    rows = [  # var, tile, size, align, offset, category, class
        (0, 0, 100, 4, 0, "variable", 0),
        (1, 0, 100, 64, 128, "stack", 1),
        (2, 0, 100, 4, 512, "variable", 2),       # region constraint with var 0
        (3, 0, 100, 4, 1024, "stack", 3),         # overflowed
        (4, 0, 40, 4, 1040, "message", 4),        # overflowed, shares bytes with var 3
        (5, 1, 64, 4, 0, "variable", 0),
        (6, 1, 64, 4, 256, "variable", 1),        # element constraint with var 5
        (7, 1, 64, 4, 400, "message", 2),
        (8, 2, 80, 4, 480, "variable", 0),
        (9, 2, 0, 4, 8, "variable", 1),
        (10, 2, 50, 4, -1, "variable", -1),
    ]
    cols = list(zip(*rows))
    return Report.from_columns(
        target=SMALL, var_id=cols[0], tile=cols[1], size=cols[2], alignment=cols[3],
        offset=cols[4], category=cols[5], eq_class=cols[6], interference=[[], [], [], [], []],
        allocated=[True] * 10 + [False],
        element_constraints=[[], [], [], [], [], [6], [5], [], [], [], []],
        region_constraints=[[2], [], [0], [], [], [], [], [], [], [], []])


def test_small_figures_by_hand():
    f = memory_figures(small_report())
    assert by_tile(f, 0) == dict(
        interleaved=100, interleavedIncludingGaps=100, nonInterleaved=200,
        nonInterleavedIncludingGaps=228, overflowed=100, overflowedIncludingGaps=100,
        total=400, totalIncludingGaps=1124)
    assert by_tile(f, 1) == dict(
        interleaved=0, interleavedIncludingGaps=0, nonInterleaved=192,
        nonInterleavedIncludingGaps=464, overflowed=0, overflowedIncludingGaps=0, total=192,
        totalIncludingGaps=464)
    assert by_tile(f, 2) == dict(
        interleaved=48, interleavedIncludingGaps=48, nonInterleaved=32,
        nonInterleavedIncludingGaps=512, overflowed=0, overflowedIncludingGaps=0, total=80,
        totalIncludingGaps=560)
    assert [tuple(g)[2:] for g in f.gap_list(0)] == [
        (100, 128, "alignment"), (228, 512, "regionConstraint"), (612, 1024, "memoryEnd")]
    assert [tuple(g)[2:] for g in f.gap_list(1)] == [
        (64, 256, "elementConstraint"), (320, 400, "fragmentation")]
    assert [tuple(g)[2:] for g in f.gap_list(2)] == [(0, 480, "fragmentation")]
    ov = REGIONS.index("overflowed")
    cat = {name: i for i, name in enumerate(f.categories)}
    assert f.overlapped[cat["stack"], ov].tolist() == [100, 0, 0]
    assert f.overlapped[cat["message"], ov].tolist() == [40, 0, 0]
    assert f.after_overlapping[ov].tolist() == [100, 0, 0]
    assert f.non_overlapped[cat["stack"], REGIONS.index("nonInterleaved")].tolist() == [100, 0, 0]
    assert f.out_of_memory().tolist() == [0]
    text = summary_text(f)
    assert "1 tile(s) out of memory" in text
    assert "Maximum (Including Gaps): 1,124 (1.1 K) on tile 0" in text
    assert "Total After Overlapping:" in text and "100 B" in text


def test_alignment_cause_is_not_claimed_when_the_variable_could_start_lower():
    r = Report.from_columns(target=SMALL.with_tiles(1), var_id=[0, 1], tile=[0, 0],
                            size=[16, 16], alignment=[4, 8], offset=[0, 24],
                            category=["variable"] * 2, eq_class=[0, 1], interference=[[], []])
    assert [g.cause for g in memory_figures(r).gap_list(0)] == ["fragmentation"]
    r2 = r.with_offsets(np.array([0, 16]))   # 16 is the lowest 8-aligned start: no hole
    assert memory_figures(r2).gap_list(0) == []
    r3 = Report.from_columns(target=SMALL.with_tiles(1), var_id=[0, 1], tile=[0, 0],
                             size=[12, 16], alignment=[4, 8], offset=[0, 16],
                             category=["variable"] * 2, eq_class=[0, 1], interference=[[], []])
    assert [tuple(g)[2:] for g in memory_figures(r3).gap_list(0)] == [(12, 16, "alignment")]


# ---- an independent oracle: paint the bytes -------------------------------------------------
def painted(report, offsets=None):
    """Per tile, by brute force over bytes: coverage per region, highest end per region,
    per-variable overlap flags, union of overlapped variables per region, gap bytes."""
    t = report.target
    off = report.offset if offsets is None else offsets
    bounds = [0, t.interleaved_memory_start, t.tile_memory]
    out = []
    for tile in range(t.num_tiles):
        rows = [i for i in report.tile_rows(tile).tolist() if report.size[i] > 0]
        top = max([off[i] + report.size[i] for i in rows], default=0)
        count = np.zeros(max(top, t.tile_memory) + 1, np.int64)
        for i in rows:
            count[off[i]:off[i] + report.size[i]] += 1
        overlapped = [i for i in rows if count[off[i]:off[i] + report.size[i]].max() > 1]
        ocount = np.zeros_like(count)
        for i in overlapped:
            ocount[off[i]:off[i] + report.size[i]] += 1
        regions = [(bounds[0], bounds[1]), (bounds[1], bounds[2]), (bounds[2], len(count))]
        cover = [int((count[a:b] > 0).sum()) for a, b in regions]
        high = []
        for a, b in regions:
            used = np.flatnonzero(count[a:b] > 0)
            high.append(int(used[-1]) + 1 if len(used) else 0)
        after = [int((ocount[a:b] > 0).sum()) for a, b in regions]
        holes = int((count[:top] == 0).sum())
        out.append(dict(cover=cover, high=high, after=after, top=top, holes=holes,
                        overlapped=set(overlapped)))
    return out


@st.composite
def random_reports(draw):
    tiles = draw(st.integers(1, 3))
    target = Target(num_tiles=tiles, tile_memory=512, interleaved_memory_start=256,
                    memory_element_offsets=np.array([0, 128, 256, 384]))
    n = draw(st.integers(0, 14))
    tile = draw(st.lists(st.integers(0, tiles - 1), min_size=n, max_size=n))
    size = draw(st.lists(st.integers(0, 12).map(lambda x: 8 * x), min_size=n, max_size=n))
    align = draw(st.lists(st.sampled_from([1, 4, 8, 16, 64]), min_size=n, max_size=n))
    offset = draw(st.lists(st.integers(0, 84).map(lambda x: 8 * x), min_size=n, max_size=n))
    cat = draw(st.lists(st.integers(0, len(CATEGORIES) - 1), min_size=n, max_size=n))
    lists = [[j] for j in range(1, n)] + [[]] if n else []
    ec = [[(i + 1) % n] if i % 3 == 0 and n > 1 else [] for i in range(n)]
    ec = [sorted(set(ec[i]) | {j for j in range(n) if i in ec[j]}) for i in range(n)]
    return Report.from_columns(
        target=target, var_id=list(range(n)), tile=tile, size=size, alignment=align,
        offset=offset, category=np.asarray(cat, np.int16), eq_class=list(range(n)),
        interference=lists, element_constraints=ec)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_reports())
def test_figures_match_painted_bytes(r):
    f = memory_figures(r)
    nt = r.num_tiles
    total_gaps = f.gaps.bytes_by_region(nt).sum(axis=0)
    in_region = f.gaps.bytes_by_region(nt, boundary=False)
    for tile, p in enumerate(painted(r)):
        assert f.region_bytes[:, tile].tolist() == p["cover"]
        assert f.region_including_gaps[:, tile].tolist() == p["high"]
        assert f.after_overlapping[:, tile].tolist() == p["after"]
        assert int(f.highest_end[tile]) == p["top"]
        # invariants of the issue
        fig = by_tile(f, tile)
        assert fig["total"] == fig["interleaved"] + fig["nonInterleaved"] + fig["overflowed"]
        assert (f.non_overlapped_bytes()[:, tile] + f.after_overlapping[:, tile]).tolist() \
            == p["cover"]
        assert int(total_gaps[tile]) == p["holes"] == fig["totalIncludingGaps"] - fig["total"]
        assert (in_region[:, tile] == f.region_including_gaps[:, tile]
                - f.region_bytes[:, tile]).all()
        # overlapped bytes: summed per variable over the painted overlap set
        assert int(f.overlapped_bytes()[:, tile].sum()) == sum(int(r.size[i])
                                                               for i in p["overlapped"])
    g = f.gaps
    assert (g.end > g.start).all()
    assert np.isin(g.cause, np.arange(len(GAP_CAUSES))).all()


def test_invariants_on_generated_report():
    r = generate_report(preset="mk1", tiles=24, steps=40, pressure=1.1, seed=3)
    f = memory_figures(r)
    assert (f.non_overlapped_bytes() + f.after_overlapping == f.region_bytes).all()
    assert (f.gaps.bytes_by_region(r.num_tiles).sum(axis=0) == f.highest_end - f.total).all()
    assert (f.gaps.bytes_by_region(r.num_tiles, boundary=False)
            == f.region_including_gaps - f.region_bytes).all()
    assert (f.category_totals().sum(axis=0) >= f.total).all()


# ---- the JSON shape ------------------------------------------------------------------------
#: 000's byTile arrays
BY_TILE_KEYS = ("interleaved", "interleavedIncludingGaps", "nonInterleaved",
                "nonInterleavedIncludingGaps", "overflowed", "overflowedIncludingGaps", "total",
                "totalIncludingGaps")


class Pair(msgspec.Struct, forbid_unknown_fields=True):
    nonOverlapped: list[int]
    overlapped: list[int]


class CategoryEntry(msgspec.Struct, forbid_unknown_fields=True):
    interleaved: Pair
    nonInterleaved: Pair
    overflowed: Pair
    total: list[int]


ByTile = msgspec.defstruct("ByTile", [(k, list[int]) for k in BY_TILE_KEYS],
                           forbid_unknown_fields=True)


class After(msgspec.Struct, forbid_unknown_fields=True):
    interleaved: list[int]
    nonInterleaved: list[int]
    overflowed: list[int]
    total: list[int]


class Holes(msgspec.Struct, forbid_unknown_fields=True):
    tile: list[int]
    region: list[str]
    start: list[int]
    end: list[int]
    cause: list[str]


class GapsJson(msgspec.Struct, forbid_unknown_fields=True):
    byCause: dict[str, list[int]]
    holes: Holes | None = None


class Memory(msgspec.Struct, forbid_unknown_fields=True):
    byTile: ByTile
    byCategory: dict[str, CategoryEntry]
    afterOverlapping: After
    gaps: GapsJson


class Document(msgspec.Struct, forbid_unknown_fields=True):
    memory: Memory


def check_shape(d: dict, r: Report):
    doc = msgspec.json.decode(msgspec.json.encode(d), type=Document)
    nt = r.num_tiles
    for k in BY_TILE_KEYS:
        assert len(getattr(doc.memory.byTile, k)) == nt
    assert set(CATEGORIES) <= set(doc.memory.byCategory)
    for entry in doc.memory.byCategory.values():
        assert len(entry.total) == nt
        for reg in (entry.interleaved, entry.nonInterleaved, entry.overflowed):
            assert len(reg.nonOverlapped) == len(reg.overlapped) == nt
    assert set(doc.memory.gaps.byCause) == set(GAP_CAUSES)
    return doc


def test_json_shape_and_cli(tmp_path):
    r = small_report()
    path = tmp_path / "small.json"
    save_report(r, path)
    runner = CliRunner()
    res = runner.invoke(cli, ["report", str(path), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    doc = check_shape(d, r)
    assert doc.memory.byTile.totalIncludingGaps == [1124, 464, 560]
    assert set(doc.memory.gaps.holes.cause) == {"alignment", "regionConstraint", "memoryEnd",
                                               "elementConstraint", "fragmentation"}
    out = tmp_path / "memory.json"
    res = runner.invoke(cli, ["report", str(path), "-o", str(out), "--no-holes"])
    assert res.exit_code == 0 and out.exists()
    doc2 = check_shape(json.loads(out.read_text()), r)
    assert doc2.memory.gaps.holes is None and doc2.memory.byTile == doc.memory.byTile
    res = runner.invoke(cli, ["report", str(path)])
    assert res.exit_code == 0
    assert "Maximum (Excluding Gaps): 400 on tile 0" in res.output
    assert "Range (KB) Histogram (Excluding Gaps)" in res.output


def test_other_allocation_from_file(tmp_path):
    r = small_report()
    # tile 1 packed tightly: [0,64) [64,128) [128,192) breaks the element constraint, but the
    # figures do not judge validity
    off = r.offset.copy()
    off[[5, 6, 7]] = [0, 64, 128]
    save_report(r.with_offsets(off), tmp_path / "alloc.json")
    save_report(r, tmp_path / "r.json")
    got = offsets_from_file(r, tmp_path / "alloc.json")
    assert got[r.allocated].tolist() == off[r.allocated].tolist()
    f = memory_figures(r, got)
    assert by_tile(f, 1)["totalIncludingGaps"] == 192 and f.gap_list(1) == []
    res = CliRunner().invoke(cli, ["report", str(tmp_path / "r.json"), "--allocation",
                                   str(tmp_path / "alloc.json"), "--json"])
    assert json.loads(res.output)["memory"]["byTile"]["totalIncludingGaps"][1] == 192


def test_allocation_of_other_variables_is_a_clear_error(tmp_path):
    from tilemem.cli import main
    r = small_report()
    other = Report.from_columns(target=SMALL, var_id=[0], tile=[0], size=[8], alignment=[4],
                                offset=[0], category=["variable"], eq_class=[0],
                                interference=[[]])
    save_report(r, tmp_path / "r.json")
    save_report(other, tmp_path / "other.json")
    assert main(["report", str(tmp_path / "r.json"), "--allocation",
                 str(tmp_path / "other.json")]) == 2


def test_histogram_bins():
    edges, counts = tile_histogram(np.array([0, 1023, 1024, 40 * 1024]))
    assert edges[0] == 0 and counts.sum() == 4 and len(counts) <= 20
    assert (edges[1] - edges[0]) == 4 * 1024      # 41 KiB of range -> 4 KiB bins
    assert counts[0] == 3 and counts[-1] == 1


def test_unplaced_variable_is_a_clear_error():
    from tilemem.errors import ReportError
    r = small_report()
    off = r.offset.copy()
    off[6] = -1
    with pytest.raises(ReportError, match="unplaced") as e:
        memory_figures(r, off)
    assert e.value.var == 6 and e.value.tile == 1
    # limited to other tiles, the figures do not need that variable
    f = memory_figures(r, off, tiles=[0, 2])
    assert f.highest_end.tolist() == [1124, 0, 560]
