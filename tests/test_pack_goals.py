"""When ``auto`` is finished with a tile (``tilemem.pack.run.scoreboard.finished``): its question
answered (``Goal.FIT``: it fits, or is known not to) or its end within the settle gap of its
bound (``Goal.END``), its time going to the others and the run ending once all are finished.

Every allocation here passes the independent checker; the seams are ``allocate``'s own
parameters (``goal``, ``settle``), not patched module globals.
"""
import time

import numpy as np
import pytest

from pack_oracle import violations
from tilemem.generate import generate_report
from tilemem.model import Report
from tilemem.model.target import Target
from tilemem.pack.run.driver import RunOptions, allocate
from tilemem.pack.run.plan import Policy
from tilemem.pack.kinds import Goal
from tilemem.text.alloc import alloc_json, ended_early_text


@pytest.fixture(scope="module")
def report():
    return generate_report("mk1", tiles=8, steps=300, pressure=1.1, seed=2)


def stacked(capacity: int = 4096) -> Report:
    """One tile whose twelve variables, live in three disjoint groups of four, are stacked
    one after another past tileMemory: the data live together (4 x 256 B) fit many times
    over, so any sensible re-pack fits."""
    n = 12
    size = np.full(n, 256)
    target = Target(1, capacity, capacity // 2, np.array([0, capacity // 2]))
    return Report.from_columns(target=target, var_id=range(n), tile=[0] * n, size=size,
                               alignment=[8] * n, offset=np.arange(n) * 256 + capacity,
                               category=["variable"] * n, eq_class=np.arange(n) // 4,
                               interference=[[], [], []])


def test_a_run_whose_tiles_are_all_settled_after_the_first_pass_ends_there(report):
    """settle=1 (every tile within 100 % of its bound, i.e. all of them): no pass after the
    first, the budget's time left is said; without a settle gap the later passes run."""
    a = allocate(report, budget=3600,
                 policy=Policy(time_limit=0.5, settle=1.0),
                 run=RunOptions(workers=1))
    assert violations(report, a.offsets) == []
    assert [p.label for p in a.passes] == [
        "maximum live bytes", "visits: the heuristic, then the quick search"]
    assert a.ended_early is not None and a.ended_early > 0
    doc = alloc_json("auto", a, 0)
    assert doc.summary.ended_early == a.ended_early and doc.summary.settle == 1.0
    assert "every tile ends within 100% of its bound" in ended_early_text(doc.summary)

    # without a settle gap a tile is finished only when proven optimal: the run goes on
    # revisiting until its budget is spent
    started = time.time()
    b = allocate(report, budget=3,   # the visits take half a second of it
                 policy=Policy(time_limit=0.5, settle=None),
                 run=RunOptions(workers=1))
    assert violations(report, b.offsets) == []
    assert len(b.passes) > 2 and b.ended_early is None and time.time() - started > 2.5


def test_a_tile_that_fits_answers_the_fit_question_at_once():
    """Goal.FIT on an out-of-memory tile that fits once re-packed: the run ends after the
    first pass (the tile fits), with the budget left said; Goal.END on the same tile goes on
    lowering its end unless it is already optimal."""
    r = stacked()
    a = allocate(r, budget=3600,
                 policy=Policy(time_limit=0.5),
                 run=RunOptions(workers=1, goal=Goal.FIT))
    assert violations(r, a.offsets) == []
    (res,) = a.tiles
    assert res.overflow_bytes == 0 and res.total_including_gaps <= r.target.tile_memory
    assert len(a.passes) == 2 and a.ended_early is not None
    assert a.summary()["goal"] == "fit"
    assert "every tile's question is answered" in ended_early_text(
        alloc_json("auto", a, 0).summary)


def test_under_the_fit_goal_only_undecided_tiles_get_the_later_passes(report):
    """Goal.FIT on a report with tiles out of memory: every pass after the first takes only
    tiles that overflow although their bound fits (undecided), never one that fits or cannot
    fit."""
    a = allocate(report, budget=3600,
                 policy=Policy(time_limit=0.5),
                 run=RunOptions(workers=1, goal=Goal.FIT))
    assert violations(report, a.offsets) == []
    tm = report.target.tile_memory
    undecided = sum(r.overflow_bytes > 0 and r.bound <= tm and r.proven_on is None
                    for r in a.tiles)
    cannot = sum(r.bound > tm for r in a.tiles)
    assert cannot > 0   # the report has tiles whose live data alone exceeds tileMemory
    later = a.passes[2:]
    if undecided == 0:
        assert later == [] and a.ended_early is not None
    for p in later:
        assert p.tiles <= len(report.tiles_in_use()) - cannot


def test_the_goal_changes_nothing_without_a_budget(report):
    """``goal`` and ``settle`` act only under auto with a budget: the deterministic run (no
    clock) gives the same offsets whatever they are. Three of the eight tiles (two out of
    memory with the report's offsets, one that fits): the same question at a third of the
    time."""
    tiles = [0, 2, 3]
    # deterministic: the work limits follow the time limit, and a fifth of a second's
    # worth asks the same question as more
    x = allocate(report, tiles=tiles,
                 policy=Policy(time_limit=0.2),
                 run=RunOptions(workers=1, deterministic=True))
    y = allocate(report, tiles=tiles,
                 policy=Policy(time_limit=0.2, settle=1.0),
                 run=RunOptions(workers=1, deterministic=True, goal=Goal.FIT))
    assert [t.tile for t in x.tiles] == tiles
    assert [t.overflow_bytes > 0 for t in allocate(report, method="replay", tiles=tiles,
                                                   run=RunOptions(workers=1)).tiles] \
        == [True, True, False]
    assert np.array_equal(x.offsets, y.offsets)
    assert x.ended_early is None and y.ended_early is None


def test_the_sweep_carries_nothing_over_once_the_budget_is_spent(report):
    """A carry task (the sweep's) past the run's deadline returns the tile's result as it
    was, having built nothing: the sweep must not run past the budget on a report of
    thousands of tiles. Before the deadline the same task does carry a better neighbour's
    allocation over."""
    import time

    from tilemem.pack.kinds import Pass
    from tilemem.pack.run.tasks import TileTask, _Shared, _solve
    from tilemem.rules import DEFAULT_RULES

    a = allocate(report, method="heuristic", run=RunOptions(workers=1))
    res = {r.tile: r for r in a.tiles}
    tiles = [int(t) for t in report.tiles_in_use()[:2]]
    rows = {t: report.tile_rows(t) for t in tiles}
    worse, better = sorted(tiles, key=lambda t: -res[t].gap)
    state = _Shared(report, DEFAULT_RULES)
    bound = (res[worse].bound, res[worse].bound_exact)
    task = TileTask(worse, Pass.CARRY, a.offsets[rows[worse]], res[worse], bound, 0.0, 0,
                    donors=((better, a.offsets[rows[better]]),))
    t, out, off = _solve(state, task, time.time() - 1.0)
    assert t == worse and out.note == res[worse].note and out.seconds == 0.0
    assert np.array_equal(off, a.offsets[rows[worse]])
    t, out, off = _solve(state, task, time.time() + 60.0)
    assert out.seconds > 0.0   # the task ran: its problem built, the donor tried
