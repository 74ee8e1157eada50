"""The public API (``tilemem.__all__``, docs/api.md): what each name answers, checked against
hand-computed cases and the independent checker; that it stays (a name leaves only through a
deprecation); that the CLI is a layer over it; and that bad input raises the one exception
the CLI prints, with the same message."""
from __future__ import annotations

import copy
import importlib
from dataclasses import replace
import io
import json
from pathlib import Path

import numpy as np
import pytest

import tilemem
from cli_in_process import error_lines, run_cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "mk1-small.json"
SEED_PATH = ROOT / "examples" / "seed.json"
SEED = json.loads(SEED_PATH.read_text())

#: The API of this version. A name leaves ``tilemem.__all__`` only into ``_DEPRECATED``.
PUBLISHED = ["load", "Report", "liveness", "check", "diagnose", "what_if", "diff", "allocate",
             "report", "plot", "ReportError", "Progress", "Liveness", "Check", "Figures",
             "Diagnosis", "WhatIf", "Diff", "Allocation", "split", "Split", "Packing", "Output",
             "Detail", "Edits", "Levers", "ReportSource", "configure", "Config", "ConfigQuery"]
#: One tile's heuristic on one process: the tests' quick allocation.
HEURISTIC = tilemem.Packing(method="heuristic", workers=1)


def run(argv) -> tuple[int, list[str], str]:
    rc, out, err = run_cli(argv)
    return rc, error_lines(err), out


@pytest.fixture(scope="module")
def mk1():
    return tilemem.load(EXAMPLE)


# ---- the names ------------------------------------------------------------------------------

def test_no_published_name_leaves_without_a_deprecation():
    gone = [n for n in PUBLISHED if n not in tilemem.__all__ and n not in tilemem._DEPRECATED]
    assert not gone, f"left tilemem.__all__ without a deprecation: {gone}"


@pytest.mark.parametrize("name", tilemem.__all__)
def test_every_public_name_resolves_and_is_documented(name):
    obj = getattr(tilemem, name)
    doc = obj.__doc__ or ""
    assert doc.strip(), name
    if callable(obj) and not isinstance(obj, type):
        assert "Parameters" in doc and "Returns" in doc and "Example" in doc, name
    assert f"`tilemem.{name}" in (ROOT / "docs" / "api.md").read_text(), \
        f"docs/api.md does not list tilemem.{name}"


def test_a_deprecated_name_still_answers_and_warns(monkeypatch):
    monkeypatch.setattr(tilemem, "__all__", [n for n in tilemem.__all__ if n != "diff"])
    monkeypatch.setitem(tilemem._DEPRECATED, "diff", ("tilemem.compare", "0.3"))
    with pytest.warns(DeprecationWarning, match="tilemem.diff is deprecated.*0.3"):
        assert tilemem.diff is tilemem.api.diff


def test_the_stage_modules_do_not_shadow_the_functions():
    import tilemem.check  # noqa: F401  (binds nothing on the package)
    import tilemem.load  # noqa: F401

    assert callable(tilemem.load) and callable(tilemem.check) and callable(tilemem.liveness)
    from tilemem.load import load_report   # the stage, as imports give it
    assert load_report(SEED_PATH) == tilemem.load(SEED_PATH)


# ---- what the functions answer --------------------------------------------------------------

def _three_vars():
    from tilemem.model import Report

    # tile 0: a (8 B) and b (16 B) live together, c (32 B) in a class of its own; d unallocated
    return tilemem.Report.of(Report.from_columns(
        var_id=[10, 11, 12, 13], tile=[0, 0, 0, -1], size=[8, 16, 32, 0],
        alignment=[4, 8, 4, 4], offset=[0, 8, 24, -1],
        category=["variable", "stack", "variable", "variable"], eq_class=[0, 1, 2, -1],
        interference=[[1], [0], []], names=["a#0", "b#0", "c#0", "d"],
        allocated=[True, True, True, False]))


