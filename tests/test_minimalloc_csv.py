"""MiniMalloc CSV interop: parsing, bad input, import/export, round trips on shared instances."""
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tilemem.check import check_allocation
from tilemem.cli import cli, main
from tilemem.errors import ReportError
from tilemem.interop.minimalloc import (Buffers, format_minimalloc_csv, minimalloc_from_report,
                                        parse_minimalloc_csv, read_minimalloc_csv,
                                        report_from_minimalloc, write_minimalloc_csv)
from tilemem.liveness import timeline
from tilemem.load import load_report, save_report
from tilemem.model import Report

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "benchmarks" / "minimalloc"
SHARED_CSVS = sorted(SHARED.glob("*.csv")) if SHARED.is_dir() else []
needs_shared = pytest.mark.skipif(
    not SHARED_CSVS, reason=f"shared MiniMalloc instances not found in {SHARED.resolve()}")

SMALL = """id,lower,upper,size,offset
0,0,3,16,0
1,2,5,8,16
2,4,6,16,0
3,0,3,4,24
"""


def test_import_hand_computed():
    b = parse_minimalloc_csv(SMALL)
    r = report_from_minimalloc(b, capacity=64)
    t = r.target
    assert (t.num_tiles, t.tile_memory, t.interleaved_memory_start) == (1, 64, 64)
    assert t.memory_element_offsets.tolist() == [0]
    assert r.var_id.tolist() == [0, 1, 2, 3]
    # distinct lifetimes [0,3) [2,5) [4,6) -> 3 classes; buffers 0 and 3 share one
    assert r.num_classes == 3
    assert r.eq_class[0] == r.eq_class[3] != r.eq_class[1]
    assert r.class_steps.tolist() == [[0, 3], [2, 5], [4, 6]]
    assert r.interference.to_lists() == [[1], [0, 2], [1]]
    assert r.offset.tolist() == [0, 16, 0, 24]          # from the CSV
    assert r.names() == ["0", "1", "2", "3"]
    assert set(r.category_names()) == {"variable"}
    assert not r.in_interleaved_mem.any() and not r.always_live.any()
    assert check_allocation(r).ok


def test_import_without_offsets_packs_a_valid_allocation(tmp_path):
    text = "\n".join(SMALL.replace(",offset", "").splitlines()[i].rsplit(",", 1)[0]
                     if i else "id,lower,upper,size" for i in range(5)) + "\n"
    b = parse_minimalloc_csv(text)
    assert b.offset is None
    unplaced = report_from_minimalloc(b, capacity=64)
    assert (unplaced.offset == -1).all()      # the importer does not pack
    with pytest.raises(ReportError, match="negative offset"):
        check_allocation(unplaced)
    # `tilemem import-minimalloc` does: first fit in the allocation order
    (tmp_path / "small.csv").write_text(text)
    res = CliRunner().invoke(cli, ["import-minimalloc", str(tmp_path / "small.csv"),
                                   "--capacity", "64", "-o", str(tmp_path / "r.json")])
    assert res.exit_code == 0, res.output
    assert "offsets by first fit" in res.output
    r = load_report(tmp_path / "r.json")
    assert check_allocation(r).ok
    assert int((r.offset + r.size).max()) <= 64
    # largest first, earliest first among equals: the order written to allocationOrderByTile
    assert r.allocation_order.row(0).tolist() == [0, 2, 1, 3]


def test_aliases_inclusive_end_alignment_and_string_ids():
    b = parse_minimalloc_csv("buffer,start,end,size,alignment\nx,0,2,8,8\ny,1,1,4,1\n")
    assert b.ids == ["x", "y"]
    assert b.lower.tolist() == [0, 1] and b.upper.tolist() == [3, 2]   # end is inclusive
    r = report_from_minimalloc(b, 100)
    assert r.var_id.tolist() == [0, 1] and r.names() == ["x", "y"]
    assert r.alignment.tolist() == [8, 1]
    out = minimalloc_from_report(r, 0)
    assert format_minimalloc_csv(out, offsets=False).splitlines() == [
        "id,lower,upper,size,alignment", "0,0,3,8,8", "1,1,2,4,1"]


