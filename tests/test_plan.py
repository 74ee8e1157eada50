"""The plan that fits (``tilemem.figures.plan``): on a generated report that does not fit, the
plan's levers, compiled into the program (``tilemem generate`` with them), fit every tile by
the bound, and every cheaper combination it tried, compiled so, does not."""
import functools
import json
import shlex

import numpy as np
import pytest

import tilemem
from tilemem import Detail, Edits
from tilemem.cli import main
from tilemem.figures.plan import PLAN_LEVERS
from tilemem.generate import Levers, generate_report
from tilemem.liveness import max_live_all
from tilemem.load import save_report

KW = dict(tiles=16, steps=740, seed=1, model="transformer", pressure=1.3)
#: the plan's levers as the generator's options (offloading and the micro-batch are not
#: compile options of the generator: the plan is asked to avoid them)
GENERATOR = {"half-momentum": dict(half_momentum=True), "half-partials": dict(half_partials=True),
             "amp": dict(amp=(0.3,)), "recompute": dict(recompute="all"),
             "rts": dict(replicas=4, rts=True)}
WHAT = {x[1]: x[0] for x in PLAN_LEVERS}


@functools.lru_cache(maxsize=None)
def compiled(*names):
    kw = {}
    for n in names:
        kw.update(GENERATOR[n])
    return generate_report("mk1", levers=Levers(**kw), **KW)


def worst(r):
    return max(m.max_live_bytes for m in max_live_all(r, r.tiles_in_use()))


def test_the_plan_compiled_fits_and_nothing_cheaper_does():
    base = compiled()
    tm = base.target.tile_memory
    assert worst(base) > tm
    d = tilemem.diagnose(base, repack=False, detail=Detail(avoid=["offload", "micro-batch"]))
    p = d.summary.plan
    assert p is not None and p.tiles_left == 0 and p.tried >= 1
    names = tuple(WHAT[x] for x in p.levers)
    assert worst(compiled(*names)) <= tm
    # the cheaper combinations (by the plan's own ranks) do not fit, compiled so
    rank = {x[0]: x[4] for x in PLAN_LEVERS}
    cost = sum(rank[n] for n in names)
    cheaper = [(n,) for n in GENERATOR if rank[n] < cost]
    cheaper += [(a, b) for a in GENERATOR for b in GENERATOR
                if a < b and rank[a] + rank[b] < cost]
    assert cheaper
    for c in cheaper:
        assert worst(compiled(*c)) > tm, c


SHARDING = dict(tiles=16, steps=400, seed=2, model="cnn", pressure=1.6)
OTHERS = ["offload", "micro-batch", "half-momentum", "half-partials", "amp", "recompute"]


def test_sharding_the_weights_is_planned_where_the_state_alone_does_not_fit():
    # a cnn whose weights are a large part of its peaks: sharding the optimiser state over
    # 4 replicas is the cheaper lever (rank 6) but leaves tiles over; the weights sharded
    # too (rank 7) fit, compiled so (generate --replicas 4 --rts [--rts-weights])
    base = generate_report("mk1", **SHARDING)
    tm = base.target.tile_memory
    p = tilemem.diagnose(base, repack=False, detail=Detail(avoid=OTHERS)).summary.plan
    assert p.levers == ["optimiser state and weights sharded over 4 replicas"]
    assert p.tiles_left == 0 and p.what_if == "--rts 4 --rts-weights" and p.cost == 7
    state = generate_report("mk1", levers=Levers(replicas=4, rts=True), **SHARDING)
    both = generate_report("mk1", levers=Levers(replicas=4, rts=True, rts_weights=True),
                           **SHARDING)
    assert worst(state) > tm >= worst(both)
    # preferred, it is the plan at cost 0; never with the state's sharding alone
    q = tilemem.diagnose(base, repack=False, detail=Detail(prefer=["rts-weights"])).summary.plan
    assert q.levers[0] == "optimiser state and weights sharded over 4 replicas" and q.cost == 0
    assert "optimiser state sharded over 4 replicas" not in q.levers


def test_prefer_moves_a_lever_first_and_avoid_leaves_it_out():
    base = compiled()
    a = tilemem.diagnose(base, repack=False,
                         detail=Detail(avoid=["offload", "micro-batch", "recompute"]))
    assert "recompute every layer" not in a.summary.plan.levers
    # preferred, a lever is tried first (rank 0); alone it fits here by more than its error
    # (half the micro-batch, preferred, would only be close: its estimate's error is wide)
    b = tilemem.diagnose(base, repack=False, detail=Detail(prefer=["recompute"]))
    assert b.summary.plan.levers == ["recompute every layer"] and b.summary.plan.cost == 0
    c = tilemem.diagnose(base, repack=False, detail=Detail(prefer=["micro-batch"]))
    assert c.summary.plan.levers != ["half the micro-batch"]


