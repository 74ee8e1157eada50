"""``tilemem alloc``: output file, JSON, table, tile selection and bad input."""
import json

import numpy as np
import pytest

from pack_oracle import violations
from tilemem.cli import main
from tilemem.load import load_report, save_report
from tilemem.model import Report
from tilemem.model.target import Target


@pytest.fixture()
def report_path(tmp_path):
    # tile 0 out of memory as written (offsets past tileMemory) but fits when re-packed;
    # tile 1 fits as written; tile 2 cannot fit (200 bytes: larger than a region)
    t = Target(3, 256, 128, np.array([0, 64, 128, 192]))
    r = Report.from_columns(
        target=t, var_id=range(7), tile=[0, 0, 0, 1, 1, 2, 2],
        size=[64, 64, 64, 32, 32, 200, 100], alignment=[4] * 7,
        offset=[0, 200, 300, 0, 32, 0, 200], category=["variable"] * 7,
        eq_class=[0, 1, 2, 0, 0, 0, 0], interference=[[1], [0], []],
        always_live=[0, 0, 0, 0, 0, 1, 1],
        allocation_order=[[0, 1, 2], [3, 4], [5, 6]])
    path = tmp_path / "r.json"
    save_report(r, path)
    return path


def run(capsys, *args):
    code = main(["alloc", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_output_and_written_report(report_path, tmp_path, capsys):
    out = tmp_path / "out.capnp"
    code, stdout, _ = run(capsys, report_path, "--json", "--workers", "1", "-o", out,
                          "--method", "heuristic")
    assert code == 0
    d = json.loads(stdout)
    assert [t["tile"] for t in d["tiles"]] == [0, 1, 2]
    s = d["summary"]
    assert (s["tilesThatFitBefore"], s["tilesThatFitAfter"]) == (1, 2)
    assert d["tiles"][2]["overflowBytes"] == 200  # larger than either 128-byte region
    r2 = load_report(out)
    assert violations(r2, r2.offset) == []
    assert r2.offset[:3].max() + 64 <= 256          # tile 0 fits now


def test_tiles_option_and_replay(report_path, capsys):
    code, stdout, _ = run(capsys, report_path, "--json", "--tiles", "1", "--method", "replay",
                          "--workers", "1")
    assert code == 0
    d = json.loads(stdout)
    assert [t["tile"] for t in d["tiles"]] == [1]
    assert d["tiles"][0]["placedAsReport"] == 2 and d["tiles"][0]["status"] == "replay"


def test_table_names_status_and_summary(report_path, capsys):
    code, stdout, _ = run(capsys, report_path, "--workers", "1", "--time-limit", "2")
    assert code == 0
    # the first line wraps where the temporary folder's name (pytest-N) puts it
    words = " ".join(stdout.split())
    assert "optimal" in words and "tiles that fit: 1 of 3" in words and "2 after" in words
    # the program's verdict comes first, as tilemem oom's does: then the per-tile table
    assert words.index("tiles that fit") < words.index("allocation (auto)")


def test_bad_tiles_exit_2_with_one_line(report_path, capsys):
    code, stdout, err = run(capsys, report_path, "--tiles", "7")
    assert code == 2 and "tile 7" in err and err.count("\n") == 1


def test_missing_file_exit_2(tmp_path, capsys):
    code, _, err = run(capsys, tmp_path / "nope.json")
    assert code == 2 and "nope.json" in err
