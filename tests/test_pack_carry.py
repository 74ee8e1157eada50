"""Carrying an allocation over from a similar tile (``tilemem.pack.carry``), against
independent expectations: both checkers on every carried allocation, the order argument (a
tile identical to its donor ends no higher), hand-made matches, and the driver's first pass
on a report whose neighbouring tiles differ slightly."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from pack_oracle import examples, objective, passes_both_checkers, small_reports
from tilemem.model import Report
from tilemem.pack.carry import carry_over, match_twins
from tilemem.pack.run.driver import RunOptions, allocate
from tilemem.pack.firstfit import first_fit
from tilemem.pack.guard import self_check
from tilemem.pack.portfolio import solve_tile
from tilemem.pack.problem import TileProblem
from tilemem.pack.result import objective as objective_of


def _twice(r: Report, keep=None, grow=None) -> Report:
    """``r``'s tile 0 and a copy of it as tile 1 (names ``v{i}#0`` and ``v{i}#1``), the copy
    keeping only the rows ``keep`` and with ``grow`` bytes added to each of its rows."""
    n = r.num_vars
    keep = np.ones(n, bool) if keep is None else np.asarray(keep, bool)
    grow = np.zeros(n, np.int64) if grow is None else np.asarray(grow, np.int64)
    copy = np.flatnonzero(keep)
    new_id = {int(i): n + k for k, i in enumerate(copy)}

    def col(a):
        a = np.asarray(a)
        return np.concatenate([a, a[copy]]).tolist()

    def partners(csr):
        lists = [[int(j) for j in csr.row(i)] for i in range(n)]
        return lists + [[new_id[j] for j in lists[i] if j in new_id] for i in copy]

    size = np.concatenate([r.size, r.size[copy] + grow[copy]])
    return Report.from_columns(
        target=r.target.with_tiles(2), var_id=list(range(n + len(copy))),
        tile=[0] * n + [1] * len(copy), size=size.tolist(), alignment=col(r.alignment),
        offset=[0] * (n + len(copy)), category=["variable"] * (n + len(copy)),
        eq_class=col(r.eq_class), interference=[r.interference.row(c).tolist()
                                                for c in range(r.interference.num_rows)],
        names=[f"v{i}#0" for i in range(n)] + [f"v{i}#1" for i in copy],
        always_live=col(r.always_live), in_interleaved_mem=col(r.in_interleaved_mem),
        executable=col(r.executable), lowest_256kb=col(r.lowest_256kb),
        element_constraints=partners(r.element_constraints),
        region_constraints=partners(r.region_constraints))


def _carry(r2: Report, donor: np.ndarray):
    """The whole report's offsets with tile 0 at ``donor`` and tile 1 carried over (or
    ``None``), and tile 1's problem."""
    p1 = TileProblem.from_report(r2, 1)
    got = carry_over(r2, 0, donor, p1)
    if got is None:
        return None, p1
    column = np.zeros(r2.num_vars, np.int64)
    column[r2.tile_rows(0)] = donor
    column[p1.rows] = got
    return column, p1


@examples(80)
@given(small_reports(max_vars=8), st.data())
def test_a_carried_allocation_passes_both_checkers(r, data):
    n = r.num_vars
    keep = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    grow = data.draw(st.lists(st.sampled_from([0, 0, 0, 4, 12]), min_size=n, max_size=n))
    r2 = _twice(r, keep, grow)
    donor = first_fit(TileProblem.from_report(r2, 0))
    column, p1 = _carry(r2, donor)
    if column is not None:   # None: nothing matched, or the guard refused the first fit
        passes_both_checkers(r2, column)


@examples(60)
@given(small_reports(max_vars=8), st.data())
def test_solve_tile_is_never_worse_than_a_valid_carried_allocation(r, data):
    p = TileProblem.from_report(r, 0)
    order = np.array(data.draw(st.permutations(range(p.n))), np.int64)
    carried = first_fit(p, order)
    res, off = solve_tile(p, "heuristic", carried=(7, carried))
    column = np.zeros(r.num_vars, np.int64)
    column[p.rows] = off
    passes_both_checkers(r, column)
    if self_check(p, carried):
        assert objective_of(p, off) <= objective_of(p, carried)


@examples(40)
@given(small_reports(max_vars=8))
def test_an_invalid_carried_allocation_is_ignored(r):
    p = TileProblem.from_report(r, 0)
    bad = np.full(p.n, 3, np.int64)        # misaligned where alignment > 1, overlapping
    res, off = solve_tile(p, "heuristic", carried=(7, bad))
    column = np.zeros(r.num_vars, np.int64)
    column[p.rows] = off
    passes_both_checkers(r, column)
    assert "carried over" not in res.note


