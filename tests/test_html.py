"""`tilemem html`: the page is one self-contained file whose data are the report's own
columns, and, opened in headless Chromium (Debian's, through Playwright) as a user would, it
renders without a JavaScript error or a load from elsewhere, shows every tile in the overview,
opens an out-of-memory tile (by the tile picker, a link, #tile=N and a click on the overview)
with its map and its verdict, and is not blank."""
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

from chromium import find_chromium, launched, opened, wait_ready

# its module fixtures (the browser, the pages, the reports they show) made once, on one worker,
# not once a worker
pytestmark = pytest.mark.xdist_group("html")

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
    assert set(data["outOfMemory"]) == oom == {0, 1, 2}
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
    assert d["excess"] == int(highest_ends(example)[0]) - example.target.tile_memory == 2376
    assert d["maxLiveBytes"] == max_live(example, 0).max_live_bytes
    assert d["verdictCode"] in ("reduceData", "repackFits", "repackOverflows", "provenNoFit",
                                "notRepacked")


def test_budget_keeps_only_the_tiles_that_matter(tmp_path, example):
    out = tmp_path / "small.html"
    counts = np.bincount(example.tile[example.allocated], minlength=32)
    budget = int(counts[[9, 0, 1, 2]].sum())   # room for tile 9 and the three out of memory
    assert main(["html", str(EXAMPLE), "-o", str(out), "--max-vars", str(budget), "--tiles",
                 "9", "--no-repack"]) == 0
    data = page_data(out)
    # asked-for first, then out of memory worst first; no room left for the fullest 8
    assert [c["tile"] for c in data["included"]] in ([9, 0, 1, 2], [9, 0, 2, 1])  # 1, 2 tie
    assert set(data["tiles"]) == {"9", "0", "1", "2"}
    # the 8 fullest of the others, less tile 9 if it is one of them (already in)
    ends = highest_ends(example)
    others = [t for t in np.argsort(-ends, kind="stable").tolist()
              if t not in (0, 1, 2) and counts[t] > 0][:8]
    assert data["leftOut"] == {"fullest": 8 - (9 in others)}
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


