"""The packing driver (``tilemem.pack.driver``) and its methods against independent
expectations.

- every method's allocation passes the independent checker (``pack_oracle.violations``);
- exact is never worse than the heuristic, the heuristic never worse than replay;
- identical tiles are solved once; the worker processes give the same offsets as one process.
"""
import dataclasses
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pack_oracle import examples, passes_both_checkers, small_reports, violations
from pack_oracle import objective as oracle_objective
from tilemem.check import check_allocation
from tilemem.model import Report
from tilemem.pack import driver, schedule, tasks
from tilemem.pack.bounds import tile_bounds
from tilemem.pack.driver import allocate
from tilemem.pack.result import TileResult
from tilemem.model.target import Target


def keys(r, off):
    return [oracle_objective(r, off, t) for t in range(r.num_tiles)]


@examples(1000)
@given(small_reports(max_vars=10, tiles=2))
def test_replay_and_heuristic_pass_the_checker(r):
    rep = allocate(r, method="replay", workers=1)
    heu = allocate(r, method="heuristic", workers=1)
    passes_both_checkers(r, rep.offsets)
    passes_both_checkers(r, heu.offsets)
    for k_rep, k_heu in zip(keys(r, rep.offsets), keys(r, heu.offsets)):
        assert k_heu <= k_rep  # replay's order is one of the heuristic's candidates
    for res in heu.tiles:
        over, total = oracle_objective(r, heu.offsets, res.tile)
        assert (res.overflow_bytes, res.total_including_gaps) == (over, total)
        if res.status == "optimal":  # claimed by the bound: the bound must be met
            assert over == 0 and total <= res.bound


@examples(200)
@given(small_reports(max_vars=9, tiles=2), st.sampled_from(["auto", "exact"]))
def test_exact_passes_the_checker_and_beats_the_heuristic(r, method):
    heu = allocate(r, method="heuristic", workers=1)
    ex = allocate(r, method=method, workers=1, time_limit=5, deterministic=True)
    passes_both_checkers(r, ex.offsets)
    for k_heu, k_ex in zip(keys(r, heu.offsets), keys(r, ex.offsets)):
        assert k_ex <= k_heu


def test_identical_tiles_are_solved_once():
    n = 6
    r = Report.from_columns(target=Target(3, 256, 128, np.array([0, 64, 128, 192])),
                            var_id=range(3 * n), tile=[0] * n + [1] * n + [2] * n,
                            size=[16, 24, 8, 40, 4, 12] * 3, alignment=[4] * (3 * n),
                            offset=[0] * (3 * n), category=["variable"] * (3 * n),
                            eq_class=[0, 1, 2, 0, 1, 2] * 3,
                            interference=[[1], [0, 2], [1]],
                            allocation_order=[list(range(t * n, t * n + n)) for t in range(3)])
    a = allocate(r, method="heuristic", workers=1)
    assert [t.note for t in a.tiles][1:] == ["same problem as tile 0"] * 2
    assert a.offsets[:n].tolist() == a.offsets[n:2 * n].tolist() == a.offsets[2 * n:].tolist()
    assert violations(r, a.offsets) == []


@pytest.mark.parametrize("method", ["replay", "heuristic", "auto"])
def test_process_pool_gives_the_same_offsets(method):
    rng = np.random.default_rng(0)
    n, tiles = 60, 4
    r = Report.from_columns(target=Target(tiles, 1024, 512, np.array([0, 256, 512, 768])),
                            var_id=range(n), tile=rng.integers(0, tiles, n),
                            size=rng.integers(1, 30, n) * 4,
                            alignment=rng.choice([4, 8, 16], n), offset=[0] * n,
                            category=["variable"] * n, eq_class=rng.integers(0, 8, n),
                            interference=[sorted(set(rng.integers(0, 8, 3).tolist()))
                                          for _ in range(8)],
                            in_interleaved_mem=rng.random(n) < 0.3)
    one = allocate(r, method=method, workers=1, time_limit=2, deterministic=True)
    two = allocate(r, method=method, workers=2, time_limit=2, deterministic=True)
    assert violations(r, two.offsets) == []
    if method != "auto":  # the exact part may stop at different points under load
        assert one.offsets.tolist() == two.offsets.tolist()


