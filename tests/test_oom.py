"""Out-of-memory diagnosis (tilemem.figures.oom, `tilemem oom`)."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import msgspec
import numpy as np
from click.testing import CliRunner

from tilemem.cli import cli
from tilemem.figures.oom import diagnose
from tilemem.generate import generate_report
from tilemem.load import save_report
from tilemem.model import Report
from tilemem.model.target import Target

SEED = Path(__file__).parents[1] / "examples" / "seed.json"
# elements of 256 bytes; interleaved from 512; tileMemory 1024
SMALL = Target(num_tiles=4, tile_memory=1024, interleaved_memory_start=512,
               memory_element_offsets=np.array([0, 256, 512, 768]))


def hand_report():
    """Four tiles, each variable its own class, lifetimes as steps (so max live is exact).

    tile 0: three 400-byte variables live together at step 1 -> 1200 > 1024: reduce data.
            Placed stacked: [0,400) [400,800) [1024,1424) (one overflowed).
    tile 1: four 300-byte variables, never more than two live at once (600 bytes), but the
            report stacks them to 1200: re-packing fits.
    tile 2: three interleaved 200-byte variables live together (600 bytes fits the tile, not
            the 512-byte interleaved region): proven not to fit on those three; re-packing
            overflows by 200 (the best allocation ends at 1024 + 200).
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
    found = diagnose(hand_report(), time_limit=5)
    assert [d.tile for d in found] == [0, 2, 1]          # worst first: 400, 200, 176 over
    by = {d.tile: d for d in found}
    d0 = by[0]
    assert (d0.excess, d0.max_live_bytes, d0.verdict_code) == (400, 1200, "reduceData")
    assert d0.verdict == "live data alone exceeds memory by 176 bytes: reduce data"
    assert sorted(v["var"] for v in d0.peak_vars) == [0, 1, 2]
    assert d0.peak_by_category == {"variable": 400, "message": 400, "stack": 400}
    # re-packed too (its overflow lowered, as alloc would): never below what the live data
    # alone puts past tileMemory
    assert d0.repack is not None and d0.repack.overflow_bytes >= 1200 - 1024
    d1 = by[1]
    assert (d1.excess, d1.max_live_bytes, d1.verdict_code) == (176, 600, "repackFits")
    assert d1.repack.overflow_bytes == 0 and d1.repack.total_including_gaps <= 1024
    d2 = by[2]
    assert (d2.excess, d2.max_live_bytes, d2.verdict_code) == (176 + 24, 600, "provenNoFit")
    assert d2.verdict == ("live data fits, but no allocation does: proven on 3 variables live "
                          "together (re-packing overflows by 200 bytes)")
    assert d2.repack.proven_on == 3
    assert d2.gap_bytes["memoryEnd"] == 1024 - 912
    assert d2.regions["interleaved"]["used"] == 400 and d2.regions["overflowed"]["used"] == 200


def test_cli_json_lists_only_oom_tiles(tmp_path):
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
    doc = json.loads(res.output)
    assert doc["tiles"] == [] and doc["summary"]["outOfMemory"] == 0
    assert not any(doc["summary"]["verdicts"].values()) and doc["summary"]["nextSteps"] == []


def clique_max_live(r, tile: int, heaviest_clique) -> int:
    """Maximum live bytes of ``tile`` from the columns alone, not tilemem.liveness: the
    always-live bytes plus ``heaviest_clique(weights, edges)`` over the tile's classes
    (weight: bytes of their variables that are not always-live; edge: interference)."""
    rows = np.flatnonzero(r.allocated & (r.tile == tile))
    live = r.always_live[rows]
    weight: dict[int, int] = {}
    for i in rows[~live].tolist():
        weight[int(r.eq_class[i])] = weight.get(int(r.eq_class[i]), 0) + int(r.size[i])
    edges = {(a, b) for a in weight for b in r.interference.row(a).tolist()
             if b in weight and a < b}
    edges |= {(b, a) for a, b in edges}
    return int(r.size[rows[live]].sum()) + heaviest_clique(weight, edges)