@pytest.mark.parametrize("text,where", [
    ("", "empty file"),
    ("id,lower,size\n0,0,4\n", "missing column(s) upper"),
    ("id,lower,upper,size,size\n0,0,1,4,4\n", "column 'size' appears twice"),
    ("id,lower,upper,size\n0,0,1\n", "line 2: 3 fields"),
    ("id,lower,upper,size\n0,0,1,4\n1,0,1,four\n", "line 3: size 'four' is not an integer"),
    ("id,lower,upper,size\n0,-1,1,4\n", "line 2: lower must not be negative"),
    ("id,lower,upper,size\n0,3,3,4\n", "line 2: upper 3 must be greater than lower 3"),
    ("id,lower,upper,size\n0,0,1,-4\n", "line 2: size must not be negative"),
    ("id,lower,upper,size,alignment\n0,0,1,4,3\n", "alignment must be a power of two"),
    ("id,lower,upper,size,offset\n0,0,1,4,-8\n", "offset must not be negative"),
    ("id,lower,upper,size\n7,0,1,4\n7,0,2,4\n", "line 3: id '7' already used on line 2"),
    ("id,lower,upper,size,gaps\n0,0,9,4,2-3\n", "gaps are not supported"),
])
def test_bad_csv_names_file_line_and_field(tmp_path, text, where):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(ReportError) as e:
        read_minimalloc_csv(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}: ") and where in msg, msg

    # the CLI prints one line naming the file, exits 2, no traceback
    assert main(["import-minimalloc", str(p), "--capacity", "64",
                 "-o", str(tmp_path / "r.json")]) == 2
    assert not (tmp_path / "r.json").exists()