def test_generated_report_heuristic_never_overflows_more_than_replay():
    """A generated Mk1 report with tiles out of memory: per tile, the heuristic (and auto)
    overflows no more than replaying the report's own order, and everything checks."""
    from tilemem.generate import generate_report

    r = generate_report("mk1", tiles=8, steps=300, pressure=1.3, seed=1)
    rep = allocate(r, method="replay", workers=1)
    heu = allocate(r, method="heuristic", workers=2, verify=True)
    auto = allocate(r, method="auto", workers=2, time_limit=1, verify=True)
    assert rep.summary()["tilesThatFit"] < len(rep.tiles)  # some tiles really are full
    assert check_allocation(r, rep.offsets).ok
    for a, b, c in zip(rep.tiles, heu.tiles, auto.tiles):
        assert a.tile == b.tile == c.tile
        assert c.overflow_bytes <= b.overflow_bytes <= a.overflow_bytes
        assert (c.overflow_bytes, c.total_including_gaps) <= (b.overflow_bytes,
                                                             b.total_including_gaps)


def three_tiles():
    """Three different tiles (no two share a problem) of conflicting variables."""
    rng = np.random.default_rng(7)
    n = 18
    return Report.from_columns(target=Target(3, 1024, 512, np.array([0, 256, 512, 768])),
                               var_id=range(n), tile=np.repeat([0, 1, 2], 6),
                               size=rng.integers(1, 30, n) * 4, alignment=[4] * n,
                               offset=[0] * n, category=["variable"] * n,
                               eq_class=rng.integers(0, 5, n),
                               interference=[[1, 2], [0, 3], [0, 4], [1], [2]])


def test_given_bounds_are_used_instead_of_computed(monkeypatch):
    r = three_tiles()
    computed = tile_bounds(r, [0, 1, 2])
    calls = []

    def counting(report, tiles, time_limit=10.0):
        calls.append(sorted(int(t) for t in tiles))
        return tile_bounds(report, tiles, time_limit)

    monkeypatch.setattr(tasks, "tile_bounds", counting)
    own = allocate(r, method="heuristic", workers=1)
    assert calls == [[0, 1, 2]]
    given_ = allocate(r, method="heuristic", workers=1, bounds=computed)
    assert calls == [[0, 1, 2]]  # nothing computed again
    assert given_.offsets.tolist() == own.offsets.tolist()
    assert [t.bound for t in given_.tiles] == [t.bound for t in own.tiles]
    # only the tiles missing from ``bounds`` are computed; a given one is what the result says
    calls.clear()
    part = allocate(r, method="heuristic", workers=1, bounds={1: (5000, False)})
    assert calls == [[0, 2]]
    assert (part.tiles[1].bound, part.tiles[1].bound_exact) == (5000, False)


def test_a_failing_worker_fails_the_call(monkeypatch):
    def boom(p, method, **kw):
        raise ValueError(f"boom on tile {p.tile}")

    monkeypatch.setattr(tasks, "solve_tile", boom)
    with pytest.raises(ValueError, match="boom on tile"):
        allocate(three_tiles(), method="heuristic", workers=2)


def test_verify_raises_on_a_broken_allocation(monkeypatch):
    def overlapping(p, method, **kw):  # every variable at 0: conflicting ones overlap
        res = TileResult(tile=p.tile, method=method, status="heuristic", overflow_bytes=0,
                         total_including_gaps=int(p.size.max()), bound=0, bound_exact=False,
                         gap=0.0, seconds=0.0)
        return res, np.zeros(p.n, np.int64)

    monkeypatch.setattr(tasks, "solve_tile", overlapping)
    r = three_tiles()
    assert violations(r, allocate(r, method="heuristic", workers=1).offsets) != []
    with pytest.raises(AssertionError, match="failed the checker"):
        allocate(r, method="heuristic", workers=1, verify=True)



