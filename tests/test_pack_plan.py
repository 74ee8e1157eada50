"""The plan of ``auto`` (``tilemem.pack.run.plan.Planner``) fed results by hand: which tile gets
the next slice, with which move, for how long, and what it learns. Expectations are worked
out here from the rule in the module's docstring, not read off the code."""
import pytest

from tilemem.pack.run.plan import Move, Order, Planner, Policy
from tilemem.pack.result import TileResult

P = Policy()


def result(t, gap, may_fit=False, overflow=None, tile_memory=1000):
    """A result of tile ``t`` at ``gap``; ``may_fit``: it overflows (by ``overflow``, 8 by
    default) although its bound fits in ``tile_memory``. Whether it is finished is the
    planner's to work out (``scoreboard.finished``): within 0.1 % of its bound."""
    overflow = (8 if may_fit else 0) if overflow is None else overflow
    bound = tile_memory - 100 if may_fit or overflow == 0 else tile_memory + 100
    return TileResult(tile=t, method="quick", status="feasible", overflow_bytes=overflow,
                      total_including_gaps=0, bound=bound, bound_exact=True, gap=gap,
                      seconds=0.0)


def visited(planner, gaps, *, may_fit=(), overflow=None):
    """Visit every tile (each order handed out and returned) with the given gaps."""
    while planner.visits:
        o = planner.next(0.0)
        planner.started(o, 0.0)
        for t in o.tiles:
            planner.update(t, result(t, gaps[t], t in may_fit,
                                     (overflow or {}).get(t, 8 * (t in may_fit))))
        planner.finished_order(o, [0.0] * len(o.tiles), len(o.tiles) * (o.seconds + 0.1))


def give(planner, now=0.0):
    o = planner.next(now)
    planner.started(o, now)
    return o


def back(planner, o, before, after, seconds, **kw):
    """``o`` returns: its tile went from gap ``before`` to ``after`` in ``seconds``."""
    t = o.tiles[0]
    planner.update(t, result(t, after, kw.get("may_fit", False), kw.get("overflow", 0)))
    planner.finished_order(o, [before], seconds)


def test_every_tile_is_visited_first_in_the_runs_given():
    p = Planner(range(5), [[3, 4], [0], [1, 2]], workers=2, deadline=100.0, tile_memory=1000)
    seen = []
    while (o := p.next(0.0)) is not None:
        p.started(o, 0.0)
        assert o.move == Move.VISIT
        seen.append(o.tiles)
    assert seen == [[3, 4], [0], [1, 2]]


def test_a_visit_shares_the_time_left_evenly_within_its_floor_and_cap():
    # 2 workers x 10 s over 100 tiles: 0.2 s each less the set-up (0.08 s until measured)
    p = Planner(range(100), [[t] for t in range(100)], workers=2, deadline=10.0,
                tile_memory=1000)
    assert p.next(0.0).seconds == pytest.approx(0.2 - P.setup)
    # plenty of time: at most ``most`` probes
    p = Planner(range(2), [[0], [1]], workers=2, deadline=1000.0, tile_memory=1000)
    assert p.next(0.0).seconds == P.probes[1] * P.quick
    # a visit's run ends by its tiles' shares and set-ups
    p = Planner(range(4), [[0, 1, 2, 3]], workers=1, deadline=4.0, tile_memory=1000)
    o = p.next(0.0)
    assert o.until == pytest.approx(4 * (o.seconds + P.setup))


def test_a_share_below_the_floor_is_paced_and_one_above_it_is_not():
    # 1 s of one worker for 100 tiles: 0.01 s each, less than the set-up: shares that small
    # leave every tile at its start, so the visits are paced: a probe within 1 % for a tile
    # whose start is above it (one within it costs its set-up alone)
    p = Planner(range(100), [[t] for t in range(100)], workers=1, deadline=1.0,
                tile_memory=1000)
    o = p.next(0.0)
    assert (o.paced, o.stop_gap, o.seconds) == (True, 0.01, P.quick)
    # 4 s for 10 tiles: 0.4 - 0.08 s each; the floor (0.1 s) is below it and does not bind
    p = Planner(range(10), [[t] for t in range(10)], workers=1, deadline=4.0, tile_memory=1000)
    assert p.next(0.0).seconds == pytest.approx(0.32)