def test_variables_are_the_columns():
    v = _three_vars().variables()
    assert v["var_id"].tolist() == [10, 11, 12, 13]
    assert v["name"].tolist() == ["a#0", "b#0", "c#0", "d"]
    assert v["category"].astype(str).tolist() == ["variable", "stack", "variable", "variable"]
    assert v["allocated"].tolist() == [True, True, True, False]
    sub = _three_vars().variables([2, 0])
    assert sub.index.tolist() == [2, 0] and sub["size"].tolist() == [32, 8]


def test_variables_without_pyarrow_are_the_same(monkeypatch):
    with_arrow = _three_vars().variables()
    monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)
    without = _three_vars().variables()
    assert without["name"].tolist() == with_arrow["name"].tolist()


def test_arrow_shares_the_numeric_columns():
    r = _three_vars()
    t = r.to_arrow()
    assert t.column("size").chunks[0].buffers()[1].address == r.size.ctypes.data
    assert t.column("name").to_pylist() == ["a#0", "b#0", "c#0", "d"]


def test_without_pandas_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pandas", None)
    with pytest.raises(tilemem.ReportError, match=r"pip install 'tilemem\[tables\]'"):
        _three_vars().variables()


def test_liveness_and_its_peak():
    r = _three_vars()
    live = tilemem.liveness(r)
    # a and b interfere (24 B together); c alone is 32 B: the peak is c
    assert live.to_frame()[["tile", "max_live_bytes", "exact"]].values.tolist() == [[0, 32, True]]
    assert live.worst_tile() == 0 and live.peak()["name"].tolist() == ["c#0"]


def test_check_finds_an_overlap_by_tile():
    r = _three_vars()
    assert tilemem.check(r).ok
    off = r.offset.copy()
    off[1] = 0    # b onto a, which it interferes with
    c = tilemem.check(r, off)
    assert not c.ok and c.to_frame()["violations"].tolist()[0] == 1
    assert c.violations()["rule"].tolist() == ["overlap"]


def test_report_figures_by_tile():
    f = tilemem.report(_three_vars()).to_frame()
    # a at 0, b at 8 (16 B), c at 24 (32 B): the highest end is 56
    assert f.loc[0, "totalIncludingGaps"] == 56 and len(f) == _three_vars().num_tiles


def test_what_if_scale_and_offload(mk1):
    a = tilemem.what_if(mk1, tilemem.Edits(scale={"*/activations": 2}))
    b = tilemem.what_if(mk1, tilemem.Edits(scale=["*/activations=2"]))
    assert a.to_json()["summary"] == b.to_json()["summary"]
    gone = tilemem.what_if(mk1, tilemem.Edits(offload="*"))
    # nothing left allocated: no tile is in question, none needs less data
    assert not gone.report.allocated.any() and gone.summary.out_of_memory == 0
    assert gone.tiles == [] and gone.summary.verdicts["reduceData"] == 0


def test_diagnose_counts_the_tiles_the_figures_say_are_out_of_memory(mk1):
    d = tilemem.diagnose(mk1, repack=False)
    oom = tilemem.report(mk1).out_of_memory().tolist()
    assert d.summary.out_of_memory == len(oom) and sorted(d.to_frame()["tile"]) == oom
    assert "tiles out of memory" in d._repr_html_()


def test_allocate_one_tile_the_checker_accepts(mk1):
    seen = []
    a = tilemem.allocate(mk1, tiles=[2], packing=HEURISTIC, progress=seen.append)
    assert [e.tile for e in seen] == [2] and seen[-1].stage == "allocate"
    rows = mk1.tile_rows(2)
    assert tilemem.check(mk1, a).ok and (tilemem.check(mk1, a).to_frame()["overflow_bytes"]
                                         .tolist()[2] == a.to_frame()["overflow_bytes"][0])
    others = np.setdiff1d(np.flatnonzero(mk1.allocated), rows)
    assert np.array_equal(a.offsets[others], mk1.offset[others])