def test_auto_brings_every_tile_near_its_bound_before_exact_work(monkeypatch):
    """``auto``'s order of work: on every tile, the heuristic and then the quick search
    stopped within 1% of the bound ("near", one task from no hint), before any exact work or
    a second, longer quick search ("quick") on any tile."""
    from tilemem.generate import generate_report

    r = generate_report("mk1", tiles=8, steps=300, pressure=1.1, seed=2)
    calls = []
    real = tasks.solve_tile

    def spy(p, method, **kw):
        calls.append((p.tile, method, kw.get("hint") is None))
        return real(p, method, **kw)

    monkeypatch.setattr(tasks, "solve_tile", spy)
    a = allocate(r, workers=1, time_limit=0.5, verify=True)
    methods = [m for _, m, _ in calls]
    passes = [m for i, m in enumerate(methods) if i == 0 or m != methods[i - 1]]
    assert passes[0] == "near", passes
    later = [m for m in passes[1:] if m != "fit"]
    # the exact stage on the tiles still above 1% (when there are any), then the sweep that
    # carries a better neighbour's allocation over to those still above 1% (when one has
    # such a neighbour), the quick search on the others, the exact stage on the rest
    if "carry" in later:
        assert later[:2] == ["auto", "carry"], passes
        later.remove("carry")
    assert (later == ["auto", "quick", "auto"][:len(later)]
            or later == ["quick", "auto"][:len(later)]), passes
    # "near" came first on every tile, from no hint (the heuristic inside the same task)
    first = {}
    for t, m, fresh in calls:
        first.setdefault(t, (m, fresh))
    assert set(first) == set(a.tiles[i].tile for i in range(len(a.tiles)))
    assert all(m == "near" and fresh for m, fresh in first.values())
    assert all(t.status in ("optimal", "heuristic", "feasible") for t in a.tiles)
    assert [x.label for x in a.passes][:2] == ["maximum live bytes",
                                              "heuristic, then quick search to 1% of the bound"]


def test_unreached_and_unsearched_tiles_are_counted_apart(monkeypatch):
    """A run's budget that ends before any search: every tile the heuristic left above its
    bound is "unreached" and "unsearched" (it keeps the first pass's allocation). One that
    ends during the second quick pass: the tiles the first pass (the quick search from no
    hint, an even share of the budget) reached are unreached by the exact stage but not
    unsearched."""
    from tilemem.generate import generate_report

    r = generate_report("mk1", tiles=8, steps=300, pressure=1.1, seed=2)
    open_tiles = {res.tile for res in allocate(r, method="heuristic", workers=1).tiles
                  if res.status != "optimal"}
    assert open_tiles
    a = allocate(r, workers=1, time_limit=0.5, budget=0.0)
    assert a.unreached == a.unsearched == len(open_tiles)
    assert a.summary()["unsearched"] == len(open_tiles)
    # those of them the exact stage was for: still above 1% of their bound
    far = sum(t.gap > 0.01 for t in a.tiles)
    assert a.unreached_far == a.summary()["unreachedAboveOnePercent"] == far > 0

    calls = []
    real_solve, real_remaining = tasks.solve_tile, tasks.remaining

    def spy(p, method, **kw):
        calls.append((p.tile, method, kw.get("hint") is None))
        return real_solve(p, method, **kw)

    def remaining(deadline, limit):
        # the budget runs out once the second quick pass (from a hint) has started (not on
        # the clock)
        later = any(m == "quick" and not fresh for _, m, fresh in calls)
        return 0.0 if later else real_remaining(deadline, limit)

    monkeypatch.setattr(tasks, "solve_tile", spy)
    monkeypatch.setattr(tasks, "remaining", remaining)
    a = allocate(r, workers=1, time_limit=0.5, budget=600)
    first = {t for t, m, fresh in calls if m == "quick" and fresh}
    # the tiles not finished with (``_finished``: optimal, or settled within SETTLE_GAP)
    tm = r.target.tile_memory
    left = {t.tile for t in a.tiles if not driver._finished(t, tm, "end", driver.SETTLE_GAP)}
    assert any(m == "quick" and not fresh for _, m, fresh in calls) and left <= first
    assert a.unsearched == 0 and a.unreached == len(left) > 0


