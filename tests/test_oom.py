"""Out-of-memory diagnosis (tilemem.oom, `tilemem oom`)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tilemem.cli import cli
from tilemem.files import save_report
from tilemem.model import Report
from tilemem.target import Target

SEED = Path(__file__).parents[1] / "examples" / "seed.json"
# elements of 256 bytes; interleaved from 512; tileMemory 1024
SMALL = Target(num_tiles=4, tile_memory=1024, interleaved_memory_start=512,
               memory_element_offsets=np.array([0, 256, 512, 768]))


def needs(module: str, name: str):
    m = pytest.importorskip(module, reason=f"{module} not landed yet")
    if not hasattr(m, name):
        pytest.skip(f"{module}.{name} not landed yet")
    return getattr(m, name)


def hand_report():
    """Four tiles, each variable its own class, lifetimes as steps (so max live is exact).

    tile 0: three 400-byte variables live together at step 1 -> 1200 > 1024: reduce data.
            Placed stacked: [0,400) [400,800) [1024,1424) (one overflowed).
    tile 1: four 300-byte variables, never more than two live at once (600 bytes), but the
            report stacks them to 1200: re-packing fits.
    tile 2: three interleaved 200-byte variables live together (600 bytes fits the tile, not
            the 512-byte interleaved region): re-packing still overflows by 200; the best
            allocation ends at 1024 + 200, so gaps and constraints cost 1224 - 600 = 624.
    tile 3: fits (not listed).
    """
    rows = [  # tile, size, offset, steps, interleaved
        (0, 400, 0, (0, 3), False), (0, 400, 400, (1, 2), False), (0, 400, 1024, (1, 4), False),
        (1, 300, 0, (0, 2), False), (1, 300, 300, (1, 3), False), (1, 300, 600, (3, 5), False),
        (1, 300, 900, (4, 6), False),
        (2, 200, 512, (0, 2), True), (2, 200, 712, (0, 2), True), (2, 200, 1024, (0, 2), True),
        (3, 100, 0, (0, 1), False),
    ]
    n = len(rows)
    steps = np.array([r[3] for r in rows])
    live = (steps[:, None, 0] < steps[None, :, 1]) & (steps[None, :, 0] < steps[:, None, 1])
    inter = [[j for j in range(n) if j != i and live[i, j] and rows[i][0] == rows[j][0]]
             for i in range(n)]
    return Report.from_columns(
        target=SMALL, var_id=list(range(n)), tile=[r[0] for r in rows],
        size=[r[1] for r in rows], alignment=[4] * n, offset=[r[2] for r in rows],
        category=["variable", "message", "stack"] * 3 + ["variable", "variable"],
        eq_class=list(range(n)), interference=inter, class_steps=steps,
        in_interleaved_mem=[r[4] for r in rows],
        names=[f"t{r[0]}/v{i}" for i, r in enumerate(rows)])


def test_hand_verdicts():
    needs("tilemem.liveness", "max_live")
    needs("tilemem.pack.driver", "allocate")
    from tilemem.oom import diagnose

    found = diagnose(hand_report(), time_limit=5)
    assert [d.tile for d in found] == [0, 2, 1]          # worst first: 400, 200, 176 over
    by = {d.tile: d for d in found}
    d0 = by[0]
    assert (d0.excess, d0.max_live_bytes, d0.verdict_code) == (400, 1200, "reduceData")
    assert d0.verdict == "live data alone exceeds memory by 176 bytes: reduce data"
    assert sorted(v["var"] for v in d0.peak_vars) == [0, 1, 2]
    assert d0.peak_by_category == {"variable": 400, "message": 400, "stack": 400}
    assert d0.repack is None
    d1 = by[1]
    assert (d1.excess, d1.max_live_bytes, d1.verdict_code) == (176, 600, "repackFits")
    assert d1.repack["overflowBytes"] == 0 and d1.repack["totalIncludingGaps"] <= 1024
    d2 = by[2]
    assert (d2.excess, d2.max_live_bytes, d2.verdict_code) == (176 + 24, 600, "repackOverflows")
    assert d2.verdict == ("live data fits: re-packing still overflows by 200 bytes "
                          "(gaps and constraints cost 624)")
    assert d2.gap_bytes["memoryEnd"] == 1024 - 912
    assert d2.regions["interleaved"]["used"] == 400 and d2.regions["overflowed"]["used"] == 200


def test_cli_json_lists_only_oom_tiles(tmp_path):
    needs("tilemem.liveness", "max_live")
    needs("tilemem.pack.driver", "allocate")
    path = tmp_path / "hand.json"
    save_report(hand_report(), path)
    res = CliRunner().invoke(cli, ["oom", str(path), "--json", "--time-limit", "5"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert [t["tile"] for t in d["tiles"]] == [0, 2, 1]
    for t in d["tiles"]:
        assert {"tile", "excess", "maxLiveBytes", "verdict", "peakVars", "gapBytes",
                "verdictCode", "peakClasses", "peakByCategory"} <= set(t)
    res = CliRunner().invoke(cli, ["oom", str(path), "--json", "--tiles", "1,3"])
    assert [t["tile"] for t in json.loads(res.output)["tiles"]] == [1]
    res = CliRunner().invoke(cli, ["oom", str(path), "--tiles", "1", "--no-repack"])
    assert res.exit_code == 0 and "re-packing was not tried" in res.output
    assert "tile 1" in res.output and "out of memory by 176" in res.output


def test_no_oom_tile_says_so():
    res = CliRunner().invoke(cli, ["oom", str(SEED)])
    assert res.exit_code == 0 and "No tile is out of memory" in res.output
    res = CliRunner().invoke(cli, ["oom", str(SEED), "--json"])
    assert json.loads(res.output) == {"tiles": []}


def test_generated_report_names_exactly_the_oom_tiles(tmp_path):
    generate_report = needs("tilemem.generate", "generate_report")
    max_live = needs("tilemem.liveness", "max_live")
    needs("tilemem.pack.driver", "allocate")
    r = generate_report(preset="mk1", tiles=16, steps=40, pressure=1.25, seed=5)
    # independently of tilemem.report: highest end per tile from the columns
    a = r.allocated
    high = np.zeros(r.num_tiles, np.int64)
    np.maximum.at(high, r.tile[a], r.offset[a] + r.size[a])
    oom = set(np.flatnonzero(high > r.target.tile_memory).tolist())
    assert oom, "the generator made no out-of-memory tile at this pressure"
    path = tmp_path / "gen.capnp"
    save_report(r, path)
    res = CliRunner().invoke(cli, ["oom", str(path), "--json", "--time-limit", "2"])
    assert res.exit_code == 0, res.output
    tiles = json.loads(res.output)["tiles"]
    assert {t["tile"] for t in tiles} == oom
    tm = r.target.tile_memory
    codes = {t["verdictCode"] for t in tiles}
    assert "reduceData" in codes and codes & {"repackFits", "repackOverflows"}, \
        f"this generated report no longer has both kinds of verdict: {codes}"
    excess = [t["excess"] for t in tiles]
    assert excess == sorted(excess, reverse=True)
    for t in tiles:
        assert t["excess"] == high[t["tile"]] - tm
        bound = max_live(r, t["tile"], time_limit=2)
        assert t["maxLiveBytes"] == bound.max_live_bytes
        if bound.max_live_bytes > tm:
            assert t["verdictCode"] == "reduceData"
            assert f"exceeds memory by {bound.max_live_bytes - tm:,} bytes" in t["verdict"]
        else:
            assert t["verdictCode"] in ("repackFits", "repackOverflows")
            used = t["repack"]["totalIncludingGaps"]
            assert used >= bound.max_live_bytes   # no allocation beats the bound
            assert (t["verdictCode"] == "repackFits") == (used <= tm)


def test_a_repack_that_breaks_a_rule_is_not_trusted(monkeypatch):
    needs("tilemem.liveness", "max_live")
    needs("tilemem.check", "check_allocation")
    alloc = pytest.importorskip("tilemem.pack.driver")
    from tilemem.oom import diagnose
    from tilemem.pack.result import Allocation, TileResult

    r = hand_report()

    def broken(report, *, tiles, **kw):   # every variable at 0: conflicting ones overlap
        off = report.offset.copy()
        results = []
        for t in tiles:
            off[report.tile_rows(t)] = 0
            results.append(TileResult(tile=t, method="broken", status="heuristic",
                                      overflow_bytes=0, total_including_gaps=300, bound=600,
                                      bound_exact=True, gap=0.0, seconds=0.0))
        return Allocation(off, results)

    monkeypatch.setattr(alloc, "allocate", broken)
    d = {x.tile: x for x in diagnose(r, tiles=[1], time_limit=1)}[1]
    assert d.verdict_code == "notRepacked" and d.repack is None
    assert "failed the checker" in d.verdict and "overlap" in d.verdict