def test_cli_error_is_one_line(tmp_path, capsys):
    p = tmp_path / "bad.csv"
    p.write_text("id,lower,upper,size\n0,0,x,8\n")
    assert main(["import-minimalloc", str(p), "--capacity", "64", "-o",
                 str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert err == f"tilemem: error: {p}: line 2: upper 'x' is not an integer (field upper)\n"


def test_capacity_must_be_positive():
    with pytest.raises(ReportError, match="capacity"):
        report_from_minimalloc(parse_minimalloc_csv(SMALL), 0)


def test_export_generated_tile_uses_class_steps():
    from tilemem.generate import generate_report

    r = generate_report("mk1", tiles=4, steps=40, seed=2)
    b = minimalloc_from_report(r, 2)
    rows = r.tile_rows(2)
    assert b.ids == [str(v) for v in r.var_id[rows].tolist()]
    assert np.array_equal(b.size, r.size[rows]) and np.array_equal(b.offset, r.offset[rows])
    steps = r.class_steps[r.eq_class[rows]]
    live = ~r.always_live[rows]
    assert np.array_equal(b.lower[live], steps[live, 0])
    assert np.array_equal(b.upper[live], steps[live, 1])
    whole = [r.class_steps[:, 0].min(), r.class_steps[:, 1].max()]
    assert np.all(b.lower[~live] == whole[0]) and np.all(b.upper[~live] == whole[1])
    # MiniMalloc sees lifetime overlap: every pair that conflicts in the report overlaps
    # in the exported lifetimes (a superset of the report's conflicts, never fewer)
    from tilemem.liveness import tile_conflicts

    i, j = tile_conflicts(r, 2).conflict_pairs()
    assert np.all(np.maximum(b.lower[i], b.lower[j]) < np.minimum(b.upper[i], b.upper[j]))


def test_export_without_lifetimes_is_a_clear_error():
    # a 4-cycle of classes (not an interval graph) and no equivalenceClassSteps
    r = Report.from_columns(var_id=[0, 1, 2, 3], tile=[0] * 4, size=[4] * 4, alignment=[4] * 4,
                            offset=[0, 4, 0, 4], category=["variable"] * 4,
                            eq_class=[0, 1, 2, 3], interference=[[1, 3], [2], [3], []])
    with pytest.raises(ReportError, match="equivalenceClassSteps"):
        minimalloc_from_report(r, 0)
    with pytest.raises(ReportError, match="outside"):
        minimalloc_from_report(r, 5000)


def test_export_recovers_lifetimes_of_an_interval_report(tmp_path):
    # no class steps, but a path of classes 0-1-2 is an interval graph
    r = Report.from_columns(var_id=[0, 1, 2], tile=[0] * 3, size=[4] * 3, alignment=[4] * 3,
                            offset=[0, 4, 0], category=["variable"] * 3, eq_class=[0, 1, 2],
                            interference=[[1], [2], []])
    with pytest.raises(ReportError, match="equivalenceClassSteps"):
        minimalloc_from_report(r, 0)            # the export itself recovers no lifetimes
    b = minimalloc_from_report(r, 0, lifetimes=timeline(r, 0))
    over = np.maximum(b.lower[:, None], b.lower) < np.minimum(b.upper[:, None], b.upper)
    np.fill_diagonal(over, False)
    assert over.tolist() == [[False, True, False], [True, False, True], [False, True, False]]
    # `tilemem export-minimalloc` recovers them the same way
    save_report(r, tmp_path / "r.json")
    res = CliRunner().invoke(cli, ["export-minimalloc", str(tmp_path / "r.json"), "--tile", "0",
                                   "-o", str(tmp_path / "r.csv")])
    assert res.exit_code == 0, res.output
    back = read_minimalloc_csv(tmp_path / "r.csv")
    assert back.lower.tolist() == b.lower.tolist() and back.upper.tolist() == b.upper.tolist()


def test_write_is_atomic_and_round_trips(tmp_path):
    b = parse_minimalloc_csv(SMALL)
    p = tmp_path / "out.csv"
    write_minimalloc_csv(b, p)
    assert read_minimalloc_csv(p) == b
    assert [x.name for x in tmp_path.iterdir()] == ["out.csv"]   # no temporary left behind
    with pytest.raises(OSError):
        write_minimalloc_csv(b, tmp_path / "missing" / "out.csv")


@needs_shared
@pytest.mark.parametrize("path", SHARED_CSVS, ids=lambda p: p.name)
def test_round_trip_of_shared_instances(tmp_path, path):
    capacity = int(path.name.split(".")[1])
    src = read_minimalloc_csv(path)
    runner = CliRunner()
    rep = tmp_path / "r.capnp"
    res = runner.invoke(cli, ["import-minimalloc", str(path), "--capacity", str(capacity),
                              "-o", str(rep)])
    assert res.exit_code == 0, res.output
    r = load_report(rep)
    assert r.target.tile_memory == capacity and r.num_tiles == 1
    assert check_allocation(r).ok             # first-fit offsets are valid (may overflow)
    out = tmp_path / "back.csv"
    res = runner.invoke(cli, ["export-minimalloc", str(rep), "--tile", "0", "--ids", "name",
                              "-o", str(out)])
    assert res.exit_code == 0, res.output
    back = read_minimalloc_csv(out)
    # the same buffers (ids, lifetimes, sizes), in var-id order
    order, src_order = np.argsort(back.ids), np.argsort(src.ids)
    assert [back.ids[i] for i in order] == [src.ids[i] for i in src_order]
    for col in ("lower", "upper", "size"):
        assert np.array_equal(getattr(back, col)[order], getattr(src, col)[src_order]), col
    # with offsets: the CSV's offsets survive import and export --offsets unchanged
    by_name = dict(zip(r.names(), r.offset.tolist()))
    with_off = Buffers(src.ids, src.lower, src.upper, src.size, None,
                       np.array([by_name[i] for i in src.ids], np.int64))
    p2 = tmp_path / "with_offsets.csv"
    write_minimalloc_csv(with_off, p2)
    r2 = report_from_minimalloc(read_minimalloc_csv(p2), capacity)
    back2 = minimalloc_from_report(r2, 0, ids="name")
    assert format_minimalloc_csv(back2) == p2.read_text()