def test_the_exact_stage_reaches_every_tile_left_above_one_percent(monkeypatch):
    """With a budget, every tile the first pass leaves above 1% of its bound gets the exact
    stage, in one task with an even share of the time left (not a floor that runs out before
    the last ones)."""
    from tilemem.generate import generate_report

    r = generate_report("mk1", tiles=8, steps=300, pressure=1.1, seed=2)
    calls, high = [], set()
    real = tasks.solve_tile

    def spy(p, method, **kw):
        first = method == "quick" and kw.get("hint") is None
        if first:
            method = "heuristic"   # a first pass that leaves tiles above 1%
        calls.append((p.tile, method, kw.get("time_limit")))
        res, off = real(p, method, **kw)
        if first and res.gap > driver.NEAR and res.overflow_bytes == 0:
            high.add(p.tile)
        return res, off

    monkeypatch.setattr(tasks, "solve_tile", spy)
    a = allocate(r, workers=1, time_limit=5.0, budget=8.0, verify=True)
    exact = {t: limit for t, m, limit in calls if m == "auto"}
    assert len(high) >= 2 and high <= set(exact), (high, exact)
    assert not any(driver._SPENT in t.note for t in a.tiles if t.tile in high)
    # even shares of the time left, not the per-tile cap first: the first tile handed out
    # gets less than the cap and none is starved (a tile that reaches its bound early leaves
    # its time to the later ones, so the last may get the cap)
    order = [t for t, m, _ in calls if m == "auto" and t in high]
    assert exact[order[0]] < 5.0 and all(exact[t] > 0.05 for t in high), exact


def test_a_second_round_of_the_exact_stage_takes_the_tiles_still_above_one_percent(
        monkeypatch):
    """A first round of the exact stage that leaves every tile above 1% where it was, in no
    time: the time it left goes to a second round, with another seed, on those same tiles
    (none else), at least ``AGAIN_LEAST`` a tile, within the budget; they end no worse."""
    from tilemem.generate import generate_report

    r = generate_report("mk1", tiles=8, steps=300, pressure=1.1, seed=2)
    monkeypatch.setattr(driver, "DONORS", 0)   # no sweep: the tiles stay as round 1 left them
    calls, high = [], {}
    real = tasks.solve_tile

    def spy(p, method, **kw):
        first = method == "quick" and kw.get("hint") is None
        calls.append((p.tile, method, kw["seed"], kw.get("time_limit")))
        if first or (method == "auto" and kw["seed"] == 0):
            method = "heuristic"   # a first pass, and a first round, that leave tiles above 1%
        res, off = real(p, method, **kw)
        if first and res.gap > driver.NEAR and res.overflow_bytes == 0:
            high[p.tile] = res.total_including_gaps
        return res, off

    monkeypatch.setattr(tasks, "solve_tile", spy)
    started = time.time()
    a = allocate(r, workers=1, time_limit=5.0, budget=20.0, verify=True)
    assert time.time() - started < 20.0 + 5.0
    again = {t: limit for t, m, seed, limit in calls if m == "auto" and seed == 2}
    # the first round: the exact stage's calls (seed 0) before the second round's
    k = next(i for i, (_, m, seed, _) in enumerate(calls) if m == "auto" and seed == 2)
    first_round = {t for t, m, seed, _ in calls[:k] if m == "auto" and seed == 0}
    # the second round takes the first's tiles, among them every tile the first pass left
    # above 1% (a tile the fit stage brought to fit may join them), and no others
    assert len(high) >= 2 and set(high) <= set(again) <= first_round, (high, again)
    assert all(limit >= driver.AGAIN_LEAST for limit in again.values()), again
    ends = {t.tile: t.total_including_gaps for t in a.tiles}
    assert all(ends[t] <= end for t, end in high.items())


def _first_end_seen(state, task, deadline):
    """A pool task: the first pass's end as this worker process sees it."""
    return driver._FIRST_END.value


def test_an_even_share_follows_the_first_pass_end_the_driver_revises():
    # 200 s left for 100 tasks on 2 workers: 4 s each less the set-up; revised to 100 s
    # left, 2 s each; a revision later than the task's own end, or none, changes nothing
    fixed = driver.EvenShare(300.0, 0, 100, 2, 0.1, 10.0)
    revised = driver.EvenShare(300.0, 0, 100, 2, 0.1, 10.0, revised=True)
    setup = driver._SETUP.seconds()   # this process's measure (SETUP_SECONDS until measured)
    try:
        driver._FIRST_END.value = 200.0
        assert fixed.seconds(100.0) == pytest.approx(4.0 - setup)
        assert revised.seconds(100.0) == pytest.approx(2.0 - setup)
        driver._FIRST_END.value = 400.0
        assert revised.seconds(100.0) == pytest.approx(4.0 - setup)
        driver._FIRST_END.value = float("nan")
        assert revised.seconds(100.0) == pytest.approx(4.0 - setup)
    finally:
        driver._FIRST_END.value = float("nan")


