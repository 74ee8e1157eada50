"""`tilemem html`: the page is one self-contained file whose data are the report's own
columns, and, opened in headless Chromium as a user would, it renders without a JavaScript
error, shows every tile in the overview, opens an out-of-memory tile (by #tile=N, the tile
picker and a tap on the overview) with its map and its verdict, and is not blank."""
from __future__ import annotations

import base64
import io
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from tilemem.cli import main
from tilemem.load import load_report, save_report
from tilemem.model import Report

from browser import Browser, find_chromium

pytest.importorskip("bokeh", reason="tilemem html needs the [html] extra (bokeh)")

EXAMPLE = Path(__file__).parents[1] / "examples" / "mk1-small.json"
SEED = Path(__file__).parents[1] / "examples" / "seed.json"


@pytest.fixture(scope="module")
def example():
    return load_report(EXAMPLE)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("html") / "report.html"
    assert main(["html", str(EXAMPLE), "-o", str(out), "--time-limit", "1"]) == 0
    return out


def page_data(path) -> dict:
    text = Path(path).read_text()
    m = re.search(r'<script type="application/json" id="tilemem-data">(.*?)</script>', text,
                  re.S)
    return json.loads(m.group(1).replace("<\\/", "</"))


def column(col) -> np.ndarray:
    dtype = {"u1": "u1", "i4": "<i4", "f8": "<f8"}[col["dtype"]]
    return np.frombuffer(base64.b64decode(col["b64"]), dtype).astype(np.int64)


def highest_ends(r) -> np.ndarray:
    """Highest end address per tile, from the columns (not from tilemem.report)."""
    a = r.allocated
    high = np.zeros(r.num_tiles, np.int64)
    np.maximum.at(high, r.tile[a], r.offset[a] + r.size[a])
    return high


def placed(r, tile, offsets=None):
    off = r.offset if offsets is None else offsets
    rows = np.flatnonzero(r.allocated & (r.tile == tile) & (r.size > 0))
    return sorted(zip(r.var_id[rows].tolist(), off[rows].tolist(), r.size[rows].tolist()))


def live_by_step(r, tile) -> np.ndarray:
    rows = np.flatnonzero(r.allocated & (r.tile == tile))
    live = np.zeros(int(r.class_steps[:, 1].max()) + 1, np.int64)
    for i in rows.tolist():
        s, e = r.class_steps[r.eq_class[i]]
        if r.always_live[i]:
            live += r.size[i]
        else:
            live[s:e] += r.size[i]
    return live


# ---- the file ------------------------------------------------------------------------------
def test_page_is_one_self_contained_file(page, example):
    text = page.read_text()
    # nothing loaded from elsewhere: no script or stylesheet by address, no @import
    assert not re.search(r"<script[^>]*\bsrc\s*=", text)
    assert not re.search(r"<link[^>]*\bhref\s*=", text)
    assert "@import" not in text
    assert "Bokeh" in text and len(text) < 8_000_000
    data = page_data(page)
    # a small report: every tile's map is in, and the out-of-memory ones say why
    assert {c["tile"] for c in data["included"]} == set(range(32))
    oom = set(np.flatnonzero(highest_ends(example) > example.target.tile_memory).tolist())
    assert set(data["outOfMemory"]) == oom == {0, 2}
    for c in data["included"]:
        assert ("out of memory" in c["why"]) == (c["tile"] in oom)
    # the rectangles are the report's variables at their offsets
    for t in (0, 2, 17):
        e = data["tiles"][str(t)]
        got = sorted(zip(column(e["var"]).tolist(), column(e["x0"]).tolist(),
                         column(e["size"]).tolist()))
        assert got == placed(example, t)
        assert e["kind"] == "steps" and len(e["names"].split("\n")) == e["n"]
    # tile 0's verdict is the oom diagnosis, bound = maximum live bytes
    from tilemem.liveness import max_live

    d = data["tiles"]["0"]["oom"]
    assert d["excess"] == int(highest_ends(example)[0]) - example.target.tile_memory == 3600
    assert d["maxLiveBytes"] == max_live(example, 0).max_live_bytes
    assert d["verdictCode"] in ("reduceData", "repackFits", "repackOverflows", "provenNoFit",
                                "notRepacked")


def test_budget_keeps_only_the_tiles_that_matter(tmp_path, example):
    out = tmp_path / "small.html"
    counts = np.bincount(example.tile[example.allocated], minlength=32)
    budget = int(counts[[9, 0, 2]].sum())      # room for tile 9 and the two out of memory
    assert main(["html", str(EXAMPLE), "-o", str(out), "--max-vars", str(budget), "--tiles",
                 "9", "--no-repack"]) == 0
    data = page_data(out)
    # asked-for first, then out of memory worst first; no room left for the fullest 8
    assert [c["tile"] for c in data["included"]] == [9, 0, 2]
    assert set(data["tiles"]) == {"9", "0", "2"}
    assert data["leftOut"] == {"fullest": 8}
    assert data["tiles"]["0"]["oom"]["verdictCode"] in ("reduceData", "notRepacked")