@examples(80)
@given(small_reports(max_vars=8), st.data())
def test_a_tile_identical_to_its_donor_ends_no_higher(r, data):
    # first fit in the order of a valid allocation's offsets puts every variable at or
    # below its offset there: the donor's own place is free of everything placed before it
    r2 = _twice(r)
    p0 = TileProblem.from_report(r2, 0)
    order = np.array(data.draw(st.permutations(range(p0.n))), np.int64)
    donor = first_fit(p0, order)
    within = np.zeros(r2.num_vars, np.int64)
    within[p0.rows] = donor
    if not self_check(p0, donor) or objective(r2, within, 0)[0] > 0:
        return  # the claim is about a valid allocation within memory
    column, _ = _carry(r2, donor)
    assert column is not None
    passes_both_checkers(r2, column)
    assert objective(r2, column, 1)[1] <= objective(r2, column, 0)[1]


def test_twins_match_by_tensor_class_and_size_first():
    # tile 1: w (its slice 4 bytes larger), x twice (one twin each), y with no twin
    r = Report.from_columns(
        var_id=range(8), tile=[0, 0, 0, 0, 1, 1, 1, 1], size=[16, 8, 8, 4, 8, 8, 20, 4],
        alignment=[4] * 8, offset=[0] * 8, category=["variable"] * 8,
        eq_class=[0, 1, 2, 1, 1, 2, 0, 3], interference=[[]] * 4,
        names=["w#0", "x#0", "x#0", "z#0", "x#1", "x#1", "w#1", "y#1"])
    twins = match_twins(r, r.tile_rows(0), r.tile_rows(1)).tolist()
    # x of class 1 -> row 1, x of class 2 -> row 2, w -> row 0 (size differs), y -> none
    assert twins == [1, 2, 0, -1]


def test_carried_order_follows_the_donor_not_the_sizes():
    # three variables live together; the donor put the smallest lowest. Carried over, the
    # neighbour keeps that order (the heuristic's largest-first would not).
    r = Report.from_columns(
        var_id=range(6), tile=[0, 0, 0, 1, 1, 1], size=[4, 8, 12, 4, 8, 12],
        alignment=[4] * 6, offset=[0] * 6, category=["variable"] * 6,
        eq_class=[0, 0, 0, 0, 0, 0], interference=[[]],
        names=["a#0", "b#0", "c#0", "a#1", "b#1", "c#1"])
    got = carry_over(r, 0, np.array([20, 12, 0]), TileProblem.from_report(r, 1))
    assert got.tolist() == [20, 12, 0]


def test_first_pass_carries_over_between_neighbours_and_stays_valid():
    # 16 tiles, each the same variables but a slice that grows with the tile, so no two are
    # identical; neighbouring tiles are carried over in the first pass's runs
    rng = np.random.default_rng(3)
    n, tiles = 24, 16
    size = rng.integers(1, 40, n) * 16
    cls = rng.integers(0, 8, n)
    inter = [sorted(set(rng.integers(0, 8, 3).tolist()) - {c}) for c in range(8)]
    rows = [(t, i) for t in range(tiles) for i in range(n)]
    r = Report.from_columns(
        var_id=range(len(rows)), tile=[t for t, _ in rows],
        size=[int(size[i]) + 16 * (t % 5) * (i == 0) for t, i in rows],
        alignment=[16] * len(rows), offset=[0] * len(rows),
        category=["variable"] * len(rows), eq_class=[int(cls[i]) for _, i in rows],
        interference=inter, names=[f"layer/t{i}#{t}" for t, i in rows])
    a = allocate(r, budget=20, run=RunOptions(workers=1))
    passes_both_checkers(r, a.offsets)
    assert len(a.tiles) == tiles
    # the bound is a lower bound: no allocation ends below it
    assert all(t.total_including_gaps >= t.bound for t in a.tiles)
    # the heuristic leaves tile 0 above its bound and the search brings it down; its
    # neighbours, alike, start from its allocation carried over rather than from their own
    # heuristic's (tiles 5-15 repeat tiles 0-4 and are solved once)
    assert any("carried over from tile" in t.note for t in a.tiles)