def brute_force_clique(weight: dict[int, int], edges: set) -> int:
    """The heaviest set of pairwise interfering classes, by trying every subset."""
    classes = sorted(weight)
    best = 0
    for k in range(1, len(classes) + 1):
        for subset in itertools.combinations(classes, k):
            if all((a, b) in edges for a, b in itertools.combinations(subset, 2)):
                best = max(best, sum(weight[c] for c in subset))
    return best


def networkx_clique(weight: dict[int, int], edges: set) -> int:
    """The heaviest clique by networkx's exact branch and bound (no code shared with ours)."""
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from((c, {"w": w}) for c, w in weight.items())
    g.add_edges_from(edges)
    return nx.max_weight_clique(g, weight="w")[1]


def test_max_live_is_brute_force_on_small_reports():
    # random reports of 2 tiles, up to 7 classes a tile and some always-live bytes, every
    # variable stacked so both tiles are out of memory: the figure oom reports is the heaviest
    # set of pairwise interfering classes found by trying every subset
    rng = np.random.default_rng(7)
    target = Target(num_tiles=2, tile_memory=64, interleaved_memory_start=64,
                    memory_element_offsets=np.array([0]))
    checked = 0
    for _ in range(40):
        n = int(rng.integers(6, 14))
        tile = np.sort(rng.integers(0, 2, n))
        tile[0], tile[-1] = 0, 1
        eq_class = rng.integers(0, 7, n) + 7 * tile          # classes of one tile only
        size = rng.integers(1, 9, n) * 4
        offset = np.zeros(n, np.int64)
        for t in (0, 1):
            rows = np.flatnonzero(tile == t)
            offset[rows] = np.concatenate([[0], np.cumsum(size[rows])[:-1]])
            size[rows[-1]] += 64                             # past tileMemory
        inter = [[b for b in range(14) if b != a and b // 7 == a // 7 and rng.random() < 0.5]
                 for a in range(14)]
        r = Report.from_columns(target=target, var_id=list(range(n)), tile=tile, size=size,
                                alignment=[4] * n, offset=offset, category=["variable"] * n,
                                eq_class=eq_class, interference=inter,
                                always_live=rng.random(n) < 0.15)
        found = diagnose(r, repack=False, time_limit=1)
        assert sorted(d.tile for d in found) == [0, 1]
        for d in found:
            assert d.bound_exact
            assert d.max_live_bytes == clique_max_live(r, d.tile, brute_force_clique)
            checked += 1
    assert checked == 80


def test_generated_report_names_exactly_the_oom_tiles(tmp_path):
    r = generate_report(preset="mk1", tiles=16, steps=40, pressure=1.25, seed=2)
    # independently of tilemem.figures: highest end per tile from the columns
    a = r.allocated
    high = np.zeros(r.num_tiles, np.int64)
    np.maximum.at(high, r.tile[a], r.offset[a] + r.size[a])
    oom = set(np.flatnonzero(high > r.target.tile_memory).tolist())
    assert oom, "the generator made no out-of-memory tile at this pressure"
    path = tmp_path / "gen.capnp"
    save_report(r, path)
    # a budget of 3 s: the re-pack's verdicts are a budget's (checked elsewhere); what is
    # checked here is which tiles are named and their figures, from the columns
    res = CliRunner().invoke(cli, ["oom", str(path), "--json", "--time-limit", "2",
                                   "--budget", "3"])
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
        # the gaps by cause add up to the free bytes below the highest end (the bytes no
        # variable covers, from the columns)
        rows = np.flatnonzero(a & (r.tile == t["tile"]) & (r.size > 0))
        covered = set()
        for i in rows.tolist():
            covered.update(range(int(r.offset[i]), int(r.offset[i] + r.size[i])))
        assert sum(t["gapBytes"].values()) == high[t["tile"]] - len(covered)
        bound = clique_max_live(r, t["tile"], networkx_clique)
        assert t["boundExact"] and t["maxLiveBytes"] == bound
        if bound > tm:
            assert t["verdictCode"] == "reduceData"
            assert f"exceeds memory by {bound - tm:,} bytes" in t["verdict"]
        else:
            assert t["verdictCode"] in ("repackFits", "repackOverflows", "provenNoFit")
            used = t["repack"]["totalIncludingGaps"]
            assert used >= bound   # no allocation beats the bound
            assert (t["verdictCode"] == "repackFits") == (used <= tm)


def test_a_repack_that_breaks_a_rule_is_not_trusted(monkeypatch):
    from tilemem.pack.run import driver as alloc
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


def test_oom_names_the_peak_program_step(tmp_path):
    from tilemem.figures.oom import diagnose

    found = {d.tile: d for d in diagnose(hand_report(), repack=False)}
    # by hand from hand_report's steps: where the whole peak live set is live together
    assert found[0].peak_steps == [1, 2]            # (0,3), (1,2), (1,4)
    assert found[2].peak_steps == [0, 2]            # three times (0,2)
    assert found[1].peak_steps in ([1, 2], [4, 5])  # two pairs of 300 B, either is a peak
    assert msgspec.to_builtins(found[0])["peakSteps"] == [1, 2]
    path = tmp_path / "hand.json"
    save_report(hand_report(), path)
    res = CliRunner().invoke(cli, ["oom", str(path), "--tiles", "0", "--no-repack"])
    assert res.exit_code == 0
    assert any(line.strip("│ ") == "peak at program step 1" for line in res.output.splitlines())
    # without the steps extension there is no program step to name
    no_steps = Report.from_columns(
        target=SMALL, var_id=[0, 1], tile=[0, 0], size=[800, 800], alignment=[4, 4],
        offset=[0, 800], category=["variable"] * 2, eq_class=[0, 1], interference=[[1], []])
    (d,) = diagnose(no_steps, repack=False)
    assert d.peak_steps is None and msgspec.to_builtins(d)["peakSteps"] is None


# ---- next steps, the * marker and --tiles without contradiction ----------------------------------

def test_next_steps_follow_what_is_live_at_the_peak():
    by = {d.tile: d for d in diagnose(hand_report(), time_limit=5)}
    d0 = by[0]       # reduceData: 1200 live of 1024; peak = variable 400, message 400, stack 400
    assert d0.next_steps[0].startswith("free at least 176 B of what is live at the peak")
    groups = " | ".join(d0.next_steps[1:])
    # each third of the peak is named with its bytes, its share and its Poplar options
    assert "400 B (33 % of the peak) activations and operation temporaries: recomputation" \
        in groups and "availableMemoryProportion" in groups and "t0/v0" in groups
    assert "exchange and rearrangement buffers" in groups and "t0/v1" in groups
    assert "code, stack and vertex state" in groups and "pipelining" in groups
    d1 = by[1]       # repackFits: the placement costs 1200 - 600 bytes
    assert d1.next_steps[0].startswith("the allocation, not the data, is the problem")
    assert f"reaches {d1.highest_end:,} B; gaps and constraints cost {d1.highest_end - 600:,} B" \
        in d1.next_steps[0]
    assert "freeing 176 B on this tile" in d1.next_steps[1]
    assert by[2].next_steps[0].startswith("the live data fits (600 B) but the placement rules "
                                          "do not let it")


def test_next_steps_split_weights_gradients_and_activations():
    from tilemem.figures.oom import live_groups

    # one tile, all interfering: weights, optimiser state, a gradient, an activation, code
    names = ["enc/layer1/weights", "enc/layer1/weights/momentum", "enc/layer1/bwd/gradIn",
             "enc/layer1/fwd/out", "vertexCode"]
    cats = ["variable"] * 4 + ["vertexCode"]
    n = len(names)
    r = Report.from_columns(
        target=SMALL, var_id=range(n), tile=[0] * n, size=[100, 200, 50, 300, 20],
        alignment=[4] * n, offset=[0, 100, 300, 400, 700], category=cats,
        eq_class=list(range(n)), interference=[[j for j in range(n) if j != i] for i in range(n)],
        names=[f"{x}#0" for x in names])
    got = {g: b for g, (b, _) in live_groups(r, np.arange(n)).items()}
    assert got == {"activations and temporaries": 300, "weights and optimiser state": 300,
                   "gradients": 50, "code and runtime": 20}


def test_oom_view_explains_the_star_and_lists_next_steps(tmp_path):
    path = tmp_path / "hand.json"
    r = hand_report()
    r = Report.from_columns(   # tile 0's stack variable always live: it gets the * marker
        target=r.target, var_id=r.var_id, tile=r.tile, size=r.size, alignment=r.alignment,
        offset=r.offset, category=[r.category_name(i) for i in range(r.num_vars)],
        eq_class=r.eq_class, interference=[r.interference.row(c).tolist()
                                           for c in range(r.num_classes)],
        class_steps=r.class_steps, in_interleaved_mem=r.in_interleaved_mem,
        always_live=[i == 2 for i in range(r.num_vars)],
        names=[r.name(i) for i in range(r.num_vars)])
    save_report(r, path)
    res = CliRunner().invoke(cli, ["oom", str(path), "--tiles", "0", "--time-limit", "5"],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.replace("│", " ").split())
    assert "t0/v2 *" in text and "* always live (alwaysLive)" in text
    assert "Next steps" in text and "recomputation" in text
    res = CliRunner().invoke(cli, ["oom", str(path), "--tiles", "0", "--json"])
    assert json.loads(res.output)["tiles"][0]["nextSteps"][0].startswith("free at least")


def test_oom_tiles_without_oom_says_so_without_contradiction(tmp_path):
    path = tmp_path / "hand.json"
    save_report(hand_report(), path)
    res = CliRunner().invoke(cli, ["oom", str(path), "--tiles", "3"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert text.startswith("None of the tiles asked for (3) is out of memory; the fullest of "
                           "them is tile 3 with 100 B including gaps of 1,024 B. 3 tile(s) out "
                           "of memory elsewhere, worst tile 0 (400 B over).")
    assert "fullest tile is 0" not in text


def test_oom_output_is_the_json_and_its_journal_is_kept_only_while_running(tmp_path):
    """``oom -o D.json`` writes what ``--json`` prints; the re-pack's journal beside it is
    gone once D.json is written; a journal left by an interrupted run is refused without
    ``--resume`` (one line, exit 2) and continued with it."""
    from tilemem.cli import main
    from tilemem.pack.run.journal import journal_path, open_journal, report_digest

    path = tmp_path / "hand.json"
    save_report(hand_report(), path)
    out = tmp_path / "d.json"
    args = ["oom", str(path), "--time-limit", "2", "--method", "heuristic"]
    res = CliRunner().invoke(cli, [*args, "--json"])
    assert res.exit_code == 0, res.output
    res2 = CliRunner().invoke(cli, [*args, "-o", str(out)])
    assert res2.exit_code == 0, res2.output
    assert json.loads(out.read_text()) == json.loads(res.output)
    assert not journal_path(out).exists()
    # an interrupted run's journal (its header only): refused, then resumed
    settings = {"command": "oom", "method": "heuristic", "time_limit": 2.0, "tiles": None,
                "allocation": None}
    _, j = open_journal(out, report_digest(hand_report()), settings)
    j.close()
    assert main([*args, "-o", str(out)]) == 2
    assert journal_path(out).exists()
    res3 = CliRunner().invoke(cli, [*args, "-o", str(out), "--resume"])
    assert res3.exit_code == 0, res3.output
    assert json.loads(out.read_text()) == json.loads(res.output)
    assert not journal_path(out).exists()