def what_if_options(text: str) -> dict:
    """A next step's ``what-if`` options as ``tilemem.what_if``'s ``Edits`` keywords."""
    words = shlex.split(text)
    kw = {"offload": [], "scale": {}}
    for opt, value in zip(words[::2], words[1::2]):
        if opt == "--offload":
            kw["offload"].append(value)
        elif opt == "--scale":
            pattern, _, factor = value.rpartition("=")
            kw["scale"][pattern] = float(factor)
        else:
            assert opt == "--micro-batch", opt
            kw["micro_batch"] = float(value)
    return kw


def test_next_steps_fix_what_they_say_and_plumbing_is_not_recomputed():
    """Each step's count of tiles brought under tileMemory, against the what-if it names
    run on its own and every tile that needed less data searched again (``max_live_all``
    on the changed report); a step is offered only when that count is not 0."""
    base = generate_report("mk1", tiles=12, steps=500, seed=2, model="transformer",
                           splits=(1,), pressure=2.2)
    tm = base.target.tile_memory
    need = np.array([m.tile for m in max_live_all(base, base.tiles_in_use())
                     if m.max_live_bytes > tm])
    d = tilemem.diagnose(base, repack=False, detail=Detail(plan=False))
    assert d.summary.next_steps and len(need)
    for s in d.summary.next_steps:
        assert s.what_if and s.of_tiles == len(need)
        changed = tilemem.what_if(base, Edits(**what_if_options(s.what_if))).report
        fixed = sum(m.max_live_bytes <= tm for m in max_live_all(changed, need))
        assert s.tiles_fixed == fixed > 0, s.action
        if "recompute" in s.action:
            assert "pipeline" not in s.action


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = tmp_path_factory.mktemp("plan") / "t.capnp"
    save_report(compiled(), p)
    return p