def test_compare_lists_the_tiles_that_changed(tmp_path, example):
    off = example.offset.copy()
    rows = np.flatnonzero(example.allocated & (example.tile == 5) & (example.size > 0))
    top = rows[np.argmax(off[rows] + example.size[rows])]
    off[top] += 4096                                  # tile 5 now ends 4 KiB higher
    alloc = tmp_path / "alloc.capnp"
    save_report(example.with_offsets(off), alloc)
    out = tmp_path / "cmp.html"
    assert main(["html", str(EXAMPLE), "--allocation", str(alloc), "-o", str(out),
                 "--no-repack"]) == 0
    data = page_data(out)
    before = highest_ends(example)
    after = highest_ends(example.with_offsets(off))
    assert [c["tile"] for c in data["compare"]["changed"]] == [5]
    c = data["compare"]["changed"][0]
    assert (c["endA"], c["endB"]) == (before[5], after[5])
    e = data["tiles"]["5"]
    got_b = sorted(zip(column(e["var"]).tolist(), column(e["x0b"]).tolist(),
                       column(e["size"]).tolist()))
    assert got_b == placed(example, 5, off)
    assert 'id="compare"' in out.read_text()
    assert 'id="compare"' not in Path(tmp_path / "cmp.html").read_text().split("</nav>")[0]


