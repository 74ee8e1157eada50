"""Live bytes over program steps (tilemem.liveness.step_profile / max_over_tiles) against a
brute force over every step, the interference-only reconstruction against max_live, and the
`tilemem liveness --steps` command."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from tilemem.cli import cli
from tilemem.load import load_report, save_report
from tilemem.liveness import live_rows_at, max_live, max_over_tiles, step_profile
from tilemem.model import Report
from tilemem.model.target import MK1

EXAMPLE = Path(__file__).parents[1] / "examples" / "mk1-small.capnp"


def brute_live(sizes, tiles, always, life, tile, step):
    """Bytes of ``tile`` live at ``step``, variable by variable from the definition."""
    total = 0
    for i in range(len(sizes)):
        if tiles[i] != tile:
            continue
        s, e = life[i]
        if always[i] or s <= step < e:
            total += sizes[i]
    return total


@st.composite
def stepped(draw):
    n = draw(st.integers(1, 25))
    k = draw(st.integers(1, 8))
    tiles = draw(st.integers(1, 3))
    size = draw(st.lists(st.integers(0, 64), min_size=n, max_size=n))
    cls = draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n))
    tile = draw(st.lists(st.integers(0, tiles - 1), min_size=n, max_size=n))
    always = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    starts = draw(st.lists(st.integers(0, 20), min_size=k, max_size=k))
    lens = draw(st.lists(st.integers(0, 8), min_size=k, max_size=k))
    steps = [[s, s + d] for s, d in zip(starts, lens)]
    r = Report.from_columns(target=MK1.with_tiles(tiles), var_id=list(range(n)), tile=tile,
                            size=size, alignment=[4] * n, offset=[0] * n,
                            category=["variable"] * n, eq_class=cls,
                            interference=[[] for _ in range(k)], always_live=always,
                            class_steps=steps)
    return r, size, tile, always, [steps[c] for c in cls], tiles


@settings(max_examples=150, deadline=None)
@given(stepped())
def test_profile_and_maximum_over_tiles_match_brute_force(case):
    r, size, tile, always, life, tiles = case
    horizon = range(-1, 31)
    per_tile = {}
    for t in range(tiles):
        p = step_profile(r, t)
        assert p.kind == "steps"
        expected = [brute_live(size, tile, always, life, t, s) for s in horizon]
        assert p.at(list(horizon)).tolist() == expected
        per_tile[t] = expected
        if len(p.start):
            assert p.peak_bytes == max(expected)
            assert brute_live(size, tile, always, life, t, p.peak_step) == p.peak_bytes
            live = live_rows_at(r, t, p.peak_step)
            assert int(r.size[live].sum()) == p.peak_bytes
    start, best, who = max_over_tiles(r, np.arange(tiles))
    for s, b, w in zip(start.tolist(), best.tolist(), who.tolist()):
        column = [per_tile[t][s + 1] for t in range(tiles)]
        assert b == max(column) and per_tile[w][s + 1] == b


def test_reconstructed_timeline_peak_is_the_maximum_live_bytes():
    # classes 0-1, 1-2, 2-3 interfere (a path: an interval graph); no steps in the report
    r = Report.from_columns(var_id=range(5), tile=[0] * 5, size=[10, 20, 30, 5, 7],
                            alignment=[4] * 5, offset=[0] * 5, category=["variable"] * 5,
                            eq_class=[0, 1, 2, 3, 0], always_live=[0, 0, 0, 0, 1],
                            interference=[[1], [2], [3], []])
    p = step_profile(r, 0)
    assert p.kind == "points"
    # cliques: {0,1}: 10+20, {1,2}: 20+30, {2,3}: 30+5 -> 50, plus 7 always-live
    assert p.peak_bytes == 57 == max_live(r, 0).max_live_bytes
    assert sorted(live_rows_at(r, 0, p.peak_step).tolist()) == [1, 2, 4]
    assert max_over_tiles(r) is None          # per-tile orders are not one program's steps


def test_no_timeline_no_profile():
    # a chordless 4-cycle of classes has no interval model
    r = Report.from_columns(var_id=range(4), tile=[0] * 4, size=[4] * 4, alignment=[4] * 4,
                            offset=[0] * 4, category=["variable"] * 4, eq_class=[0, 1, 2, 3],
                            interference=[[1, 3], [2], [3], []])
    assert step_profile(r, 0) is None
    assert live_rows_at(r, 0, 0).tolist() == []


def test_example_profile_is_consistent_with_max_live():
    r = load_report(EXAMPLE)
    for t in (0, 2, 17):
        p = step_profile(r, t)
        m = max_live(r, t)
        # the steps hold every interference edge (the generator's If/Else branches share
        # steps without interfering), so no step holds less than the heaviest clique
        assert p.peak_bytes >= m.max_live_bytes
        lo, hi = p.peak_steps
        assert p.at(lo) == p.peak_bytes and (hi == lo or p.at(hi) != p.peak_bytes)
        assert p.always_live_bytes == m.always_live_bytes == int(p.live_bytes[-1])


def test_liveness_steps_command(tmp_path):
    r = load_report(EXAMPLE)
    p = step_profile(r, 0)
    res = CliRunner().invoke(cli, ["liveness", str(EXAMPLE), "--tile", "0", "--steps"])
    assert res.exit_code == 0, res.output
    assert f"peak at program step {p.peak_step:,}" in res.output
    assert f"{p.peak_bytes:,}" in res.output
    res = CliRunner().invoke(cli, ["liveness", str(EXAMPLE), "--tile", "0,2", "--steps",
                                   "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    t0 = next(t for t in data["tiles"] if t["tile"] == 0)
    assert t0["steps"]["kind"] == "steps"
    assert t0["steps"]["peakStep"] == p.peak_step
    assert t0["steps"]["start"] == p.start.tolist()
    assert t0["steps"]["liveBytes"] == p.live_bytes.tolist()
    # all tiles: the maximum over tiles, with the tile that holds it
    res = CliRunner().invoke(cli, ["liveness", str(EXAMPLE), "--steps"])
    assert res.exit_code == 0, res.output
    start, best, who = max_over_tiles(r)
    k = int(np.argmax(best))
    assert f"peak at program step {int(start[k]):,}: {int(best[k]):,} B on tile {int(who[k])}" \
        in res.output


def test_liveness_steps_without_timeline_says_so(tmp_path):
    r = Report.from_columns(var_id=range(4), tile=[0] * 4, size=[4] * 4, alignment=[4] * 4,
                            offset=[0] * 4, category=["variable"] * 4, eq_class=[0, 1, 2, 3],
                            interference=[[1, 3], [2], [3], []])
    path = tmp_path / "cycle.json"
    save_report(r, path)
    res = CliRunner().invoke(cli, ["liveness", str(path), "--tile", "0", "--steps"])
    assert res.exit_code == 0, res.output
    assert "unavailable" in res.output and "peak at" not in res.output