def test_cli_prints_the_plan_and_its_json(path, capsys):
    assert main(["oom", str(path), "--no-repack", "--avoid", "offload,micro-batch"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Plan that fits" in out and "tilemem what-if" in out
    if "Next steps" in out:   # the plan first: users read the top
        assert out.index("Plan that fits") < out.index("Next steps")
    assert main(["oom", str(path), "--no-repack", "--json", "--avoid", "offload"]) == 0
    plan = json.loads(capsys.readouterr().out)["summary"]["plan"]
    assert plan["tilesLeft"] == 0 and plan["whatIf"]


def test_the_cli_plans_the_weights_sharded_when_preferred(path, capsys):
    assert main(["oom", str(path), "--no-repack", "--json", "--prefer", "rts-weights"]) == 0
    plan = json.loads(capsys.readouterr().out)["summary"]["plan"]
    assert plan["levers"][0] == "optimiser state and weights sharded over 4 replicas"
    assert plan["whatIf"].startswith("--rts 4 --rts-weights") and plan["cost"] == 0
    assert plan["costs"][0].startswith("rts-weights: rank 0")


@pytest.mark.parametrize("opt", ["--prefer", "--avoid"])
def test_an_unknown_lever_is_one_line_exit_2(path, opt, capsys):
    assert main(["oom", str(path), "--no-repack", opt, "cheaper"]) == 2
    err = capsys.readouterr().err
    assert opt in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("model,splits", [("cnn", None), ("transformer", None),
                                          ("cnn", (11,)), ("transformer", (1,))])
def test_every_lever_and_combination_by_the_shared_structure_equals_a_fresh_search(
        model, splits):
    """What the plan and the next steps ask (``WhatIfBounds``: the tiles' class graphs taken
    apart once, each what-if a re-weighting) against ``max_live_all`` run afresh on the
    what-if's own report, per tile: each lever alone, recomputation with each other lever,
    and every lever at once; one IPU (interval interference) and pipelined (not)."""
    from tilemem.figures.plan import PLAN_LEVERS, combination_edits
    from tilemem.figures.whatif.edits import apply_edits, apply_recompute
    from tilemem.figures.whatif.bounds import WhatIfBounds

    r = generate_report("mk1", tiles=12, steps=200 if model == "cnn" else 500, seed=3,
                        model=model, splits=splits, pressure=1.2)
    tiles = r.tiles_in_use()[::2]
    fast = WhatIfBounds(r, tiles)
    by_name = {x[0]: x for x in PLAN_LEVERS}
    combos = [(x,) for x in by_name] + [("recompute", x) for x in by_name if x != "recompute"]
    combos.append(tuple(by_name))
    for combo in combos:
        edits = combination_edits([by_name[name] for name in combo])
        got, _ = fast.of_edits(edits)
        changed, _ = apply_edits(r, edits)
        changed, _, _ = apply_recompute(changed, edits, base=r)
        want = [m.max_live_bytes for m in max_live_all(changed, tiles)]
        assert got.tolist() == want, combo


def test_the_page_shows_the_plan_before_the_next_steps(path, tmp_path):
    """``tilemem html``'s program section: the plan ``tilemem.diagnose`` finds (its levers,
    what it leaves, the what-if command), before the next steps (the page's HTML, no
    browser)."""
    import html
    import re

    pytest.importorskip("bokeh", reason="tilemem html needs the html extra (bokeh)")
    page = tmp_path / "p.html"
    assert main(["html", str(path), "-o", str(page), "--no-repack"]) == 0
    text = html.unescape(page.read_text())
    section = re.search(r'<section id="program">(.*?)</section>', text, re.S).group(1)
    want = tilemem.diagnose(compiled(), repack=False).summary.plan
    assert want is not None and want.tiles_left == 0
    plan = section[section.index('<div id="plan">'):]
    assert plan.startswith('<div id="plan"><h3>Plan that fits</h3>')
    assert f"tilemem what-if {path.name} {want.what_if}" in plan
    for lever in want.levers:
        assert lever in plan
    assert f"every one of the {want.of_tiles:,} tiles that need less data" in plan
    if "<h3>Next steps" in section:
        assert section.index('<div id="plan">') < section.index("<h3>Next steps")


def _eager_plan(r, need, prefer, avoid, max_tries):
    """The plan as first written: every lever asked what it matches before any combination
    is tried (the reference the plan, which asks only the levers of the combination it
    tries next, must equal; no time limit)."""
    import itertools

    from tilemem.errors import ReportError
    from tilemem.figures.config.margins import lever_margin
    from tilemem.figures.plan import combination_edits, compatible
    from tilemem.figures.whatif.bounds import WhatIfBounds

    tm = r.target.tile_memory
    levers = [x for x in PLAN_LEVERS if x[0] not in set(avoid)]
    rank = {x[0]: (0 if x[0] in set(prefer) else x[4]) for x in levers}

    bounds = WhatIfBounds(r, need)
    useful = []
    for x in levers:
        try:
            applied = bounds.matched(combination_edits([x]))
        except ReportError:
            continue
        if all(a.variables > 0 for a in applied):
            useful.append(x)
    if not useful:
        return None
    combos = [c for k in range(1, len(useful) + 1) for c in itertools.combinations(useful, k)
              if compatible([x[0] for x in c])]
    combos.sort(key=lambda c: (sum(rank[x[0]] for x in c), len(c)))
    order = combos[:max_tries - 1] + ([combos[-1]] if len(combos) >= max_tries else [])
    best, tried = None, 0
    for c in order:
        b = bounds.of_edits(combination_edits(c))[0]
        tried += 1
        # a tile within the levers' summed error of tileMemory is close, not fitting
        under = int(np.floor(tm * (1 - lever_margin(x[0] for x in c))))
        left, close = int((b > tm).sum()), int(((b > under) & (b <= tm)).sum())
        free, short = int((b[b > tm] - tm).sum()), int((b[b > under] - under).sum())
        if best is None or (left + close, left, short) < best[1]:
            best = (c, (left + close, left, short), left, free)
        if left + close == 0:
            break
    c, _, left, free = best
    return ([x[0] for x in c], left, free, tried)


@pytest.mark.parametrize("max_tries", [2, 3, 40])
def test_the_plan_asking_levers_as_it_goes_equals_asking_them_all_first(max_tries,
                                                                        monkeypatch):
    """The plan asks a lever what it matches only when a combination with it is next: the
    plan is the one found by asking every lever first (``_eager_plan``), for preferred and
    avoided levers that make the first combinations fit or not, and few tries (the last
    combination tried is then the one of every useful lever)."""
    import tilemem.figures.plan as plan
    from tilemem.figures.whatif.bounds import WhatIfBounds

    monkeypatch.setattr(plan, "MAX_TRIES", max_tries)
    r = compiled()
    need = [m.tile for m in max_live_all(r, r.tiles_in_use())
            if m.max_live_bytes > r.target.tile_memory]
    asked = []
    matched = WhatIfBounds.matched
    monkeypatch.setattr(WhatIfBounds, "matched",
                        lambda self, edits: asked.append(edits) or matched(self, edits))
    settings = [((), ()), ((), ("half-momentum", "half-partials", "amp")),
                (("micro-batch",), ()), (("rts-weights", "amp"), ("micro-batch",)),
                ((), ("half-momentum", "half-partials", "amp", "recompute", "offload"))]
    for prefer, avoid in settings:
        asked.clear()
        got = plan.plan_that_fits(r, need, prefer, avoid)
        n_asked = len(asked)
        want = _eager_plan(r, need, prefer, avoid, max_tries)
        assert want is not None
        assert ([WHAT[x] for x in got.levers], got.tiles_left, got.bytes_to_free,
                got.tried) == want, (prefer, avoid)
        assert n_asked <= len(PLAN_LEVERS) - len(avoid)
        if want[3] == 1:   # the first combination: only its levers were asked
            assert n_asked == len(want[0]), (prefer, avoid)
