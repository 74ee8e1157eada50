"""Each class of hostile input and each "nothing lost" rule of issue 13, one test each: the
exact one-line message (or the repair and its warning), checked against what the input holds."""
from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from cli_in_process import error_lines, run_cli
from tilemem.errors import ReportError, ReportWarning
from tilemem.load import (check_output, capnpio, load_report, remove_stale_temporaries,
                          report_format, save_report)
from tilemem.load.validate import MAX_CATEGORIES, MAX_TILES

SEED_PATH = Path(__file__).parents[1] / "examples" / "seed.json"
SEED_TEXT = SEED_PATH.read_text()
SEED = json.loads(SEED_TEXT)


def run(argv) -> tuple[int, list[str], str]:
    rc, out, err = run_cli(argv)
    return rc, error_lines(err), out


def one_error(argv) -> str:
    rc, lines, _ = run(argv)
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("tilemem: error: "), (rc, lines)
    return lines[0]


def load_error(path) -> ReportError:
    with pytest.raises(ReportError) as e:
        load_report(path)
    assert str(path) in str(e.value)
    return e.value


def write(tmp_path, data, name="r.json") -> Path:
    p = tmp_path / name
    p.write_bytes(data if isinstance(data, bytes) else
                  (data if isinstance(data, str) else json.dumps(data)).encode())
    return p


# ---- format by content ----------------------------------------------------------------------

def test_format_is_decided_by_content_not_name(tmp_path):
    capnp_bytes = tmp_path / "r.capnp"
    save_report(load_report(SEED_PATH), capnp_bytes)
    as_txt = write(tmp_path, SEED_TEXT, "report.txt")
    as_json = write(tmp_path, capnp_bytes.read_bytes(), "report.json")
    assert load_report(as_txt) == load_report(as_json) == load_report(SEED_PATH)


def test_bom_and_leading_whitespace_are_json(tmp_path):
    assert load_report(write(tmp_path, b"\xef\xbb\xbf \n" + SEED_TEXT.encode())).num_vars == 17
    assert report_format(b"\t\r\n {") == "json"


def test_utf16_is_named(tmp_path):
    e = load_error(write(tmp_path, SEED_TEXT.encode("utf-16")))
    assert "UTF-16" in str(e)