def _short_planner(deadline):
    return Planner(range(50), [[t] for t in range(50)], workers=1, deadline=deadline,
                   tile_memory=1000)


def _visit(p, t, now, gap, cost=1 / 40):
    o = give(p, now)
    p.update(t, result(t, gap))
    p.finished_order(o, [0.0], cost)
    return o


def test_where_the_budget_is_short_of_a_probe_the_visits_are_paced():
    # 10 s of one worker for 50 tiles: 0.2 s each, 0.12 s past the set-up, above the floor
    # (0.2 probes of 0.5 s): within first_stop, whatever the visits do
    p = _short_planner(10.0)
    assert all(_visit(p, t, t / 40, 0.015).stop_gap == P.first_stop for t in range(40))
    assert not any(o.paced for o in [give(p, 1.0)])
    # 5 s: 0.02 s past the set-up, below the floor: from the first visit a tile that searches
    # gets a probe (0.5 s), and the visits are paced by their stop, whatever their gaps. The
    # coarsest gap first (1 %), not tried yet
    p = _short_planner(5.0)
    o = _visit(p, 0, 0.0, 0.005, cost=0.05)
    assert (o.stop_gap, o.paced, o.seconds) == (0.01, True, P.quick)
    # 0.05 s a tile at 1 %: the next finer gap, not tried yet, is expected to cost twice
    # that, 0.1 s, affordable at 0.05 s (4.95 s over the 49 tiles left: 0.101 s)
    assert _visit(p, 1, 0.05, 0.005, cost=0.08).stop_gap == 0.008
    # 0.08 s at 0.8 %: 0.4 % would cost 0.16 s, too dear (4.87 s over 48: 0.101 s)
    assert _visit(p, 2, 0.13, 0.005, cost=0.08).stop_gap == 0.008
    # time saved (the clock stopped at 0.5 s: 4.5 s for the visits over fewer tiles left)
    # affords the finer gaps as the tiles left grow fewer: 0.4 % (expected 0.16 s) once
    # 4.5 s covers that for every tile left (28 or fewer), 0.2 % (expected twice what 0.4 %
    # cost) once it covers 0.4 s a tile (11 or fewer)
    cost = {0.01: 0.05, 0.008: 0.08, 0.004: 0.2, 0.002: 0.4}
    stops = []
    for t in range(3, 50):
        o = give(p, 0.5)
        p.update(t, result(t, 0.005))
        p.finished_order(o, [0.0], cost[o.stop_gap])
        stops.append((50 - t, o.stop_gap))
    assert all(s == 0.008 for n, s in stops if n > 28)
    assert 0.004 in {s for n, s in stops if 11 < n <= 28} <= {0.004, 0.008}
    assert 0.002 in {s for n, s in stops if n <= 11}
    # where even 1 % with a probe costs more than a tile may take, still a probe within 1 %:
    # shares shrunk below a probe cost about as much (the set-up, the heuristic)
    p = _short_planner(5.0)
    assert _visit(p, 0, 0.0, 0.015, cost=1.0).stop_gap == 0.01
    o = _visit(p, 1, 1.0, 0.015)
    assert (o.stop_gap, o.paced, o.seconds) == (0.01, True, P.quick)


def test_visits_keep_time_for_the_revisits_the_tiles_seen_ask():
    p = Planner(range(20), [[t] for t in range(20)], workers=1, deadline=1000.0,
                tile_memory=1000, policy=Policy(probes=(P.probes[0], 1000.0)))
    for t in range(10):   # 2 of the first 10 tiles are left above 1 %
        o = give(p)
        p.update(t, result(t, 0.02 if t < 2 else 0.001))
        p.finished_order(o, [0.0], o.seconds)
    # projected: 4 of 20 tiles, an exact slice (3 s) each: 12 worker-seconds held
    assert p.hold() == pytest.approx(4 * P.exact)
    o = p.next(0.0)
    assert o.seconds == pytest.approx((1000.0 - 12.0) / 10 - P.setup)