@examples(60)
@given(small_reports(max_vars=8), st.data())
def test_the_carry_pass_keeps_the_better_of_its_own_and_the_carried(r, data):
    p = TileProblem.from_report(r, 0)
    own = first_fit(p, np.array(data.draw(st.permutations(range(p.n))), np.int64))
    other = first_fit(p, np.array(data.draw(st.permutations(range(p.n))), np.int64))
    res, off = solve_tile(p, "carry", hint=own, carried=(9, other))
    column = np.zeros(r.num_vars, np.int64)
    column[p.rows] = off
    passes_both_checkers(r, column)
    ok = [x for x in (own, other) if self_check(p, x)]
    if ok:
        assert objective_of(p, off) <= min(objective_of(p, x) for x in ok)
    if self_check(p, other) and objective_of(p, other) < objective_of(p, own):
        assert res.note.startswith("carried over from tile 9")


@given(st.lists(st.tuples(st.sampled_from(["w", "a/b", "x#", "#", "y#z", "w#1"]),
                          st.sampled_from(["", "#0", "#12", "#x", "#07"])),
                min_size=1, max_size=12))
def test_tensor_keys_group_rows_as_the_tensor_names_do(parts):
    """Two rows share a tensor key exactly when their names are equal once the ``#tile``
    suffix is removed (``base_name``, the Python reading of the rule)."""
    from tilemem.model.names import base_name, tensor_keys
    names = [a + b for a, b in parts]
    n = len(names)
    r = Report.from_columns(var_id=range(n), tile=[0] * n, size=[4] * n, alignment=[4] * n,
                            offset=[0] * n, category=["variable"] * n, eq_class=[0] * n,
                            interference=[[]], names=names)
    keys = tensor_keys(r)
    for i in range(n):
        for j in range(n):
            assert (keys[i] == keys[j]) == (base_name(names[i]) == base_name(names[j]))


def _chain_twins() -> Report:
    """Two identical tiles of a chain a - b - c (sizes 4, 4, 8; a and c apart): first fit
    in the order a, b, c ends at 16, the bound is 12 (b, then a and c side by side above)."""
    r = Report.from_columns(var_id=range(3), tile=[0] * 3, size=[4, 4, 8],
                            alignment=[4] * 3, offset=[0] * 3, category=["variable"] * 3,
                            eq_class=[0, 1, 2], interference=[[1], [0, 2], [1]])
    return _twice(r)


def _visit_run_out(r2: Report, offsets: dict[int, list[int]]):
    """A visit run over tiles 0 and 1 as ``_solve_run`` returns it, each tile at the given
    local offsets (a carry of its own allocation: its result as the driver records it)."""
    from tilemem.pack.bounds import TileBound, tile_bounds
    from tilemem.pack.kinds import Pass
    from tilemem.pack.run.tasks import RunOut, RunTask, TileTask

    bounds = tile_bounds(r2, [0, 1], 1.0)
    run = RunTask([TileTask(t, Pass.QUICK, None, None, TileBound.of(bounds[t]), 0.5, 0)
                   for t in (0, 1)])
    out = RunOut()
    for t in (0, 1):
        p = TileProblem.from_report(r2, t)
        res, off = solve_tile(p, "carry", hint=np.array(offsets[t], np.int64),
                              bound=bounds[t])
        out.append((t, res, off))
    return run, out


def test_the_way_back_gives_a_tile_its_successors_better_allocation():
    from tilemem.pack.run.tasks import _Shared, _carry_back
    from tilemem.rules import Rules

    r2 = _chain_twins()
    run, out = _visit_run_out(r2, {0: [0, 4, 8], 1: [4, 0, 4]})
    assert [res.total_including_gaps for _, res, _ in out] == [16, 12]
    _carry_back(_Shared(r2, Rules()), run, out, None)
    tile, res, off = out[0]
    assert tile == 0 and off.tolist() == [4, 0, 4] and res.total_including_gaps == 12
    assert res.gap == 0.0 and "carried over from tile 1" in res.note
    column = np.zeros(r2.num_vars, np.int64)
    for t, _, o in out:
        column[r2.tile_rows(t)] = o
    passes_both_checkers(r2, column)


def test_the_way_back_leaves_a_tile_whose_successor_did_no_better():
    from tilemem.pack.run.tasks import _Shared, _carry_back
    from tilemem.rules import Rules

    r2 = _chain_twins()
    run, out = _visit_run_out(r2, {0: [4, 0, 4], 1: [0, 4, 8]})
    before = [(t, res, off.tolist()) for t, res, off in out]
    _carry_back(_Shared(r2, Rules()), run, out, None)
    assert [(t, res, off.tolist()) for t, res, off in out] == before