def test_truncated_capnp_is_told_in_plain_words(tmp_path):
    p = tmp_path / "r.capnp"
    save_report(load_report(SEED_PATH), p)
    data = p.read_bytes()
    msg = str(load_error(write(tmp_path, data[: len(data) // 2], "t.capnp")))
    assert f"truncated: its header announces {len(data):,} bytes, the file has " \
           f"{len(data) // 2:,}" in msg
    assert "c++" not in msg and "capnp/" not in msg


def test_neither_format(tmp_path):
    assert "neither JSON" in str(load_error(write(tmp_path, b"id,lower,upper\n0,1,2\n")))


# ---- paths that are not regular files -------------------------------------------------------

def test_folder_and_fifo_are_refused_before_opening(tmp_path):
    folder = tmp_path / "dir.json"
    folder.mkdir()
    assert "is a folder" in str(load_error(folder))
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "pipe.json"
        os.mkfifo(fifo)  # no writer: open() would block
        assert "named pipe" in str(load_error(fifo))
    assert "no such file" in str(load_error(tmp_path / "missing.json"))


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True,
                    reason="root reads every file; the permission check cannot fail")
def test_unreadable_file(tmp_path):
    p = write(tmp_path, SEED_TEXT)
    p.chmod(0)
    assert "permission denied" in one_error(["info", p]).lower()


# ---- JSON classes -----------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["vars", "interference", "unknown key", "info", "unclosed"])
def test_deep_nesting_is_one_line_naming_the_byte(tmp_path, where):
    deep = "[" * 5000 + "]" * 5000
    if where == "vars":
        text = SEED_TEXT.replace('"vars": [', '"vars": [' + deep + ",", 1)
    elif where == "interference":
        text = SEED_TEXT.replace('"equivalenceClassInterference": [',
                                 '"equivalenceClassInterference": [' + deep + ",", 1)
    elif where == "unknown key":
        text = SEED_TEXT.rstrip()[:-1] + ', "extra": ' + deep + "}"
    elif where == "info":
        text = SEED_TEXT.replace('"info": {', '"info": {"x": ' + '{"a":' * 5000 + "1"
                                 + "}" * 5000 + ",", 1)
    else:
        text = SEED_TEXT.rstrip()[:-1] + ', "extra": ' + "[" * 5000
    p = write(tmp_path, text)
    msg = one_error(["info", p])
    at = int(msg.split("at byte ")[1].split(" ")[0].replace(",", ""))
    # the byte named is the bracket that opens level 65
    assert text.encode()[at:at + 1] in (b"[", b"{") and "nested deeper than 64 levels" in msg


@pytest.mark.parametrize("field, value", [("elementConstraints", [2**64]),
                                          ("regionConstraints", [-(2**63) - 1]),
                                          ("offset", 2**63), ("sizeBytes", -(2**64))])
def test_integers_outside_int64_name_field_and_var(tmp_path, field, value):
    d = copy.deepcopy(SEED)
    d["vars"][3]["info"][field] = value
    e = load_error(write(tmp_path, d))
    assert "outside the 64-bit range" in e.message
    assert e.field.startswith(f"vars[3].info.{field}") and e.var == SEED["vars"][3]["var"]


@pytest.mark.parametrize("extra", [0, 1])
def test_categories_up_to_the_int16_limit(tmp_path, extra):
    """Codes are int16: the 25 known categories and then new names in order of appearance may
    take 32,768 codes; one more is refused, naming the var that brings it."""
    from tilemem.model import CATEGORIES

    d = copy.deepcopy(SEED)
    template = d["vars"][0]
    base = max(v["var"] for v in d["vars"]) + 1
    for k in range(MAX_CATEGORIES - len(CATEGORIES) + extra):
        v = copy.deepcopy(template)
        v["var"], v["info"]["category"] = base + k, f"c{k}"
        d["vars"].append(v)
    p = write(tmp_path, d)
    if not extra:
        r = load_report(p)
        assert len(r.categories) == MAX_CATEGORIES and r.category.max() == MAX_CATEGORIES - 1
        return
    e = load_error(p)
    last = base + MAX_CATEGORIES - len(CATEGORIES)
    assert "more than 32,768 categories" in e.message and e.var == last
    assert e.field == f"vars[{len(d['vars']) - 1}].info.category"


def test_invalid_utf8_names_are_kept_with_replacement_and_a_warning(tmp_path):
    data = SEED_TEXT.encode().replace(b'"v1#0"', b'"v1\xff#0"', 1)
    p = write(tmp_path, data)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = load_report(p)
    assert r.name(0) == "v1\ufffd#0"
    (w,) = [w for w in caught if issubclass(w.category, ReportWarning)]
    assert str(p) in str(w.message) and "var 0" in str(w.message)
    rc, lines, _ = run(["info", p])
    assert rc == 0 and len(lines) == 1 and lines[0].startswith("tilemem: warning: ")
    out = tmp_path / "r.capnp"  # the repaired names survive a conversion
    assert run(["convert", p, out])[0] == 0 and load_report(out).name(0) == "v1\ufffd#0"


def test_report_claiming_too_many_tiles(tmp_path):
    d = copy.deepcopy(SEED)
    d["numTiles"] = 1 << 24
    assert "numTiles must be a tile count from 1 to 262,144" in one_error(["report", "--json",
                                                                           write(tmp_path, d)])


def test_figures_follow_the_data_not_the_category_table(tmp_path):
    """A report at the tile limit with a few variables: the category arrays hold only the
    categories in use, and the JSON still lists every category."""
    from tilemem.figures.memory import memory_figures

    d = copy.deepcopy(SEED)
    d["numTiles"] = MAX_TILES
    r = load_report(write(tmp_path, d))
    f = memory_figures(r)
    used = {r.categories[c] for c in np.unique(r.category[r.allocated & (r.size > 0)])}
    assert set(f.categories) == used and f.non_overlapped.shape == (len(used), 3, MAX_TILES)
    doc = f.to_json(holes=False).memory
    assert set(r.categories) <= set(doc.by_category)
    assert all(len(doc.by_category[c].total) == MAX_TILES for c in r.categories)


# ---- capnp columns --------------------------------------------------------------------------

def _damaged_capnp(tmp_path, mutate) -> Path:
    p = tmp_path / "r.capnp"
    save_report(load_report(SEED_PATH), p)
    m = capnpio.schema().Report.from_bytes(p.read_bytes()).__enter__().as_builder()
    mutate(m)
    out = tmp_path / "bad.capnp"
    out.write_bytes(m.to_bytes())
    return out


def _odd_steps(m):
    m.hasEquivalenceClassSteps = True
    c = m.init("equivalenceClassSteps")
    c.dtype, c.length = "<i8", 3
    c.init("chunks", 1)[0].data = np.arange(3, dtype="<i8").tobytes()


def _big_element_offset(m):
    offsets = list(m.targetMemoryInfo.memoryElementOffsets)
    offsets[1] = 2**64 - 1
    m.targetMemoryInfo.memoryElementOffsets = offsets


def _bad_name_bytes(m):
    chunk = m.nameBlob.chunks[0]
    data = bytearray(chunk.data)
    data[0] = 0xFF
    chunk.data = bytes(data)


@pytest.mark.parametrize("mutate, expected", [
    (lambda m: m.tile.init("chunks", 1), "column holds 0 bytes, but its length says 17 values "
                                         "of 8 bytes (field tile)"),
    (_odd_steps, "holds 3 numbers: not [start, end) pairs (field equivalenceClassSteps)"),
    (lambda m: setattr(m, "hasEquivalenceClassSteps", True),
     "column is missing (field equivalenceClassSteps)"),
    (lambda m: setattr(m.sizeBytes, "dtype", "<f8"),
     "column has dtype '<f8', expected '<i8' (field sizeBytes.dtype)"),
    (lambda m: setattr(m.offset, "length", 2**64 - 1), "field offset"),
    (_big_element_offset, "integer outside the 64-bit range (field "
                          "targetMemoryInfo.memoryElementOffsets[1])"),
    (lambda m: m.init("elementConstraints"), "column is missing (field "
                                             "elementConstraints.indptr)"),
])
def test_capnp_structure_is_validated_before_use(tmp_path, mutate, expected):
    assert expected in str(load_error(_damaged_capnp(tmp_path, mutate)))


def test_capnp_names_that_are_not_utf8_are_repaired(tmp_path):
    p = _damaged_capnp(tmp_path, _bad_name_bytes)
    with pytest.warns(ReportWarning, match="1 var name"):
        r = load_report(p)
    assert r.name(0).startswith("\ufffd")


# ---- nothing to analyse ---------------------------------------------------------------------

@pytest.mark.parametrize("command", [["info"], ["liveness"], ["report"], ["check"],
                                     ["alloc", "--workers", "1"], ["oom"],
                                     ["plot", "--tile", "0", "-o", "{tmp}/m.png"],
                                     ["convert", "{tmp}/out.capnp"]])
@pytest.mark.parametrize("unallocated", [False, True])
def test_no_allocated_variables_is_accepted_and_said(tmp_path, command, unallocated):
    d = copy.deepcopy(SEED)
    d["vars"] = [{"var": v["var"], "info": {"allocated": False}} for v in d["vars"]] \
        if unallocated else []
    d["allocationOrderByTile"] = []
    p = write(tmp_path, d)
    argv = [command[0], p] + [a.replace("{tmp}", str(tmp_path)) for a in command[1:]]
    rc, lines, out = run(argv)
    assert rc == 0 and not lines, lines
    assert "nothing to analyse: the report has no allocated variables" in " ".join(out.split())


# ---- outputs and options --------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["alloc", SEED_PATH, "-o", "{missing}/a.json"],
    ["convert", SEED_PATH, "{missing}/a.capnp"],
    ["report", SEED_PATH, "-o", "{missing}/m.json"],
    ["plot", SEED_PATH, "--tile", "0", "-o", "{missing}/m.png"],
    ["plot-tiles", SEED_PATH, "-o", "{missing}/t.png"],
    ["generate", "--tiles", "2", "-o", "{missing}/g.json"],
    ["export-minimalloc", SEED_PATH, "--tile", "0", "-o", "{missing}/e.csv"],
    ["import-minimalloc", SEED_PATH, "--capacity", "100", "-o", "{missing}/i.json"],
])
def test_output_into_a_missing_folder_fails_before_any_work(tmp_path, argv, monkeypatch):
    import importlib

    def no_work(*a, **k):
        raise AssertionError("the command started work before checking its output")

    # the stage module (``tilemem.load`` as an attribute is the API's function)
    monkeypatch.setattr(importlib.import_module("tilemem.load"), "load_report", no_work)
    monkeypatch.setattr("tilemem.generate.generate_report", no_work)
    msg = one_error([str(a).replace("{missing}", str(tmp_path / "missing")) for a in argv])
    assert "does not exist" in msg


@pytest.mark.parametrize("argv, expected", [
    (["alloc", SEED_PATH, "-o", "{tmp}/a.txt"], "unknown output format '.txt': use .json or "
                                                ".capnp"),
    (["report", SEED_PATH, "-o", "{tmp}/m.csv"], "use .json"),
    (["export-minimalloc", SEED_PATH, "--tile", "0", "-o", "{tmp}/e.json"], "use .csv"),
    (["convert", SEED_PATH, "{tmp}"], "is a folder"),
])
def test_output_extension_and_folder(tmp_path, argv, expected):
    assert expected in one_error([str(a).replace("{tmp}", str(tmp_path)) for a in argv])


def test_stale_temporaries_of_dead_runs_are_removed(tmp_path):
    out = tmp_path / "a.json"
    host = socket.gethostname().split(".")[0]
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale = tmp_path / f".a.json.{host}.{dead}.x1y2z3.tmp"
    live = tmp_path / f".a.json.{host}.{os.getppid()}.x1y2z4.tmp"
    foreign = tmp_path / f".a.json.elsewhere.{dead}.x1y2z5.tmp"
    other = tmp_path / f".b.json.{host}.{dead}.x1y2z6.tmp"
    for p in (stale, live, foreign, other):
        p.write_text("partial")
    assert remove_stale_temporaries(out) == [stale]
    assert live.exists() and foreign.exists() and other.exists()
    stale.write_text("partial")
    assert run(["convert", SEED_PATH, out])[0] == 0 and not stale.exists() and out.exists()


def test_check_output_accepts_a_writable_place(tmp_path):
    assert check_output(tmp_path / "x.json", (".json",)) == tmp_path / "x.json"


@pytest.mark.parametrize("argv", [
    ["oom", SEED_PATH, "--method", "bogus"],
    ["plot", SEED_PATH, "--tile", "0", "--method", "bogus"],
    ["liveness", SEED_PATH, "--time-limit", "0"],
    ["oom", SEED_PATH, "--time-limit", "-1"],
    ["plot", SEED_PATH, "--tile", "0", "--time-limit", "0"],
    ["alloc", SEED_PATH, "--time-limit", "0"],
    ["alloc"],
    ["no-such-command"],
    ["info", SEED_PATH, "--no-such-option"],
])
def test_usage_errors_are_one_line(argv):
    msg = one_error(argv)
    assert "(see 'tilemem" in msg and "Usage:" not in msg


def test_bare_tilemem_prints_help():
    rc, lines, out = run([])
    assert rc == 0 and not lines and "Commands:" in out


# ---- the program-level commands on every kind of report -------------------------------------

def _kind_of_report(kind: str) -> dict:
    """The seed (2 tiles, 17 variables) cut down to: no variable, every variable unallocated,
    one variable (layer0/in#0, 64 B on tile 0), or a partial dump (tile 0's variables only)."""
    d = copy.deepcopy(SEED)
    d["allocationOrderByTile"] = []
    if kind == "empty":
        d["vars"] = []
    elif kind == "unallocated":
        d["vars"] = [{"var": v["var"], "info": {"allocated": False}} for v in d["vars"]]
    elif kind == "one":
        d["vars"] = [v for v in d["vars"] if v["var"] == 1242]
    elif kind == "partial":
        d["vars"] = [v for v in d["vars"] if v["info"]["tile"] == 0]
    kept = {v["var"] for v in d["vars"]}
    for v in d["vars"]:   # constraints name only variables still in the report
        for key in ("elementConstraints", "regionConstraints"):
            if key in v["info"]:
                v["info"][key] = [x for x in v["info"][key] if x in kept]
    return d


def _kind_path(tmp_path, kind: str, fmt: str) -> Path:
    p = write(tmp_path, _kind_of_report(kind), f"{kind}.json")
    if fmt == "capnp":
        save_report(load_report(p), tmp_path / f"{kind}.capnp")
        p = tmp_path / f"{kind}.capnp"
    return p


KINDS = ["empty", "unallocated", "one", "partial"]


def _seed_bytes(tiles=(0, 1)) -> int:
    return sum(v["info"]["sizeBytes"] for v in SEED["vars"] if v["info"]["tile"] in tiles)


@pytest.mark.parametrize("fmt", ["json", "capnp"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("argv", [["oom"], ["oom", "--json"],
                                  ["what-if", "--scale", "*=2"],
                                  ["what-if", "--scale", "*=2", "--json"],
                                  ["what-if", "--offload", "*", "--json"],
                                  ["diff", SEED_PATH], ["diff", SEED_PATH, "--json"]],
                         ids=lambda a: " ".join(map(str, a)) if isinstance(a, list) else a)
def test_program_commands_answer_on_every_kind_of_report(tmp_path, kind, fmt, argv):
    p = _kind_path(tmp_path, kind, fmt)
    rc, lines, out = run([argv[0], p, *argv[1:]])
    # the only line on stderr: a what-if pattern that matches nothing allocated
    assert rc == 0 and all("the pattern matches no allocated variable" in x for x in lines), \
        (rc, lines)
    nothing = kind in ("empty", "unallocated")
    assert bool(lines) == (nothing and argv[0] == "what-if"), lines
    if "--json" not in argv:
        text = " ".join(out.split())
        assert ("nothing to analyse" in text) == (nothing and argv[0] != "diff"), text
        return
    doc = json.loads(out)
    if argv[0] == "diff":
        after = {"empty": 0, "unallocated": 0, "one": 64, "partial": _seed_bytes((0,))}[kind]
        assert (doc["total"]["before"], doc["total"]["after"]) == (after, _seed_bytes())
    elif argv[0] == "oom":
        assert doc["summary"]["outOfMemory"] == 0 and doc["tiles"] == []
        assert doc["summary"]["tilesInDump"] == {"empty": 0, "unallocated": 0, "one": 1,
                                                 "partial": 1}[kind]
    elif "--scale" in argv:
        edit = doc["summary"]["edits"][0]
        before = {"empty": 0, "unallocated": 0, "one": 64, "partial": _seed_bytes((0,))}[kind]
        assert (edit["bytesBefore"], edit["bytesAfter"]) == (before, 2 * before)
    else:   # everything offloaded: nothing is left to be out of memory
        assert doc["summary"]["outOfMemory"] == 0


@pytest.mark.parametrize("kind", KINDS)
def test_the_api_answers_on_every_kind_of_report(tmp_path, kind):
    import tilemem

    r = tilemem.load(_kind_path(tmp_path, kind, "json"))
    assert tilemem.diagnose(r).summary.out_of_memory == 0
    w = tilemem.what_if(r, tilemem.Edits(offload=["*"]))
    assert not w.report.allocated.any() and w.summary.out_of_memory == 0
    assert tilemem.diff(tilemem.load(SEED_PATH), r).comparison.total.before == _seed_bytes()
    assert len(tilemem.liveness(r).tiles) == {"empty": 0, "unallocated": 0}.get(kind, 1)


@pytest.mark.parametrize("fmt", ["json", "capnp"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("ipus", [None, 2])
def test_split_answers_or_refuses_in_one_line_on_every_kind_of_report(tmp_path, kind, fmt,
                                                                      ipus):
    """``tilemem split`` on an empty, unallocated-only, one-variable or partial report: a
    report with nothing allocated is refused in one line (nothing to split); the others are
    answered, or refused in one line where they hold fewer layers than IPUs asked."""
    p = _kind_path(tmp_path, kind, fmt)
    rc, lines, out = run(["split", p, "--json"] + ([] if ipus is None else ["--ipus", ipus]))
    if kind in ("empty", "unallocated"):
        assert rc == 2 and len(lines) == 1 and lines[0].startswith("tilemem: error: ")
        assert "nothing to analyse" in lines[0], lines
        return
    if rc == 2:
        assert len(lines) == 1 and lines[0].startswith("tilemem: error: ") and ipus == 2, lines
        assert "--ipus 2" in lines[0], lines
        return
    assert rc == 0 and not lines, (rc, lines)
    doc = json.loads(out)
    assert doc["ipus"] == len(doc["stages"]) >= 1
    assert ipus is None or doc["ipus"] == ipus