def test_a_tile_near_capacity_gets_more_visit_shares():
    # 4 tiles, 1 worker, 3 s: tile 1 (near capacity) weighs 3, the others 1 each: 6 shares of
    # 3 s, set-up included
    p = Planner(range(4), [[0, 1], [2, 3]], workers=1, deadline=3.0, tile_memory=1000,
                near_capacity={1})
    o = p.next(0.0)
    unit = 3.0 / (3 + P.near_weight)
    assert o.each == pytest.approx([unit - P.setup, P.near_weight * unit - P.setup])
    assert o.until == pytest.approx((1 + P.near_weight) * unit)


def test_a_tile_that_may_fit_comes_first_fewest_overflowed_bytes_first():
    p = Planner(range(4), [[t] for t in range(4)], workers=1, deadline=100.0, tile_memory=1000)
    visited(p, {0: 0.05, 1: 0.02, 2: 0.03, 3: 0.04}, may_fit={2, 3}, overflow={2: 64, 3: 16})
    first, second = give(p), give(p)
    assert (first.move, first.tiles, second.move, second.tiles) == (
        Move.FIT, [3], Move.FIT, [2])
    assert first.seconds == P.exact and first.stop_gap is None


def test_the_rule_gives_the_slice_to_the_largest_expected_gain_per_second():
    p = Planner(range(3), [[t] for t in range(3)], workers=1, deadline=1000.0,
                tile_memory=1000)
    visited(p, {0: 0.004, 1: 0.02, 2: 0.01})
    # nothing known yet: each move closes a gap in its first slice, so the quick search
    # (0.5 s) on the largest gap first
    o = give(p)
    assert (o.move, o.tiles, o.seconds) == (Move.QUICK, [1], P.quick)
    assert o.stop_gap == P.settle   # it runs its time unless the tile is finished
    back(p, o, 0.02, 0.02, 1.0)   # it closed nothing in 1 s
    # the quick search's record: 0 closed in 1 s, from its prior (1 / 0.5 s, worth 2 s):
    # 4/3 per s over all tiles; on tile 1, (0 + 2 x 4/3) / (1 + 2) = 8/9 per s -> 0.0178/s;
    # the exact portfolio, untried: 1/3 per s -> 0.0067/s on tile 1; tile 2's quick search:
    # 0.01 x 4/3 = 0.0133/s. Tile 1's quick search again, its slice doubled.
    o = give(p)
    assert (o.move, o.tiles, o.seconds) == (Move.QUICK, [1], 2 * P.quick)


def test_a_move_that_closes_nothing_gives_way_to_another():
    p = Planner([0], [[0]], workers=1, deadline=1000.0, tile_memory=1000)
    visited(p, {0: 0.02})
    moves = []
    for _ in range(6):
        o = give(p)
        moves.append(o.move)
        back(p, o, 0.02, 0.02, o.seconds + 0.1)   # nothing ever closes
    assert Move.EXACT in moves and moves[0] == Move.QUICK


def test_slices_double_up_to_the_time_limit_and_the_deadline():
    p = Planner([0], [[0]], workers=1, deadline=30.0, tile_memory=1000,
                policy=Policy(quick=1.0, time_limit=5.0))
    visited(p, {0: 0.02})
    got = []
    for _ in range(4):
        o = give(p)
        got.append((o.move, o.seconds))
        back(p, o, 0.02, 0.019, o.seconds)
    quick = [s for m, s in got if m == Move.QUICK]
    assert quick == [1.0, 2.0, 4.0, 5.0][:len(quick)]
    # two seconds before the deadline: the slice is what is left less the set-up
    o = p.next(28.0)
    assert o.seconds == pytest.approx(2.0 - P.setup)
    assert p.next(30.0 - P.setup + 0.01) is None


def test_finished_tiles_get_nothing_and_the_run_can_end():
    p = Planner(range(3), [[t] for t in range(3)], workers=1, deadline=1000.0,
                tile_memory=1000)
    visited(p, {0: 0.0005, 1: 0.0, 2: 0.02})
    # within the settle gap (0.1 %): finished, as ``scoreboard.finished`` says
    assert [p.tiles[t].final for t in range(3)] == [True, True, False]
    o = give(p)
    assert o.tiles == [2]
    back(p, o, 0.02, 0.0008, 1.0)
    assert p.next(1.0) is None and p.unreached() == []