def test_tiles_near_capacity_get_a_larger_share_of_the_first_pass(monkeypatch):
    """In the first pass under a budget, a tile whose bound is within 2% below tileMemory
    (would it fit?) gets ``NEAR_WEIGHT`` times the share of a tile far below: its task's
    share has that weight, out of the weights of the tasks from it on; the others one."""
    from tilemem.generate import generate_report

    r = generate_report("mk1", tiles=8, steps=300, pressure=0.8, seed=2)
    tm = r.target.tile_memory
    tiles = [int(t) for t in r.tiles_in_use()]
    near = set(tiles[::2])
    # the bounds given: every other tile near capacity, the rest at half of it
    bounds = {t: (tm - 64 if t in near else tm // 2, True) for t in tiles}
    seen = []
    real = driver._solve_run

    def spy(shared, run, deadline):
        # the first pass's shares (the later passes' are not revised by the forecast)
        seen.extend((task.tile, task.share) for task in run.tasks
                    if task.share is not None and task.share.revised)
        return real(shared, run, deadline)

    monkeypatch.setattr(driver, "_solve_run", spy)
    monkeypatch.setattr(tasks, "solve_tile", lambda p, method, **kw: _heuristic_only(p, **kw))
    allocate(r, workers=1, time_limit=0.5, budget=60.0, bounds=bounds)
    assert sorted(t for t, _ in seen) == sorted(tiles)
    weights = [share.weight for _, share in seen]
    assert weights == [driver.NEAR_WEIGHT if t in near else 1.0 for t, _ in seen]
    assert [share.rest for _, share in seen] == [sum(weights[i:]) for i in range(len(seen))]
    # at one moment, with the same tasks after it, a near tile's share (its set-up added
    # back) is NEAR_WEIGHT times a far tile's: a moment where one weight's part is 0.5 s,
    # between the shares' floor and cap
    share = next(share for t, share in seen if t in near)
    far = dataclasses.replace(share, weight=1.0)
    now = share.until - 0.5 * share.rest / share.workers
    setup = driver._SETUP.seconds()
    assert share.seconds(now) + setup == pytest.approx(driver.NEAR_WEIGHT * 0.5, abs=1e-5)
    assert far.seconds(now) + setup == pytest.approx(0.5, abs=1e-5)


def _heuristic_only(p, **kw):
    """``solve_tile`` with the heuristic alone (a fast first pass for the tests)."""
    from tilemem.pack.portfolio import solve_tile

    kw.pop("hint", None)
    return solve_tile(p, "heuristic", **{k: v for k, v in kw.items()
                                         if k in ("bound", "replay_order", "seed", "given")})


def test_an_even_share_subtracts_the_set_up_this_process_measured(monkeypatch):
    # 4 s a task for 100 tasks on 2 workers; the set-up measured at 0.5 s a task leaves 3.5 s
    clock = schedule._SetUpClock(enough=2)
    monkeypatch.setattr(schedule, "_SETUP", clock)
    share = driver.EvenShare(300.0, 0, 100, 2, 0.1, 10.0)
    assert share.seconds(100.0) == pytest.approx(4.0 - driver.SETUP_SECONDS)
    clock.add(0.4)
    clock.add(0.6)
    assert share.seconds(100.0) == pytest.approx(3.5)


def test_the_pool_workers_see_the_first_pass_end_revised_after_they_started():
    from tilemem.pack.cluster import LocalPool

    try:
        with LocalPool(None, workers=2) as pool:   # forked here
            driver._FIRST_END.value = 123.5
            seen = [v for _, v in pool.run(_first_end_seen, [0, 1, 2, 3])]
        assert seen == [123.5] * 4
    finally:
        driver._FIRST_END.value = float("nan")


def _count_started(state, task, deadline):
    """A pool task: count itself as started, as the exact stage's tasks do."""
    with driver._STARTED.get_lock():
        driver._STARTED.value += 1


def test_the_pool_workers_count_the_tasks_started_where_the_driver_sees_it():
    from tilemem.pack.cluster import LocalPool

    try:
        with LocalPool(None, workers=2) as pool:   # forked here
            driver._STARTED.value = 0
            list(pool.run(_count_started, list(range(6))))
            assert driver._STARTED.value == 6
    finally:
        driver._STARTED.value = -1


@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=60),
       st.integers(0, 20), st.integers(1, 4))