def test_allocate_takes_the_policy_s_time_limit_unless_one_is_given(mk1, monkeypatch):
    """``time_limit`` replaces the policy's only when given: a tuned ``Policy`` alone keeps
    its own (the driver is asked with it)."""
    from tilemem.pack.run import driver
    from tilemem.pack.run.plan import Policy

    asked = []
    real = driver.allocate

    def spy(report, **kw):
        asked.append(kw["policy"].time_limit)
        return real(report, **kw)

    monkeypatch.setattr(driver, "allocate", spy)
    for kw in ({"policy": Policy(time_limit=0.25)}, {"policy": Policy(time_limit=0.25),
                                                     "time_limit": 0.5}, {}):
        tilemem.allocate(mk1, tiles=[2], packing=replace(HEURISTIC, **kw))
    assert asked == [0.25, 0.5, Policy().time_limit]


def test_an_interrupted_allocation_keeps_the_tiles_it_finished(mk1):
    def stop_after_first(e):
        raise KeyboardInterrupt

    a = tilemem.allocate(mk1, tiles=[3, 5], packing=HEURISTIC, progress=stop_after_first)
    assert a.interrupted and len(a.tiles) == 1
    done = a.tiles[0].tile
    untouched = mk1.tile_rows(8 - done)      # the other of 3 and 5
    assert np.array_equal(a.offsets[untouched], mk1.offset[untouched])
    assert tilemem.check(mk1, a).ok


def test_tile_map_draws_every_variable_of_the_tile(mk1):
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    ax = Figure().subplots()
    assert tilemem.plot.tile_map(mk1, 4, ax=ax) is ax
    drawn = sum(len(c.get_paths()) for c in ax.collections)
    rows = mk1.tile_rows(4)
    assert drawn == int((mk1.size[rows] > 0).sum())


# ---- one path for the CLI and the API -------------------------------------------------------

@pytest.mark.parametrize("argv, module, name", [
    (["liveness", EXAMPLE, "--tile", "0"], "tilemem.api", "liveness"),
    (["check", EXAMPLE], "tilemem.api", "check"),
    (["report", EXAMPLE], "tilemem.api", "report"),
    (["oom", EXAMPLE, "--no-repack", "--json"], "tilemem.api", "diagnose"),
    (["what-if", EXAMPLE, "--scale", "*=2", "--json"], "tilemem.api", "what_if"),
    (["diff", EXAMPLE, EXAMPLE], "tilemem.api", "diff"),
    (["split", EXAMPLE, "--ipus", "2"], "tilemem.api", "split"),
    (["config", EXAMPLE, "--ipus", "1", "--micro-batch", "1"], "tilemem.api", "configure"),
    (["alloc", EXAMPLE, "--tiles", "1", "--method", "heuristic", "--workers", "1"],
     "tilemem.api", "allocate"),
    (["plot", EXAMPLE, "--tile", "1", "--compare", "--method", "heuristic", "-o", "{tmp}/m.png"],
     "tilemem.api", "allocate"),
    (["html", EXAMPLE, "--no-repack", "--max-vars", "0", "-o", "{tmp}/r.html"],
     "tilemem.plot", "html_page"),
    (["info", EXAMPLE], "tilemem.api", "load"),
    (["convert", EXAMPLE, "{tmp}/r.json"], "tilemem.api", "load"),
    (["plot-tiles", EXAMPLE, "-o", "{tmp}/t.png"], "tilemem.api", "load"),
    (["export-minimalloc", EXAMPLE, "--tile", "1", "-o", "{tmp}/t.csv"], "tilemem.api", "load"),
    (["import-minimalloc", "{tmp}/t.csv", "--capacity", "262144", "-o", "{tmp}/m.json"],
     "tilemem.api", "allocate"),
])
def test_the_cli_calls_the_public_function(argv, module, name, monkeypatch, tmp_path):
    target = importlib.import_module(module)
    real, calls = getattr(target, name), []

    def recording(*a, **k):
        calls.append(name)
        return real(*a, **k)

    monkeypatch.setattr(target, name, recording)
    if argv[0] == "import-minimalloc":   # a CSV without offsets: the command packs it
        (tmp_path / "t.csv").write_text("id,lower,upper,size\n0,0,2,64\n1,1,3,32\n")
    rc, lines, _ = run([str(x).replace("{tmp}", str(tmp_path)) for x in argv])
    assert rc == 0, lines
    assert calls, f"tilemem {argv[0]} did not call {module}.{name}"