def test_bad_options_fail_before_any_work(tmp_path, capsys):
    assert main(["html", str(EXAMPLE), "-o", str(tmp_path / "r.pdf")]) == 2
    assert main(["html", str(EXAMPLE), "--tiles", "40", "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("tilemem: error:") for line in err)
    assert not list(tmp_path.iterdir())


# ---- in a browser ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def chromium():
    exe = find_chromium()
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI must run the browser test: .ci/run installs chromium")
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium)")
    return exe


def ready(b):
    b.wait_for("window.tilemem && window.tilemem.ready")


def test_page_in_a_browser(page, example, chromium):
    from PIL import Image

    tm = example.target.tile_memory
    high = highest_ends(example)
    with Browser(chromium, width=1400, height=1000) as b:
        b.open(page.as_uri())
        ready(b)
        # the overview shows all 32 tiles with their highest ends
        ov = b.eval("(() => { const d = Bokeh.documents[0].get_model_by_name('overview').data;"
                    " return {tile: Array.from(d.tile), incl: Array.from(d.incl)}; })()")
        assert ov["tile"] == list(range(32))
        assert ov["incl"] == high.tolist()
        assert b.eval("document.querySelectorAll('#overview .bk-Figure, #overview "
                      "div[id]').length") >= 2

        def map_rects():
            return b.eval("(() => { const d = Bokeh.documents[0].get_model_by_name('mapSrc')"
                          ".data; return Array.from(d.var, (v, i) => [v, d.left[i], "
                          "d.right[i] - d.left[i]]); })()")

        # select the worst out-of-memory tile by the address, as a link would
        b.eval("location.hash = 'tile=0'")
        b.wait_for("document.body.dataset.tile === '0'")
        assert sorted(map(tuple, map_rects())) == placed(example, 0)
        verdict = b.eval("document.getElementById('verdict').innerText")
        assert f"Out of memory by {high[0] - tm:,} B" in verdict
        assert re.search(r"Verdict: live data (alone exceeds memory|fits)", verdict)
        from tilemem.liveness import max_live

        assert f"maximum live bytes {max_live(example, 0).max_live_bytes:,} B" in verdict
        assert "Largest variables live at the peak" in b.eval(
            "document.getElementById('oom-peak').innerText")
        # the liveness view marks the peak step the brute force finds
        live = live_by_step(example, 0)
        assert b.eval("document.getElementById('peak-step').innerText") == \
            f"{int(np.argmax(live)):,}"
        b.eval("window.scrollTo(0, 0); document.getElementById('tileview').scrollIntoView()")
        b.eval("new Promise(r => setTimeout(r, 400))")
        shot = Image.open(io.BytesIO(b.screenshot())).convert("RGB")
        # the other out-of-memory tile, picked from the tile list
        b.eval("const p = document.getElementById('tile-pick'); p.value = '2';"
               "p.dispatchEvent(new Event('change'))")
        b.wait_for("document.body.dataset.tile === '2'")
        assert sorted(map(tuple, map_rects())) == placed(example, 2)
        assert f"Out of memory by {high[2] - tm:,} B" in b.eval(
            "document.getElementById('verdict').innerText")
        # a tap on a tile of the overview opens it
        b.eval("Bokeh.documents[0].get_model_by_name('overview').selected.indices = [7]")
        b.wait_for("document.body.dataset.tile === '7'")
        assert "Fits" in b.eval("document.getElementById('verdict').innerText")
        assert b.errors == []
    # a page opened on a tile's address starts there
    with Browser(chromium, width=1000, height=800) as b:
        b.open(page.as_uri() + "#tile=2")
        ready(b)
        assert b.eval("document.body.dataset.tile") == "2"
        assert b.errors == []
    # the screenshot is a drawn page, not a blank one: varied pixels, the map's colours
    px = np.asarray(shot, np.int64)
    assert px.std() > 30
    blue = np.all(np.abs(px - [0x1f, 0x77, 0xb4]) <= 2, axis=2).mean()   # "variable"
    assert blue > 0.05, f"only {blue:.1%} of the screenshot is the variables' colour"
    assert len(np.unique(px.reshape(-1, 3), axis=0)) > 50


def test_without_steps_the_page_says_so(tmp_path, chromium):
    # seed: no equivalenceClassSteps; a 4-cycle of classes has no interval model either
    cycle = Report.from_columns(var_id=range(4), tile=[0] * 4, size=[64] * 4,
                                alignment=[4] * 4, offset=[0, 64, 128, 192],
                                category=["variable"] * 4, eq_class=[0, 1, 2, 3],
                                interference=[[1, 3], [2], [3], []])
    path = tmp_path / "cycle.json"
    save_report(cycle, path)
    pages = {}
    for name, src in (("seed", SEED), ("cycle", path)):
        pages[name] = tmp_path / f"{name}.html"
        assert main(["html", str(src), "-o", str(pages[name]), "--no-repack"]) == 0
    seed = page_data(pages["seed"])
    assert {e["live"]["kind"] for e in seed["tiles"].values() if e["live"]} == {"points"}
    assert seed["maxOverTiles"] is None
    assert page_data(pages["cycle"])["tiles"]["0"]["live"] is None
    with Browser(chromium, width=1200, height=900) as b:
        b.open(pages["seed"].as_uri() + "#tile=0")
        ready(b)
        assert "Reconstructed from interference" in b.eval(
            "document.getElementById('live-note').innerText")
        b.open(pages["cycle"].as_uri() + "#tile=0")
        ready(b)
        note = b.eval("document.getElementById('live-note').innerText")
        assert "Timeline unavailable" in note
        assert b.eval("Bokeh.documents[0].get_model_by_name('liveSrc').data.x.length") == 0
        assert b.errors == []


def test_ipu_boundaries_on_multi_ipu_reports():
    from tilemem.plot.pagedata import ipu_boundaries
    from tilemem.model.target import MK1, MK2

    assert ipu_boundaries(MK1.with_tiles(32))[0] == []            # part of one IPU
    assert ipu_boundaries(MK1)[0] == []                           # exactly one IPU
    assert ipu_boundaries(MK1.with_tiles(3 * 1216))[0] == [1216, 2432]
    bounds, how = ipu_boundaries(MK2.with_tiles(2 * 1472))
    assert bounds == [1472] and "inferred from tileMemory" in how


# ---- the program summary and two compilations --------------------------------------------
@pytest.fixture(scope="module")
def compilations(tmp_path_factory):
    """One program at availableMemoryProportion 0.6 and 1.0 (larger partial sums): seed 3
    has a tile that goes out of memory with them."""
    from tilemem.generate import generate_report

    d = tmp_path_factory.mktemp("amp")
    paths = []
    for amp in (0.6, 1.0):
        p = d / f"amp{amp}.capnp"
        save_report(generate_report("mk1", tiles=16, steps=400, seed=3,
                                    available_memory_proportion=amp), p)
        paths.append(p)
    out = d / "against.html"
    assert main(["html", str(paths[0]), "--against", str(paths[1]), "-o", str(out),
                 "--method", "heuristic"]) == 0
    return paths, out


def test_program_summary_opens_the_page_and_compilations_are_compared(compilations):
    (a, b), out = compilations
    text = out.read_text()
    data = page_data(out)
    s = data["program"]
    assert s["outOfMemory"] == len(data["outOfMemory"]) >= 1
    # the program section comes before the overview, and says the counts it holds
    assert text.index('id="program"') < text.index('id="overview"')
    assert f"{s['outOfMemory']:,} of {s['tilesInDump']:,} tiles out of memory" in text
    d = data["against"]
    ra, rb = load_report(a), load_report(b)
    assert d["tilesCompared"] and d["gained"]
    assert (d["outOfMemoryBefore"], d["outOfMemoryAfter"]) == (
        int((highest_ends(ra) > ra.target.tile_memory).sum()),
        int((highest_ends(rb) > rb.target.tile_memory).sum()))
    assert d["causeOfGained"][0]["name"].endswith("/partials")
    assert 'id="against"' in text and "What grew on the tiles that went out of memory" in text
    # a report with no out-of-memory tile has no program section
    seed_page = out.parent / "seed.html"
    assert main(["html", str(SEED), "-o", str(seed_page), "--no-repack"]) == 0
    assert 'id="program"' not in seed_page.read_text()


def test_compilations_in_a_browser(compilations, chromium):
    _, out = compilations
    with Browser(chromium) as b:
        b.open(out.resolve().as_uri())
        ready(b)
        assert b.errors == []
        shown = b.eval("!!document.querySelector('#against .bk-Canvas, #against canvas, "
                       "#against .bk-root, #against div[data-root-id]')")
        assert shown