def test_the_reserve_forecast_counts_what_it_saw_and_stays_within_its_bounds(results, near,
                                                                            workers):
    """Once every tile is in, the forecast is the count of what the results asked (no prior
    left); at every step its seconds stay between the floor and the cap of the span."""
    from tilemem.pack.schedule import FIRST_RESERVE, MAX_RESERVE, ReserveForecast
    n = len(results)
    near_set = set(range(min(near, n)))
    f = ReserveForecast(n, near_set, workers, 240.0)
    for t, (may_fit, high) in enumerate(results):
        high = high and not may_fit   # a tile asks one stage or the other
        f.add(t, may_fit, high)
        assert FIRST_RESERVE * 240.0 <= f.seconds() <= MAX_RESERVE * 240.0
    assert f.fit_tiles() == pytest.approx(sum(m for m, _ in results))
    assert f.high_tiles() == pytest.approx(sum(h and not m for m, h in results))


def test_an_early_run_of_bad_results_moves_the_forecast_less_than_a_plain_projection():
    """Three tiles above 1% among the first 20 of 1,000: projected alone that is 150 tiles;
    the prior (1% of tiles, worth 64 of them) holds the forecast near what the pass will
    ask if the rest behave as the prior says."""
    from tilemem.pack.schedule import HIGH_PRIOR, HIGH_WEIGHT, ReserveForecast
    f = ReserveForecast(1000, set(), 2, 1000.0)
    for t in range(20):
        f.add(t, False, t < 3)
    expected = 3 + 980 * (3 + HIGH_PRIOR * HIGH_WEIGHT) / (20 + HIGH_WEIGHT)
    assert f.high_tiles() == pytest.approx(expected)
    assert f.high_tiles() < 3 * 1000 / 20 / 2


def test_the_exact_stages_part_of_the_reserve_is_capped():
    """100 tiles in, all left above 1%: 652 tiles forecast above 1%, 652 s of two workers
    asked; the exact stage's part is held at ``EXACT_MAX`` of the span (the first pass would
    otherwise end early, leave more tiles above 1% and ask more). The fit stage's part comes
    on top, within ``MAX_RESERVE``."""
    from tilemem.pack.schedule import EXACT_MAX, FIT_SECONDS, MAX_RESERVE, ReserveForecast
    f = ReserveForecast(1000, set(), 2, 240.0)
    for t in range(100):
        f.add(t, may_fit=False, high=True)
    assert f.high_tiles() == pytest.approx(100 + 900 * (100 + 0.64) / 164)
    assert f.seconds() == pytest.approx(EXACT_MAX * 240.0)
    g = ReserveForecast(1000, set(), 2, 240.0)
    for t in range(100):
        g.add(t, may_fit=t < 4, high=t >= 4)   # 4 tiles overflow although their bound fits
    assert g.seconds() == pytest.approx(min(EXACT_MAX * 240.0 + FIT_SECONDS * 4 / 2,
                                            MAX_RESERVE * 240.0))




def test_the_sweep_carries_a_good_tile_along_a_row_in_rounds():
    """A row of five tiles left above 1%, the last one good (lower is better), each tile's
    donors its better neighbours one tile away; tile 0 does not take tile 1's allocation
    while it is at 3 (carried over it would be worse). The good allocation goes one tile a
    round; after the first round only the donors that took one in the round before are
    offered (tile 1 is not offered to tile 0 again until it changes); limited to 2 rounds
    it reaches two tiles."""
    def run(rounds):
        value = [5, 3, 5, 5, 1]
        offered = []

        def donors(t):
            return tuple((d, None) for d in (t - 1, t + 1)
                         if 0 <= d < len(value) and value[d] < value[t])

        def carry_round(sweep, k):
            offered.append({t: sorted(d for d, _ in ds) for t, ds in sweep.items()})
            took = set()
            for t, ds in sweep.items():
                better = [value[d] for d, _ in ds if not (t == 0 and d == 1 and value[1] == 3)]
                if better:
                    value[t] = min(better)
                    took.add(t)
            return took

        n = driver._sweep_rounds(lambda: [t for t, v in enumerate(value) if v > 1], donors,
                                 carry_round, rounds=rounds)
        return n, value, offered

    n, value, offered = run(None)
    assert value == [1] * 5 and n == 4
    assert offered == [{0: [1], 2: [1], 3: [4]}, {2: [3]}, {1: [2]}, {0: [1]}]
    n, value, _ = run(2)
    assert n == 2 and value == [5, 3, 1, 1, 1]
