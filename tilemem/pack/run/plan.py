"""The plan of ``auto``: which tile gets a worker next, with which move, for how long.

Every tile is *visited* first (the heuristic, then the quick search from it, neighbouring
tiles in runs, each carried over to the next and, on the way back, each tile given its
successor's allocation where that ended nearer its bound): an even share of the time left that no
revisit is expected to need; a tile whose bound is just under tileMemory, ``near_weight``
shares (capacity first). A visit stops a tile within ``Policy.first_stop`` of its bound.
When the budget is short for the report (its share below a probe's floor), the visits are
*paced*: a tile that searches gets a probe, and each run stops its tiles at the finest gap
(``first_stop`` doubling up to 1 %) whose paced visits so far cost a tile what the time left
affords (1 % when none does), so that more tiles ride their neighbour's allocation carried
over; a tile that searches its whole probe without reaching its run's gap holds the run's
next tiles at the gap it reached (``tilemem.pack.run.tasks``: its neighbours, alike, would stall
there too). After that, whenever a worker is free, the next slice
goes by one rule, learned while running:

- a tile that overflows although its bound fits comes first (would it fit? what a user with
  an out-of-memory tile asks), fewest overflowed bytes first, with the ``FIT`` move (the
  exact portfolio until it fits);
- otherwise, under ``Goal.END``, the tile and move with the highest *expected gain per
  second*, among the tiles above 1 % of their bound while there are any (the gap a user
  reads off a memory map; below it, what is left is refinement): the tile's gap to its
  bound times the share of a gap that move has closed per
  second, on this tile and (as its prior, worth ``Policy.prior`` seconds) over all tiles
  so far: a move's first slice on a tile is expected to do what its first slices did on the
  tiles visited in the same run (neighbours, nearly the same variables: a gap the search
  cannot close on one it seldom closes on the next), from what first slices did over all
  tiles; a later one what later slices did (a search's first seconds on a tile buy most:
  the tiles the rule returns to are the hard ones, and their record is not what a fresh
  tile would do). The moves: carrying a better neighbour's allocation over (no search, its cost
  its set-up; offered once a neighbour has done better since the tile last tried), the
  quick search and the exact portfolio (both from the tile's allocation and its better
  neighbours'). A move nobody has run yet is expected to close a gap in its first slice.
  A tile's slices of one move double each time it is chosen again, so a tile that needs a
  long search gets one without every tile paying for it.

A tile the budget leaves unvisited keeps the report's own offsets (the driver's, nothing
built): the budget holds on a report of many tiles.

A tile is finished (``tilemem.pack.run.scoreboard.finished``) within ``Policy.settle`` of its
bound, proven optimal, or, under ``Goal.FIT``, once its question is answered; the run ends
when every tile is finished or the budget is spent. Without a budget each tile gets one
visit (stopped within 1 %) and then, where it is not finished, one slice of each move (the
quick search's first slice, the exact portfolio's ``time_limit``): a run of known length.

The planner decides and learns; it runs nothing (``tilemem.pack.run.driver`` streams its orders
to the workers), so it is tested by feeding it results.

>>> p = Planner([0, 1, 2], [[0, 1], [2]], workers=2, deadline=100.0, tile_memory=1000)
>>> o = p.next(0.0); o.move, o.tiles, o.seconds   # 200 worker-s over 3 tiles: 4 probes at most
('visit', [0, 1], 2.0)
>>> p.started(o, 0.0)
>>> p.next(0.0).tiles
[2]
>>> p.next(0.0) is None                            # every tile visited or being visited
True
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ..kinds import DEFAULTS, Goal, Label
from ..quick import NEAR
from .scoreboard import Question, Scoreboard, may_fit


class Move(Label):
    """What a slice of a worker does on a tile: ``visit`` (the heuristic and the quick
    search, a tile's first task), ``carry`` (a better neighbour's allocation carried over,
    no search), ``quick`` (the quick search again, from the tile's allocation and its better
    neighbours'), ``exact`` (the exact portfolio from them), ``fit`` (the exact portfolio
    until the tile fits)."""

    VISIT = "visit"
    CARRY = "carry"
    QUICK = "quick"
    EXACT = "exact"
    FIT = "fit"


#: The moves the rule chooses among on a tile that fits (``FIT`` is for the others).
REVISITS = (Move.CARRY, Move.QUICK, Move.EXACT)


@dataclass(frozen=True)
class Policy:
    """Every knob of the plan, each with why (what runs showed is in docs/tuning.md)."""

    #: seconds of one probe of the quick search: a visit's unit and the quick move's first
    #: slice (a probe or two of the search's descents)
    quick: float = 0.5
    #: a visit gets at least the first and at most the second this many probes: one descent
    #: starts it, and past a few the time does more on other tiles
    probes: tuple[float, float] = (0.2, 4.0)
    #: a visit stops a tile within this gap: far below the gaps that matter while other
    #: tiles are still near 1 %. Where the budget gives a tile less than its least probes,
    #: paced visits stop at this gap doubled as often as the time left asks: a tile whose
    #: start (its neighbour's allocation carried over) is already within it needs no search
    #: arrays
    first_stop: float = 0.002
    #: a tile within this gap of its bound is finished: below what a user reads off a
    #: memory map or a profile (None: never; the budget is spent)
    settle: float | None = 0.001
    #: the exact and fit moves' first slice: a fresh start's descents need a few seconds on
    #: a big tile to begin
    exact: float = 3.0
    #: while tiles are being visited, at most this share of the run is held for the
    #: revisits the visits so far are expected to ask: a visit's search is cheaper than a
    #: revisit's (one set-up for both the heuristic and the search), so most goes to visits
    hold: float = 0.15
    #: the weight, in seconds of search, of what a move does over all tiles in what it is
    #: expected to do on one: a tile's own first slices do not swing it
    prior: float = 2.0
    #: neighbouring tiles are visited in runs of at most ``chain``, each carried over to the
    #: next: they hold nearly the same variables, and a run accumulates its tiles' search
    chain: int = 16
    #: revisits carry over the allocations of the better neighbours up to ``reach`` tiles
    #: away, at most ``reach`` of them (each costs a first fit)
    reach: int = 2
    #: a tile whose bound is within 2 % under tileMemory gets this many visit shares:
    #: there the question is whether it fits, which a few more descents decide
    near_weight: float = 3.0
    #: a task's set-up (the tile's problem and search arrays) until measured
    setup: float = 0.08
    #: a slice of exact work on a tile takes at most this (``--time-limit``): a tile's
    #: slices double up to it, so no one tile holds a worker for long
    time_limit: float = DEFAULTS.time_limit


#: The policy ``auto`` runs with.
DEFAULT_POLICY = Policy()


@dataclass(frozen=True)
class Order:
    """A slice for a worker: ``move`` on ``tiles`` (a run of neighbours for a visit, else one
    tile), ``seconds`` of search each, stopping a tile within ``stop_gap`` of its bound (or,
    for ``FIT`` and under ``Goal.FIT``, once it fits); ``attempt``: the tile's slices of this
    move before it (another seed each)."""

    move: Move
    tiles: list[int]
    seconds: float
    stop_gap: float | None
    attempt: int = 0
    #: a visit's run ends by then (its tiles' shares and set-ups from its start): each tile
    #: of the run shares what is left of it with those after it
    until: float | None = None
    setup: float = 0.0
    #: a visit's seconds for each of its tiles (near capacity ones get more), else None
    each: list | None = None
    #: a visit paced by its stop gap (``Planner._paced_stop``): its cost counts in the pace
    paced: bool = False


@dataclass
class _Tile:
    """What the planner knows of a tile: its record on the scoreboard, read there (its
    latest gap, whether it overflows although its bound fits, ``may_fit``, and by how much,
    whether it is finished, ``scoreboard.finished``), and its own: whether a slice of it is
    running, whether a neighbour has done better since it last tried carrying one over, and
    per move the slices run, their seconds and the shares of the gap they closed."""

    board: Scoreboard = field(repr=False)
    tile: int = 0
    tile_memory: int = 0
    running: bool = False
    #: a neighbour has done better since this tile last tried carrying one over
    carry: bool = False
    tries: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
    closed: dict = field(default_factory=dict)

    @property
    def visited(self) -> bool:
        """It has a result (a visit's, or a resumed run's)."""
        return self.tile in self.board.done

    @property
    def gap(self) -> float:
        return self.board.done[self.tile][0].gap if self.visited else 0.0

    @property
    def overflow(self) -> int:
        return self.board.done[self.tile][0].overflow_bytes if self.visited else 0

    @property
    def may_fit(self) -> bool:
        return self.visited and may_fit(self.board.done[self.tile][0], self.tile_memory)

    @property
    def final(self) -> bool:
        return self.board.is_final(self.tile)


class Planner:
    """Decides the next ``Order`` (``next``) from what the results so far (``update``,
    ``finished_order``) have shown; see the module docstring.

    ``tiles``: the tiles (representatives of identical ones); ``runs``: the visits, in the
    order to make them (runs of neighbours); ``deadline``: seconds on the run's clock (None:
    no budget); ``board``: the run's ``Scoreboard``, where the planner reads each tile's
    record (its latest result, whether it is finished; a tile with one is visited, e.g. a
    resumed run's), else one of its own, fed by ``update``; ``neighbours``: each tile's
    neighbours (whose allocations it may carry over); ``near_capacity``: the tiles whose
    bound is just under tileMemory."""

    def __init__(self, tiles, runs, *, workers: int, deadline: float | None,
                 tile_memory: int, goal: str = Goal.END,
                 policy: Policy = DEFAULT_POLICY, board: Scoreboard | None = None,
                 neighbours=None, near_capacity=()):
        self.policy, self.goal, self.tm = policy, goal, tile_memory
        #: each tile's record: the run's, or (fed by hand) the planner's own, which decides
        #: that a tile is finished as the run's would (``scoreboard.finished``)
        self.board = board if board is not None else Scoreboard(
            Question(Goal(goal), policy.settle), tile_memory)
        #: tiles whose bound is just under tileMemory: their visits get ``near_weight`` shares
        self.near_capacity = set(near_capacity)
        #: the worker-seconds from the first visit to the deadline
        self.span: float | None = None
        self.span_tiles = 1
        #: paced visits by stop gap: [worker-seconds, tiles]
        self._paced: dict[float, list] = {}
        #: tile -> the tiles whose allocations it may carry over (``Policy.reach``)
        self.neighbours = neighbours or {}
        self.workers, self.deadline = max(1, workers), deadline
        self.time_limit = policy.time_limit
        self.tiles = {int(t): _Tile(self.board, int(t), tile_memory) for t in tiles}
        runs = [list(run) for run in runs]
        #: tile -> the run it is visited in (its neighbours, whose first slices it expects)
        self.group = {int(t): k for k, run in enumerate(runs) for t in run}
        self.group_seconds: dict = {}
        self.group_closed: dict = {}
        self.visits = deque([int(t) for t in run if not self.tiles[int(t)].visited]
                            for run in runs)
        self.visits = deque(run for run in self.visits if run)
        self.unvisited = sum(len(run) for run in self.visits)
        self.near_unvisited = sum(t in self.near_capacity for run in self.visits for t in run)
        # over every tile, per move: seconds run and shares of a gap closed, by first slices
        # on a tile (``pool_*``) and later ones (``later_*``)
        self.pool_seconds = {m: 0.0 for m in Move}
        self.pool_closed = {m: 0.0 for m in Move}
        self.later_seconds = {m: 0.0 for m in Move}
        self.later_closed = {m: 0.0 for m in Move}
        self._setup = (0.0, 0)   # a task's measured set-up: total seconds, tasks
        self.revisited: set[int] = set()

    # ---- what the results say -----------------------------------------------------------
    def update(self, tile: int, res=None) -> None:
        """A tile's record on the scoreboard changed (or a slice of it came back without
        changing it); ``res``: a planner fed by hand (no run's scoreboard) keeps this
        ``TileResult`` as the tile's record, as a scoreboard would keep it."""
        if res is not None:
            self.board.keep(tile, res, None)
        s = self.tiles[tile]
        gap, overflow = s.gap, s.overflow
        # its neighbours that it now does better than may carry its allocation over
        for n in self.neighbours.get(tile, ()):
            x = self.tiles.get(n)
            if x is not None and x.visited and (x.overflow > 0, x.gap) > (overflow > 0, gap):
                x.carry = True

    def started(self, order: Order, now: float) -> None:
        """``order`` went to a worker."""
        for t in order.tiles:
            self.tiles[t].running = True
        if order.move == Move.VISIT:
            self.unvisited -= len(order.tiles)
            self.near_unvisited -= sum(t in self.near_capacity for t in order.tiles)
        else:
            self.revisited.update(order.tiles)
            s = self.tiles[order.tiles[0]]
            s.tries[order.move] = s.tries.get(order.move, 0) + 1
            s.carry = False   # every revisit tries its better neighbours' allocations

    def finished_order(self, order: Order, gaps_before: list[float], seconds: float,
                       setups: list[float] = ()) -> None:
        """``order`` came back after ``seconds`` of a worker; ``gaps_before``: its tiles' gaps
        when it was started; ``setups``: what each of its tiles that searched for all its
        time took besides its search (measured by the worker). The tiles' ``update`` s come
        first."""
        total, count = self._setup
        self._setup = (total + sum(setups), count + len(setups))
        n = len(order.tiles)
        if order.paced:
            pace = self._paced.setdefault(order.stop_gap, [0.0, 0])
            pace[0] += seconds
            pace[1] += n
        for t, before in zip(order.tiles, gaps_before):
            s = self.tiles[t]
            s.running = False
            if order.move != Move.VISIT and before > 0:
                share = min(max((before - s.gap) / before, 0.0), 1.0)
                each = seconds / n
                first = order.move not in s.seconds
                s.seconds[order.move] = s.seconds.get(order.move, 0.0) + each
                s.closed[order.move] = s.closed.get(order.move, 0.0) + share
                (self.pool_seconds if first else self.later_seconds)[order.move] += each
                (self.pool_closed if first else self.later_closed)[order.move] += share
                if first:
                    g = (self.group.get(t, -1 - t), order.move)
                    self.group_seconds[g] = self.group_seconds.get(g, 0.0) + each
                    self.group_closed[g] = self.group_closed.get(g, 0.0) + share

    # ---- the rule -------------------------------------------------------------------------
    def setup_seconds(self) -> float:
        """A task's set-up besides its search: measured over the tasks back, ``Policy.setup``
        until a few are."""
        total, count = self._setup
        return total / count if count >= 8 else self.policy.setup

    def first_slice(self, move: Move) -> float:
        """A move's first slice on a tile; a carry's cost is its set-up alone."""
        return {Move.CARRY: self.policy.setup, Move.QUICK: self.policy.quick}.get(
            move, self.policy.exact)

    def rate(self, tile: int, move: Move) -> float:
        """The share of a tile's gap ``move`` is expected to close per second on ``tile``.
        Its first slice there: what first slices did on the tiles of its run, from what they
        did over all tiles, from closing a gap in one slice before anything is known. Later:
        its record there, from what later slices did over all tiles, from what first slices
        did (each prior worth ``Policy.prior`` seconds).

        >>> p = Planner([0, 1], [], workers=1, deadline=None, tile_memory=100)
        >>> p.rate(0, Move.QUICK)                  # nothing known: a gap in one 0.5 s slice
        2.0
        >>> p.pool_seconds[Move.QUICK], p.pool_closed[Move.QUICK] = 8.0, 0.4
        >>> round(p.rate(0, Move.QUICK), 3)        # (0.4 + 2 x 2) / (8 + 2)
        0.44
        >>> p.tiles[0].seconds[Move.QUICK], p.tiles[0].closed[Move.QUICK] = 2.0, 0.0
        >>> round(p.rate(0, Move.QUICK), 3)        # closed nothing here in 2 s: half that
        0.22
        >>> p.later_seconds[Move.QUICK] = 6.0      # later slices closed nothing in 6 s
        >>> round(p.rate(0, Move.QUICK), 3), round(p.rate(1, Move.QUICK), 3)
        (0.055, 0.44)
        """
        return self._rate(tile, self.tiles[tile], move, self._pooled(move))

    def _rate(self, tile: int, s: _Tile, move: Move, pooled: tuple[float, float]) -> float:
        """``rate`` from ``move``'s priors over all tiles (``_pooled``), computed once by a
        caller that rates every tile."""
        if move not in s.seconds:
            return self._first_here(tile, move, pooled[0])
        return (s.closed[move] + self.policy.prior * pooled[1]) / (s.seconds[move]
                                                                   + self.policy.prior)

    def _first_here(self, tile: int, move: Move, first: float) -> float:
        """``move``'s first slice on ``tile``: what first slices did on the tiles of its run,
        from ``first`` (over all tiles)."""
        g = (self.group.get(tile, -1 - tile), move)
        return ((self.group_closed.get(g, 0.0) + self.policy.prior * first)
                / (self.group_seconds.get(g, 0.0) + self.policy.prior))

    def _pooled(self, move: Move) -> tuple[float, float]:
        """What ``move``'s first slices and its later ones close per second over all tiles
        (``rate``'s priors)."""
        w = self.policy.prior
        first = ((self.pool_closed[move] + w / self.first_slice(move))
                 / (self.pool_seconds[move] + w))
        return first, (self.later_closed[move] + w * first) / (self.later_seconds[move] + w)

    def hold(self) -> float:
        """Worker-seconds to keep from the visits for the revisits the tiles visited so far
        are expected to ask (an exact slice for each tile that overflows although its bound
        fits or is left above 1 %), projected over the tiles not visited yet, at most
        ``Policy.hold`` of the visits' whole span (the worker-seconds from their start to
        the deadline): a cap on what is left would shrink as the visits go and keep nothing.

        >>> from tilemem.pack.kinds import Status
        >>> from tilemem.pack.result import TileResult
        >>> p = Planner(range(10), [[t] for t in range(10)], workers=2, deadline=100.0,
        ...             tile_memory=1000)
        >>> p.span = 200.0
        >>> for t in range(4):
        ...     o = Order(Move.VISIT, [t], 1.0, None)
        ...     p.started(o, 0.0)
        ...     p.update(t, TileResult(tile=t, method="quick", status=Status.FEASIBLE,
        ...         overflow_bytes=0, total_including_gaps=0, bound=900, bound_exact=True,
        ...         gap=0.02 if t == 0 else 0.001, seconds=1.0))
        ...     p.finished_order(o, [0.0], 1.1)
        >>> p.hold()      # 1 of 4 visited left above 1 %: 2.5 of 10 tiles, 3 s each
        7.5
        >>> p.span = 10.0
        >>> p.hold()
        1.5
        """
        seen = [s for s in self.tiles.values() if s.visited and not s.running]
        if not seen or self.span is None:
            return 0.0
        asks = sum(not s.final and (s.may_fit or s.gap > NEAR) for s in seen)
        expected = asks * (len(seen) + self.unvisited) / len(seen)
        return min(expected * self.policy.exact, self.policy.hold * self.span)

    def next(self, now: float) -> Order | None:
        """The next slice for a free worker, or None when there is nothing to start now."""
        out_of_time = (self.deadline is not None
                       and self.deadline - now - self.setup_seconds() < 0.05)
        if self.visits and not out_of_time:
            return self._visit(now)
        if out_of_time or self.visits:
            # past the budget the tiles not visited keep the report's offsets (the driver's)
            return None
        free = [(t, s) for t, s in self.tiles.items()
                if s.visited and not s.final and not s.running]
        # capacity first: every tile that may fit gets a fit slice before anything else
        fit = [(s.overflow, t) for t, s in free if s.may_fit and not s.tries.get(Move.FIT)]
        if fit:
            return self._slice(min(fit)[1], Move.FIT, now)
        if self.goal == Goal.FIT:
            # only whether tiles fit is asked: the undecided ones, fewest slices first
            again = [(s.tries.get(Move.FIT, 0), s.overflow, t) for t, s in free if s.may_fit]
            if not again or self.deadline is None:
                return None
            return self._slice(min(again)[2], Move.FIT, now)
        # the tiles above 1 % of their bound first: past it a user reads the gap off a
        # memory map; below it, what is left is refinement
        high = [(t, s) for t, s in free if s.gap > NEAR or s.may_fit]
        # ``rate``'s priors once a call: this runs for every slice, over every tile, while
        # the workers wait
        pooled = {m: self._pooled(m) for m in Move}
        budget = self.deadline is not None
        best, value = None, 0.0
        for t, s in high or free:
            for m in (Move.FIT,) if s.may_fit else REVISITS:
                if not budget and s.tries.get(m, 0):
                    continue   # without a budget, one slice of each move
                if m == Move.CARRY and not s.carry:
                    continue   # no neighbour has done better since it last tried
                v = s.gap * self._rate(t, s, m, pooled[m])
                if v > value:
                    best, value = (t, m), v
        return None if best is None else self._slice(*best, now)

    def _visit(self, now: float) -> Order:
        run = self.visits.popleft()
        p = self.policy
        if self.deadline is None:
            # no budget: a probe, stopped within 1 % (the later slices lower it further)
            return Order(Move.VISIT, run, p.quick, NEAR)
        left = max(self.deadline - now, 0.0) * self.workers
        if self.span is None:
            self.span, self.span_tiles = left, max(self.unvisited, 1)
        fewest, most = (x * p.quick for x in p.probes)
        setup = self.setup_seconds()
        # capacity first: a tile whose bound is near tileMemory gets ``near_weight`` shares
        # of the time (set-up included: whether it fits is what a few more descents decide)
        near = self.near_unvisited
        weights = (self.unvisited - near) + p.near_weight * near
        held = self.hold()   # over every tile seen: once a visit
        unit = (left - held) / max(weights, 1e-9)
        # at least the least probes, while the run's time left covers that for every tile
        # still to visit: on a report of many tiles the floor alone would outlast the budget
        least = min(fewest, max(left / max(self.unvisited, 1) - setup, 0.0))
        share = min(max(unit - setup, least), most)
        seconds = [min(max(unit * p.near_weight - setup, least), most)
                   if t in self.near_capacity else share for t in run]
        # a budget short for the report (its even share of a tile, less the set-up, below
        # the floor): shares that small leave most tiles where their start put them, so a
        # tile that searches gets a probe instead, and fewer tiles search, stopped at the
        # finest gap the visits' pace affords (a tile whose start, mostly its neighbour's
        # allocation carried over, is within it builds no search arrays). Judged on the
        # whole budget, not on what is left, which the savings themselves would swell
        short = self.span / self.span_tiles - setup < fewest
        stop, paced = p.first_stop, False
        if short:
            stop, paced = self._paced_stop((left - held) / max(self.unvisited, 1)), True
            share = min(max(share, p.quick), most)
            seconds = [min(max(x, p.quick), most) for x in seconds]
        return Order(Move.VISIT, run, round(share, 6), stop,
                     until=now + sum(seconds) + len(run) * setup, setup=setup,
                     each=[round(x, 6) for x in seconds], paced=paced)

    def stops(self) -> list[float]:
        """The gaps a paced visit may stop its tiles within, finest first: ``first_stop``
        doubling, up to 1 %.

        >>> Planner([], [], workers=1, deadline=None, tile_memory=1).stops()
        [0.002, 0.004, 0.008, 0.01]
        """
        g, out = self.policy.first_stop, []
        while g < NEAR:
            out.append(g)
            g *= 2
        return out + [NEAR]

    def _paced_stop(self, afford: float) -> float:
        """The finest stop gap whose paced visits are expected to cost a tile at most
        ``afford`` worker-seconds, else 1 %: a visit's shares shrunk below a probe would
        cost about as much (the set-up, the heuristic) and leave its tiles where the
        heuristic put them. A gap's cost is what its paced visits so far took a tile; one
        not tried yet is expected to cost twice the next coarser one's (half the gap, about
        twice the tiles that search), 1 % nothing: the gaps are tried from the coarsest, each
        once it looks affordable, and a dear one costs a run, not the budget."""
        expected, best = 0.0, NEAR
        for g in reversed(self.stops()):
            seconds, tiles = self._paced.get(g, (0.0, 0))
            expected = seconds / tiles if tiles else 2 * expected
            if expected > afford:
                break
            best = g
            if not tiles:
                break   # the finer ones are tried after this one
        return best

    def _slice(self, t: int, move: Move, now: float) -> Order:
        s = self.tiles[t]
        k = s.tries.get(move, 0)
        if move == Move.CARRY:
            return Order(move, [t], 0.0, None, k)
        first = self.first_slice(move)
        seconds = min(first * 2 ** k, max(self.time_limit, first))
        if self.deadline is None:
            seconds = first if move == Move.QUICK else self.time_limit
        else:
            left = self.deadline - now - self.setup_seconds()
            if self.goal == Goal.FIT:
                # only whether the undecided tiles fit is asked: their slices grow past
                # ``time_limit``, up to an even share of the time left (a proof that one
                # does not fit may need it all)
                undecided = sum(x.may_fit and not x.final for x in self.tiles.values())
                seconds = max(seconds, min(first * 2 ** k, left * self.workers
                                           / max(undecided, 1)))
            seconds = min(seconds, left)
        # a slice runs its time unless its tile is finished: a slice stopped early would pay
        # its next one's set-up again
        stop = None if move == Move.FIT else self.policy.settle
        return Order(move, [t], round(seconds, 6), stop, k)

    # ---- what the run did ------------------------------------------------------------------
    def unreached(self) -> list[int]:
        """Tiles not finished that no revisit reached."""
        return [t for t, s in self.tiles.items() if not s.final and t not in self.revisited]