def test_serve_on_a_taken_port_fails_before_any_work(tmp_path, capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = tmp_path / "r.html"
        assert main(["html", str(EXAMPLE), "--serve", "--port", str(port), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tilemem: error:") and str(port) in err[0]
    assert not out.exists()


# ---- in a browser ----------------------------------------------------------------------------
def unavailable(reason: str):
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the browser tests (.ci/run installs chromium): {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium, headless, through Playwright (tests/chromium.py)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        unavailable("no Python package playwright (pip install -e '.[test]')")
    if find_chromium() is None:
        unavailable("no chromium on PATH (Debian: apt-get install chromium)")
    with launched() as b:
        yield b


def on_figure(page, name: str, x: float, y: float) -> dict:
    """Where the point (x, y) of the Bokeh figure ``name`` is on the page, in pixels of the
    viewport (the figure scrolled into view first)."""
    page.evaluate("n => Bokeh.index.find_one(Bokeh.documents[0].get_model_by_name(n))"
                  ".el.scrollIntoView({block: 'center'})", name)
    return page.evaluate("""([n, x, y]) => {
        const v = Bokeh.index.find_one(Bokeh.documents[0].get_model_by_name(n));
        const r = v.canvas_view.el.getBoundingClientRect();
        return {x: r.left + v.frame.x_scale.compute(x), y: r.top + v.frame.y_scale.compute(y)};
    }""", [name, x, y])


def shows_tile(page, tile: int) -> None:
    page.wait_for_selector(f"body[data-tile='{tile}']", state="attached")
    assert page.url.endswith(f"#tile={tile}")


def test_page_in_a_browser(page, example, browser):
    from PIL import Image

    tm = example.target.tile_memory
    high = highest_ends(example)
    with opened(browser, page.as_uri()) as (p, problems):
        wait_ready(p)
        # the overview shows all 32 tiles with their highest ends, drawn
        ov = p.evaluate("(() => { const d = Bokeh.documents[0].get_model_by_name('overview')"
                        ".data; return {tile: Array.from(d.tile), incl: Array.from(d.incl)};"
                        " })()")
        assert ov["tile"] == list(range(32))
        assert ov["incl"] == high.tolist()
        assert p.locator("#overview canvas").first.is_visible()

        def map_rects():
            return p.evaluate("(() => { const d = Bokeh.documents[0].get_model_by_name("
                              "'mapSrc').data; return Array.from(d.var, (v, i) => [v, "
                              "d.left[i], d.right[i] - d.left[i]]); })()")

        def verdict():
            return p.locator("#verdict").inner_text()

        # an out-of-memory tile picked from the tile list
        p.select_option("#tile-pick", "2")
        shows_tile(p, 2)
        assert sorted(map(tuple, map_rects())) == placed(example, 2)
        assert f"Out of memory by {high[2] - tm:,} B" in verdict()
        # the worst one by its link among the tiles the file holds
        p.locator("#included a[href='#tile=0']").click()
        shows_tile(p, 0)
        assert sorted(map(tuple, map_rects())) == placed(example, 0)
        assert f"Out of memory by {high[0] - tm:,} B" in verdict()
        assert re.search(r"Verdict: live data (alone exceeds memory|fits)", verdict())
        from tilemem.liveness import max_live

        assert f"maximum live bytes {max_live(example, 0).max_live_bytes:,} B" in verdict()
        assert "Largest variables live at the peak" in p.locator("#oom-peak").inner_text()
        assert "tile 0 (out of memory by" in p.locator("#tile-title").inner_text()
        # the liveness view marks the peak step the brute force finds
        live = live_by_step(example, 0)
        assert p.locator("#peak-step").inner_text() == f"{int(np.argmax(live)):,}"
        # the map as a person sees it
        p.evaluate("window.scrollTo(0, 0); document.getElementById('tileview')"
                   ".scrollIntoView()")
        p.wait_for_function("Bokeh.documents[0].is_idle")
        p.wait_for_timeout(400)
        shot = Image.open(io.BytesIO(p.screenshot())).convert("RGB")
        # a click on tile 7's bar in the overview opens it
        at = on_figure(p, "ovFig", 7, high[7] / 2)
        p.mouse.click(at["x"], at["y"])
        shows_tile(p, 7)
        assert "Fits" in verdict()
        assert sorted(map(tuple, map_rects())) == placed(example, 7)
        assert problems == []
    # a page opened on a tile's address starts there
    with opened(browser, page.as_uri() + "#tile=2", 1000, 800) as (p, problems):
        wait_ready(p)
        assert p.evaluate("document.body.dataset.tile") == "2"
        assert p.locator("#tile-pick").input_value() == "2"
        assert "out of memory by" in p.locator("#tile-title").inner_text()
        assert problems == []
    # the screenshot is a drawn page, not a blank one: varied pixels, the map's colours
    px = np.asarray(shot, np.int64)
    assert px.std() > 30
    blue = np.all(np.abs(px - [0x1f, 0x77, 0xb4]) <= 2, axis=2).mean()   # "variable"
    assert blue > 0.05, f"only {blue:.1%} of the screenshot is the variables' colour"
    assert len(np.unique(px.reshape(-1, 3), axis=0)) > 50


def test_without_steps_the_page_says_so(tmp_path, browser):
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
    with opened(browser, pages["seed"].as_uri() + "#tile=0", 1200, 900) as (p, problems):
        wait_ready(p)
        assert "Reconstructed from interference" in p.locator("#live-note").inner_text()
        assert problems == []
    with opened(browser, pages["cycle"].as_uri() + "#tile=0", 1200, 900) as (p, problems):
        wait_ready(p)
        assert "Timeline unavailable" in p.locator("#live-note").inner_text()
        assert p.evaluate("Bokeh.documents[0].get_model_by_name('liveSrc').data.x.length") == 0
        assert problems == []


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
    """One program at availableMemoryProportion 0.6 and 1.0 (larger partial sums), drawn so
    that a tile goes out of memory with them: the page then has a change to show."""
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


def test_compilations_in_a_browser(compilations, browser):
    (a, _), out = compilations
    d = page_data(out)
    with opened(browser, out.resolve().as_uri()) as (p, problems):
        wait_ready(p)
        # the page opens on the program and the two compilations, drawn
        s = d["program"]
        assert (f"{s['outOfMemory']:,} of {s['tilesInDump']:,} tiles out of memory"
                in p.locator("#program").inner_text())
        against = p.locator("#against")
        assert "What grew on the tiles that went out of memory" in against.inner_text()
        canvas = against.locator("canvas").first
        canvas.scroll_into_view_if_needed()
        box = canvas.bounding_box()
        assert box and box["width"] > 200 and box["height"] > 100
        assert problems == []


# ---- many tiles (a Pod's shape, small) ---------------------------------------------------------
PER_IPU, IPUS = 400, 3


@pytest.fixture(scope="module")
def pod(tmp_path_factory):
    """3 IPUs of 400 Mk2 tiles, 2 variables a tile (live over steps [0, 20) and [10, 30),
    packed end to end), tiles 37 and 950 out of memory; the page asks for tile 1000, with a
    budget of 20,000 variables (as 250,000 is to a Pod's 23,552 tiles)."""
    from tilemem.model import symmetric_closure
    from tilemem.model.target import MK2

    rng = np.random.default_rng(5)
    n = PER_IPU * IPUS
    tm = MK2.tile_memory
    tile = np.repeat(np.arange(n), 2)
    first = rng.integers(1_000, 20_000, n) * 8
    second = rng.integers(1_000, 30_000, n) * 8
    second[[37, 950]] = tm - first[[37, 950]] + 8 * np.array([3, 7])
    size = np.stack([first, second], axis=1).ravel()
    offset = np.stack([np.zeros(n, np.int64), first], axis=1).ravel()
    r = Report.from_columns(
        target=MK2.with_tiles(n, tiles_per_ipu=PER_IPU), var_id=np.arange(2 * n), tile=tile,
        size=size, alignment=np.full(2 * n, 8), offset=offset,
        category=["variable", "output"] * n, eq_class=np.tile([0, 1], n),
        names=[f"t{t}/v{k}" for t in range(n) for k in range(2)],
        interference=symmetric_closure(2, np.array([0]), np.array([1])),
        class_steps=[[0, 20], [10, 30]])
    d = tmp_path_factory.mktemp("pod")
    path = d / "pod.capnp"
    save_report(r, path)
    out = d / "pod.html"
    assert main(["html", str(path), "--tiles", "1000", "--no-repack", "--max-vars", "20000",
                 "-o", str(out)]) == 0
    return load_report(path), path, out


def test_many_tiles_embed_only_the_tiles_that_matter(pod):
    r, _, out = pod
    data = page_data(out)
    high = highest_ends(r)
    tm = r.target.tile_memory
    assert sorted(data["outOfMemory"]) == [37, 950]
    rest = [t for t in np.argsort(-high, kind="stable").tolist() if t not in (37, 950)]
    # asked for, out of memory worst first, the 8 fullest others: not every tile, though all
    # their variables (2,400) are within the budget (each embedded tile costs more than them)
    want = [1000] + sorted([37, 950], key=lambda t: -(high[t] - tm)) + rest[:8]
    assert [c["tile"] for c in data["included"]] == want
    assert sorted(map(int, data["tiles"])) == sorted(want)
    assert data["target"]["ipuBoundaries"] == [PER_IPU, 2 * PER_IPU]


def test_many_tiles_in_a_browser(pod, browser):
    r, path, out = pod
    high = highest_ends(r)
    tm = r.target.tile_memory

    def map_rects(p):
        return sorted(map(tuple, p.evaluate(
            "(() => { const d = Bokeh.documents[0].get_model_by_name('mapSrc').data; return "
            "Array.from(d.var, (v, i) => [v, d.left[i], d.right[i] - d.left[i]]); })()")))

    def shown_tiles(p):
        return p.evaluate("(() => { const x = Bokeh.documents[0].get_model_by_name('ovX');"
                          " return [x.start, x.end]; })()")

    with opened(browser, out.as_uri()) as (p, problems):
        wait_ready(p)
        # the IPU strip: per IPU its tiles out of memory and its fullest tile, as the columns say
        ipus = p.evaluate("(() => { const d = Bokeh.documents[0].get_model_by_name("
                          "'ipuOverview').data; return {over: Array.from(d.over), "
                          "fullest: Array.from(d.fullest)}; })()")
        per = high.reshape(IPUS, PER_IPU)
        assert ipus["over"] == (per > tm).sum(axis=1).tolist() == [1, 0, 1]
        assert ipus["fullest"] == (np.argmax(per, axis=1) + np.arange(IPUS) * PER_IPU).tolist()
        # the overview opens on an IPU with a tile out of memory, one IPU's tiles at a time
        assert p.evaluate("document.body.dataset.ipu") in ("0", "2")
        ipu = int(p.evaluate("document.body.dataset.ipu"))
        assert shown_tiles(p) == [ipu * PER_IPU - 0.5, (ipu + 1) * PER_IPU - 0.5]
        # a click on IPU 1 in the strip shows its tiles
        at = on_figure(p, "ipuFig", 1, 1000)
        p.mouse.click(at["x"], at["y"])
        p.wait_for_selector("body[data-ipu='1']", state="attached")
        assert shown_tiles(p) == [PER_IPU - 0.5, 2 * PER_IPU - 0.5]
        assert "IPU 1, tiles 400 to 799" in p.locator("#ipu-note").inner_text()
        # the tile asked for, by number: its map, and the overview moves to its IPU
        p.fill("#tile-any", "1000")
        p.dispatch_event("#tile-any", "change")
        shows_tile(p, 1000)
        assert map_rects(p) == placed(r, 1000)
        assert p.evaluate("document.body.dataset.ipu") == "2"
        # a tile not in the file says how to get it
        p.fill("#tile-any", "5")
        p.dispatch_event("#tile-any", "change")
        shows_tile(p, 5)
        note = p.locator("#map-note").inner_text()
        assert "not in this file" in note
        assert f"tilemem html {path.name} --tiles 5" in note and "--serve" in note
        assert map_rects(p) == []
        assert f"{high[5]:,} B of {tm:,}" in p.locator("#tile-figures").inner_text()
        assert problems == []


def test_served_page_loads_any_tile(pod, browser, tmp_path):
    import threading

    from tilemem.plot import html_server

    r, _, _ = pod
    srv = html_server(r, tmp_path / "served.html", repack=False, max_vars=20_000, port=0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        assert "5" not in srv.data["tiles"]
        url = "http://%s:%d/" % srv.server_address[:2]
        with opened(browser, url + "#tile=5") as (p, problems):
            wait_ready(p)
            p.wait_for_function("Bokeh.documents[0].get_model_by_name('mapSrc').data.var"
                                ".length > 0")
            assert sorted(map(tuple, p.evaluate(
                "(() => { const d = Bokeh.documents[0].get_model_by_name('mapSrc').data; "
                "return Array.from(d.var, (v, i) => [v, d.left[i], d.right[i] - d.left[i]]);"
                " })()"))) == placed(r, 5)
            assert "loaded when asked" in p.locator("#map-note").inner_text()
            # the live bytes of the tile, from the server: both variables over [10, 20)
            rows = np.flatnonzero(r.tile == 5)
            assert p.evaluate("Math.max(...Bokeh.documents[0].get_model_by_name('liveSrc')"
                              ".data.y)") == int(r.size[rows].sum())
            assert [x for x in problems if not x.startswith(f"loaded from elsewhere: {url}")] == []
    finally:
        srv.shutdown()
        srv.server_close()