# ---- bad input: one exception, one message --------------------------------------------------

def _corrupt(tmp_path, case: str) -> Path:
    d = copy.deepcopy(SEED)
    p = tmp_path / "bad.json"
    if case == "not json":
        p.write_text("hello")
        return p
    if case == "truncated capnp":
        p = tmp_path / "bad.capnp"
        p.write_bytes((ROOT / "examples" / "mk1-small.capnp").read_bytes()[:5000])
        return p
    info = d["vars"][1]["info"]
    if case == "alignment 3":
        info["alignment"] = 3
    elif case == "negative size":
        info["sizeBytes"] = -4
    elif case == "tile outside":
        info["tile"] = 7
    elif case == "duplicate var":
        d["vars"][2]["var"] = d["vars"][1]["var"]
    p.write_text(json.dumps(d))
    return p


@pytest.mark.parametrize("case", ["not json", "truncated capnp", "alignment 3", "negative size",
                                  "tile outside", "duplicate var"])
def test_bad_input_is_the_same_error_through_the_api_and_the_cli(tmp_path, case):
    p = _corrupt(tmp_path, case)
    with pytest.raises(tilemem.ReportError) as e:
        tilemem.load(p)
    rc, lines, _ = run(["oom", p])
    assert rc == 2 and lines == [f"tilemem: error: {e.value}"]
    assert str(p) in str(e.value)


@pytest.mark.parametrize("option, value, kwargs", [
    ("--scale", "*=-1", {"scale": {"*": -1}}),
    ("--offload", "re:(", {"offload": ["re:("]}),
])
def test_a_bad_edit_is_the_same_error_through_the_api_and_the_cli(mk1, option, value, kwargs):
    with pytest.raises(tilemem.ReportError) as e:
        tilemem.what_if(mk1, tilemem.Edits(**kwargs))
    rc, lines, _ = run(["what-if", EXAMPLE, option, value])
    assert rc == 2 and lines == [f"tilemem: error: {e.value}"]


# ---- the documented examples ----------------------------------------------------------------

def _python_blocks(path: Path) -> list[str]:
    import re

    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


def test_the_documented_examples_run(tmp_path, monkeypatch, capsys):
    import matplotlib
    matplotlib.use("Agg")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    blocks = _python_blocks(ROOT / "docs" / "api.md")
    assert len(blocks) >= 14
    ns = {"tilemem": tilemem}
    for block in blocks:                 # one session, in order, as a reader runs them
        exec(compile(block, "docs/api.md", "exec"), ns)
    assert (tmp_path / "report.html").stat().st_size > 0
    assert "README.md: no such file" in capsys.readouterr().out   # none in tmp_path
    for block in _python_blocks(ROOT / "README.md"):
        exec(compile(block, "README.md", "exec"), {"tilemem": tilemem})


def test_answers_show_themselves_in_a_notebook(mk1):
    a = tilemem.allocate(mk1, tiles=[7], packing=HEURISTIC)
    res = a.tiles[0]
    # the CLI's table: the tile's row with its method and total
    assert f"{res.total_including_gaps:,}" in str(a) and "heuristic" in str(a)
    assert f"{res.total_including_gaps:,}" in a._repr_html_()
    html = mk1._repr_html_()
    assert html.startswith("<pre") and "tiles: 32 (32 in use)" in html


def test_diagnose_reports_progress_a_tile(mk1):
    seen = []
    d = tilemem.diagnose(mk1, packing=tilemem.Packing(method="heuristic", budget=5,
                                                       time_limit=1), progress=seen.append)
    oom = sorted(d.to_frame()["tile"].tolist())
    bounds = [e for e in seen if e.stage == "maximum live bytes"]
    assert sorted(e.tile for e in bounds) == oom and bounds[-1].done == bounds[-1].total == 3
    assert {e.tile for e in seen if e.stage == "re-pack"} == set(oom)