def test_without_a_budget_each_open_tile_gets_one_slice_of_each_move():
    p = Planner(range(3), [[0, 1, 2]], workers=1, deadline=None, tile_memory=1000,
                policy=Policy(time_limit=7.0))
    o = p.next(0.0)
    assert (o.move, o.seconds, o.stop_gap) == (Move.VISIT, P.quick, 0.01)
    p.started(o, 0.0)
    for t, g in enumerate((0.02, 0.005, 0.0)):
        p.update(t, result(t, g))
    p.finished_order(o, [0.0] * 3, 2.0)
    got = []
    while (o := p.next(0.0)) is not None:
        p.started(o, 0.0)
        got.append((o.move, o.tiles, o.seconds))
        back(p, o, 0.02, 0.01, 7.0)
    assert sorted(got) == [(Move.EXACT, [0], 7.0), (Move.EXACT, [1], 7.0),
                           (Move.QUICK, [0], P.quick), (Move.QUICK, [1], P.quick)]


def test_under_the_fit_goal_only_the_undecided_tiles_get_time_fewest_slices_first():
    p = Planner(range(3), [[t] for t in range(3)], workers=1, deadline=1000.0,
                tile_memory=1000, goal="fit")
    visited(p, {0: 0.02, 1: 0.03, 2: 0.04}, may_fit={1, 2}, overflow={1: 8, 2: 4})
    got = []
    for _ in range(4):
        o = give(p)
        got.append((o.move, o.tiles[0], o.seconds))
        back(p, o, 0.03, 0.03, o.seconds, may_fit=True, overflow=8 if o.tiles[0] == 1 else 4)
    assert got == [(Move.FIT, 2, 3.0), (Move.FIT, 1, 3.0), (Move.FIT, 2, 6.0),
                   (Move.FIT, 1, 6.0)]


def test_a_tile_being_searched_is_not_handed_out_again():
    p = Planner(range(2), [[0], [1]], workers=2, deadline=1000.0, tile_memory=1000)
    visited(p, {0: 0.02, 1: 0.01})
    a, b = give(p), give(p)
    assert {a.tiles[0], b.tiles[0]} == {0, 1}
    assert p.next(0.0) is None   # both are running


def test_the_set_up_is_what_the_workers_measured_once_there_are_a_few():
    p = Planner(range(20), [[t] for t in range(20)], workers=1, deadline=1000.0,
                tile_memory=1000)
    assert p.setup_seconds() == P.setup
    o = give(p)
    p.update(0, result(0, 0.01))
    p.finished_order(o, [0.0], 9.0, [0.3] * 7)
    assert p.setup_seconds() == P.setup   # 7 measures: not yet enough
    o = give(p)
    p.update(1, result(1, 0.0))
    p.finished_order(o, [0.0], 0.01, [0.5])
    assert p.setup_seconds() == pytest.approx((7 * 0.3 + 0.5) / 8)


def test_orders_are_plain_values():
    o = Order(Move.EXACT, [3], 1.5, None, 2)
    assert (o.move, o.tiles, o.seconds, o.attempt, o.until) == ("exact", [3], 1.5, 2, None)


def test_a_carry_is_offered_once_a_neighbour_does_better():
    # tiles 0-2 in a row, visited; tile 1 then does better than tile 0
    p = Planner(range(3), [[0], [1], [2]], workers=1, deadline=100.0, tile_memory=1000,
                neighbours={0: [1], 1: [0, 2], 2: [1]})
    visited(p, {0: 0.03, 1: 0.03, 2: 0.0005})
    # tile 2 (finished) beats tile 1: a carry, untried (its cost its set-up: 1 / 0.08 s a
    # gap), comes before a quick search (1 / 0.5 s)
    o = give(p)
    assert (o.move, o.tiles, o.seconds) == (Move.CARRY, [1], 0.0)
    back(p, o, 0.03, 0.03, 0.05)   # it did not take
    o = give(p)
    assert o.move != Move.CARRY    # not again until a neighbour does better again
    p.update(2, result(2, 0.0))
    assert p.tiles[1].carry