def _count_heuristic_runs(monkeypatch) -> list:
    """The calls of the heuristic ``solve_tile`` makes, counted (each still runs)."""
    import tilemem.pack.portfolio as portfolio

    calls, real = [], portfolio.heuristic.heuristic_runs

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(portfolio.heuristic, "heuristic_runs", counted)
    return calls


def _visit_tile_1(monkeypatch, carried: list[int]):
    """Tile 1 of ``_chain_twins`` visited (the quick search stopped within 1 %) with tile 0's
    allocation ``carried`` over: the report, tile 1's problem, the heuristic's calls, and
    ``solve_tile``'s result and offsets."""
    r2 = _chain_twins()
    p1 = TileProblem.from_report(r2, 1)
    calls = _count_heuristic_runs(monkeypatch)
    res, off = solve_tile(p1, "quick", carried=(0, np.array(carried)), stop_gap=0.01,
                          replay_order=np.arange(3), time_limit=0.5)
    return r2, p1, calls, res, off


def test_a_tile_that_rides_a_carried_allocation_within_its_stop_runs_no_heuristic(monkeypatch):
    # tile 1's carried allocation ends at its bound (12): within any stop, so the heuristic's
    # first fit (in the report's order: 16) is not run, and the carried one is the result
    r2, p1, calls, res, off = _visit_tile_1(monkeypatch, [4, 0, 4])
    assert calls == []
    assert off.tolist() == [4, 0, 4] and res.total_including_gaps == 12
    assert res.note.startswith("carried over from tile 0")


def test_a_carried_allocation_above_the_stop_still_gets_the_heuristic(monkeypatch):
    # carried at 16, a third above the bound: the heuristic runs, and the search from the
    # better start reaches the bound
    r2, p1, calls, res, off = _visit_tile_1(monkeypatch, [0, 4, 8])
    assert calls == [1]
    column = np.zeros(r2.num_vars, np.int64)
    column[p1.rows] = off
    column[r2.tile_rows(0)] = [4, 0, 4]
    passes_both_checkers(r2, column)
    assert res.total_including_gaps == 12


def _scripted_run(gaps: list[float], hold: bool, stop: float = 0.004):
    """A visit run of ``len(gaps)`` tiles through ``_solve_run`` with a scripted solver: tile
    ``k`` ends at ``gaps[k]`` (status "heuristic", its bound 100,000 bytes). Returns the stop
    gap each tile was given and the results."""
    from tilemem.pack.kinds import Pass, Stage, Status
    from tilemem.pack.result import TileResult
    from tilemem.pack.run.tasks import RunTask, TileTask, _solve_run

    given = []

    def solve(shared, task, deadline):
        if task.method == Pass.CARRY:     # the way back: nothing better to carry
            return task.tile, task.prev, task.hint
        given.append(task.stop_gap)
        g = gaps[task.tile]
        res = TileResult(tile=task.tile, method=Stage.QUICK, status=Status.HEURISTIC,
                         overflow_bytes=0, total_including_gaps=int(100_000 * (1 + g)),
                         bound=100_000, bound_exact=True, gap=g, seconds=task.time_limit)
        return task.tile, res, np.zeros(1, np.int64)

    run = RunTask([TileTask(t, Pass.QUICK, None, None, (100_000, True), 0.5, 0, stop_gap=stop)
                   for t in range(len(gaps))], hold=hold)
    out = _solve_run(None, run, None, solve=solve)
    return given, [res.gap for _, res, _ in out]


def test_a_paced_run_holds_its_next_tiles_at_the_gap_a_tile_stalled_at():
    # tile 0 stalls at 0.6 % (its stop 0.4 %): tile 1 stops at 0.6 %; tile 1 ends at 0.5 %,
    # within that but not within 0.4 %: still held (tile 2 at 0.6 %); tile 2 reaches 0.3 %,
    # within the run's own stop: tile 3 is back at 0.4 %. Tile 3 stalls at 2 %: the hold is
    # at most 1 %, the gap users read off a map (tile 4 at 1 %)
    given, _ = _scripted_run([0.006, 0.005, 0.003, 0.02, 0.001], hold=True)
    assert given == [0.004, 0.006, 0.006, 0.004, 0.01]
    # a stall on a held stop raises the hold: 0.6 %, then 0.8 % (above the held 0.6 %)
    given, _ = _scripted_run([0.006, 0.008, 0.001], hold=True)
    assert given == [0.004, 0.006, 0.008]


def test_an_unpaced_run_gives_every_tile_its_own_stop():
    given, _ = _scripted_run([0.006, 0.005, 0.003, 0.02, 0.001], hold=False)
    assert given == [0.004] * 5