def test_oom_on_a_terminal_shows_the_same_answer(monkeypatch):
    from rich.console import Console

    import tilemem.commands.options as options

    screen = io.StringIO()
    monkeypatch.setattr(options, "console",
                        lambda: Console(file=screen, force_terminal=True, width=100))
    rc, lines, _ = run(["oom", EXAMPLE, "--method", "heuristic", "--budget", "5", "--panels",
                        "0"])
    import re

    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue())
    # the bars while it works (one a stage), then the answer
    assert "maximum live bytes" in shown and "re-pack" in shown
    assert rc == 0 and "3 of 32 tiles out of memory" in shown


def test_an_interrupted_run_with_an_output_resumes_from_its_journal(mk1, tmp_path):
    out = tmp_path / "new.capnp"

    def stop(e):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tilemem.allocate(mk1, tiles=[3, 5], packing=HEURISTIC, output=out, progress=stop)
    assert (tmp_path / "new.capnp.journal").exists() and not out.exists()
    with pytest.raises(tilemem.ReportError, match="add --resume"):
        tilemem.allocate(mk1, tiles=[3, 5], packing=HEURISTIC, output=out)
    a = tilemem.allocate(mk1, tiles=[3, 5], packing=HEURISTIC,
                         output=tilemem.Output(out, resume=True))
    assert a.result.from_journal == 1 and len(a.tiles) == 2      # one tile not solved again
    assert not (tmp_path / "new.capnp.journal").exists()
    assert tilemem.check(tilemem.load(out)).ok and np.array_equal(tilemem.load(out).offset,
                                                                   a.offsets)


# ---- one report source ----------------------------------------------------------------------

def test_a_loaded_report_knows_its_file_and_a_changed_one_does_not(mk1, tmp_path):
    """``Report.file``: the path as given, the format told by content (a capnp file named
    .json is still capnp), the size the loader read; a report with other offsets or sizes
    is not that file's."""
    import os

    path = tmp_path / "named.json"
    path.write_bytes((ROOT / "examples" / "mk1-small.capnp").read_bytes())
    r = tilemem.load(path)
    assert r.file == tilemem.ReportSource(str(path), "capnp", os.stat(path).st_size,
                                          os.stat(path).st_mtime_ns)
    assert r.source == str(path) and tilemem.Report.of(r).file is r.file
    assert mk1.file.format == "json" and mk1.file.path == str(EXAMPLE)
    assert mk1.with_offsets(mk1.offset).file is None
    w = tilemem.what_if(mk1, tilemem.Edits(scale={"*": 2}))
    assert w.report.file is None and w.report.source == mk1.source
    made = tilemem.Report.of(_three_vars())
    assert made.file is None and made.source == "report"


def test_the_dask_workers_open_the_file_the_run_says(mk1, tmp_path):
    """Which file the driver hands the Dask workers (``RunOptions.shared_file``): a capnp
    report's own by default, any format's when asked, none when told not to or off Dask;
    asked for a report read from no file, one line naming the option, before any cluster."""
    from tilemem.pack.run.driver import RunOptions, _shared_file

    capnp = tilemem.load(ROOT / "examples" / "mk1-small.capnp")
    dask = RunOptions(scheduler="tcp://127.0.0.1:1")
    assert _shared_file(capnp, dask) is capnp.file and _shared_file(mk1, dask) is None
    assert _shared_file(mk1, replace(dask, shared_file=True)) is mk1.file
    assert _shared_file(capnp, replace(dask, shared_file=False)) is None
    assert _shared_file(capnp, RunOptions(shared_file=True)) is None
    with pytest.raises(tilemem.ReportError, match="not read from one") as e:
        tilemem.allocate(mk1.with_offsets(mk1.offset), tiles=[1], packing=replace(
            HEURISTIC, scheduler="tcp://127.0.0.1:1", shared_file=True))
    assert e.value.field == "--shared-report"