def test_the_tiles_above_one_percent_come_before_the_rest():
    # tile 1 is at 0.9 % and its quick search closes gaps fast (0.9 of a gap in 1 s: 1.63 /
    # s with its prior, 0.0147 % a second); tile 0 at 1.2 % has closed nothing in 4 s of it
    # (0.67 / s, 0.008 %): tile 0 still comes first, as it is above 1 %
    p = Planner(range(2), [[0], [1]], workers=1, deadline=1000.0, tile_memory=1000)
    visited(p, {0: 0.012, 1: 0.009})
    p.tiles[0].seconds[Move.QUICK], p.tiles[0].closed[Move.QUICK] = 4.0, 0.0
    p.tiles[1].seconds[Move.QUICK], p.tiles[1].closed[Move.QUICK] = 1.0, 0.9
    o = give(p)
    assert o.tiles == [0]
    back(p, o, 0.012, 0.008, 3.0)   # below 1 % now: the rule takes both again
    assert give(p).tiles == [1]


def test_a_fresh_tile_expects_what_first_slices_did_not_what_the_hard_tiles_did_later():
    # tile 0 (1.2 % -> 0.3 %) had a first quick slice that closed 3/4 of its gap in 0.5 s,
    # then two later ones that closed nothing in 3 s; tile 1 at 0.11 % (just above the
    # settle gap) has had none. First slices: (0.75 + 2 x 2) / (0.5 + 2) = 1.9 a second;
    # later ones: (0 + 2 x 1.9) / (3 + 2)
    # = 0.76; tile 0's own: (0.75 + 2 x 0.76) / (3.5 + 2) = 0.413 -> 0.3 % x 0.413 =
    # 0.00124 a second; tile 1's first: 0.11 % x 1.9 = 0.00209. (With one record over every
    # slice, (0.75 + 4) / 5.5 = 0.864 and tile 0's (0.75 + 1.73) / 5.5 = 0.45: 0.00135,
    # against tile 1's 0.00095, and the hard tile would have it again.)
    p = Planner(range(2), [[0], [1]], workers=1, deadline=1000.0, tile_memory=1000)
    visited(p, {0: 0.012, 1: 0.0011})
    o = give(p)
    assert (o.move, o.tiles) == (Move.QUICK, [0])
    back(p, o, 0.012, 0.003, 0.5)
    for _ in range(2):
        o = give(p)
        assert (o.move, o.tiles) == (Move.QUICK, [0])
        back(p, o, 0.003, 0.003, 1.5)
    assert p.rate(0, Move.QUICK) == pytest.approx((0.75 + 2 * 0.76) / 5.5)
    o = give(p)
    assert (o.move, o.tiles) == (Move.QUICK, [1])


def test_a_first_slice_expects_what_first_slices_did_on_the_tiles_of_its_run():
    # tiles 0-2 were visited in one run, tile 3 in another. Tile 0's first quick slice
    # closed nothing in 1.5 s: a first quick slice closes, over all tiles, (0 + 2 x 2) /
    # (1.5 + 2) = 8/7 of a gap a second, on tile 0's run (0 + 2 x 8/7) / (1.5 + 2) = 0.653. Tile 1 at 0.5 % expects 0.5 % x 0.653 = 0.00327 a second, tile 3 at 0.35 %
    # 0.35 % x 8/7 = 0.004: tile 3 first, though its gap is smaller.
    p = Planner(range(4), [[0, 1, 2], [3]], workers=1, deadline=1000.0, tile_memory=1000)
    visited(p, {0: 0.006, 1: 0.005, 2: 0.005, 3: 0.0035})
    o = give(p)
    assert (o.move, o.tiles) == (Move.QUICK, [0])
    back(p, o, 0.006, 0.006, 1.5)
    assert p.rate(1, Move.QUICK) == pytest.approx(2 * (8 / 7) / 3.5)
    assert p.rate(3, Move.QUICK) == pytest.approx(8 / 7)
    o = give(p)
    assert (o.move, o.tiles) == (Move.QUICK, [3])
