"""The journal of finished tiles: round trip, torn and damaged tails, refusal of a journal of
another report or other settings. Expectations are computed independently (file sizes after
each append say where whole records end)."""
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tilemem.errors import ReportError
from tilemem.pack.run.journal import journal_path, open_journal, report_digest
from tilemem.pack.result import TileResult

SETTINGS = {"method": "auto", "timeLimit": 10.0, "seed": 0, "deterministic": True}


def result(tile, total=100, status="optimal"):
    return TileResult(tile=tile, method="exact", status=status, overflow_bytes=0,
                      total_including_gaps=total, bound=total - 4, bound_exact=True,
                      gap=0.04, seconds=0.25, num_vars=3, note="search end proven")


def write(out, tiles, report="r1", s=SETTINGS):
    """Journal ``tiles``; returns the file size after the header and after every record."""
    _, j = open_journal(out, report, s, resume=False)
    sizes = [journal_path(out).stat().st_size]
    for t in tiles:
        j.append(t, result(t, 100 + t), np.arange(t + 1, dtype=np.int64) * 8)
        sizes.append(journal_path(out).stat().st_size)
    j.close()
    return sizes


def test_round_trip_then_append_more(tmp_path):
    out = tmp_path / "alloc.json"
    write(out, [0, 5, 7])
    done, j = open_journal(out, "r1", SETTINGS)
    assert sorted(done) == [0, 5, 7] and j.dropped == 0
    for t in (0, 5, 7):
        res, off = done[t]
        assert res == result(t, 100 + t)
        assert off.dtype == np.int64 and off.tolist() == [8 * k for k in range(t + 1)]
    j.append(9, result(9), np.array([0, 1 << 40]), phase="final")
    j.append(11, result(11, status="heuristic"), np.array([4]), phase="heuristic")
    j.close()
    done, j = open_journal(out, "r1", SETTINGS)
    j.close()
    assert sorted(done) == [0, 5, 7, 9] and done[9][1].tolist() == [0, 1 << 40]
    assert list(j.records["heuristic"]) == [11]      # other phases are kept apart
    assert j.records["heuristic"][11][0].status == "heuristic"


@given(cut=st.integers(min_value=0, max_value=10_000), n=st.integers(1, 6))
@settings(max_examples=60, deadline=None)
def test_a_torn_tail_is_dropped_and_cut_off(tmp_path_factory, cut, n):
    out = tmp_path_factory.mktemp("j") / "alloc.json"
    sizes = write(out, list(range(n)))
    path = journal_path(out)
    cut = sizes[0] + cut % (sizes[-1] - sizes[0] + 1)   # keep the header whole
    with open(path, "r+b") as f:
        f.truncate(cut)
    whole = sum(1 for s in sizes[1:] if s <= cut)        # records that end before the cut
    done, j = open_journal(out, "r1", SETTINGS)
    assert sorted(done) == list(range(whole))
    assert j.dropped == cut - sizes[whole]
    j.append(99, result(99), np.array([0]))              # appends follow the last good record
    j.close()
    done, j = open_journal(out, "r1", SETTINGS)
    j.close()
    assert sorted(done) == list(range(whole)) + [99] and j.dropped == 0


def test_a_damaged_record_and_everything_after_it_are_dropped(tmp_path):
    out = tmp_path / "alloc.json"
    sizes = write(out, [1, 2, 3])
    path = journal_path(out)
    data = bytearray(path.read_bytes())
    data[sizes[2] - 3] ^= 0xFF                           # a byte inside record 2's payload
    path.write_bytes(bytes(data))
    done, j = open_journal(out, "r1", SETTINGS)
    j.close()
    assert sorted(done) == [1] and j.dropped == sizes[-1] - sizes[1]
    assert path.stat().st_size == sizes[1]


@pytest.mark.parametrize("report,s,words", [
    ("r2", SETTINGS, "another report"),
    ("r1", {**SETTINGS, "seed": 1}, "seed: 0 -> 1"),
    ("r1", {**SETTINGS, "method": "heuristic"}, "method: 'auto' -> 'heuristic'"),
])
def test_a_journal_of_another_report_or_settings_is_refused(tmp_path, report, s, words):
    out = tmp_path / "alloc.json"
    sizes = write(out, [0, 1])
    with pytest.raises(ReportError) as e:
        open_journal(out, report, s)
    msg = str(e.value)
    assert "\n" not in msg and words in msg and str(journal_path(out)) in msg
    assert journal_path(out).stat().st_size == sizes[-1]          # left as it was
    done, j = open_journal(out, report, s, resume=False)          # a fresh run replaces it
    j.close()
    assert done == {}
    done, j = open_journal(out, report, s)
    j.close()
    assert done == {}


def test_not_a_journal_is_refused(tmp_path):
    out = tmp_path / "alloc.json"
    journal_path(out).write_bytes(b"{}")
    with pytest.raises(ReportError, match="not a tilemem journal"):
        open_journal(out, "r1", SETTINGS)


def test_discard_removes_the_file(tmp_path):
    out = tmp_path / "alloc.json"
    _, j = open_journal(out, "r1", SETTINGS)
    j.append(0, result(0), np.array([0]))
    j.discard()
    assert not os.path.exists(journal_path(out))


def test_report_digest_is_of_the_content_not_the_format(tmp_path):
    from dataclasses import replace

    from tilemem.load import load_report, save_report
    from tilemem.generate import generate_report

    r = generate_report("mk1", tiles=4, steps=60, seed=1)
    save_report(r, tmp_path / "r.json")
    save_report(r, tmp_path / "r.capnp")
    d = report_digest(r)
    assert report_digest(load_report(tmp_path / "r.json")) == d
    assert report_digest(load_report(tmp_path / "r.capnp")) == d
    size = r.size.copy()
    size[7] += 4
    assert report_digest(replace(r, size=size)) != d
    assert report_digest(generate_report("mk1", tiles=4, steps=60, seed=2)) != d


def test_an_existing_journal_is_refused_before_the_report_is_read(tmp_path, capsys):
    """``alloc -o OUT`` with OUT.journal left by an interrupted run and no ``--resume``: one
    line naming the journal, exit 2, before the report is read (a Pod's takes a minute): a
    report that is not one at all is not even opened."""
    from tilemem.cli import main

    out = tmp_path / "out.capnp"
    journal_path(out).write_bytes(b"work a user ran for")
    broken = tmp_path / "broken.capnp"
    broken.write_bytes(b"\x00" * 64)
    assert main(["alloc", str(broken), "-o", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "out.capnp.journal" in lines[0] and "--resume" in lines[0]
    assert journal_path(out).read_bytes() == b"work a user ran for"
