"""The schedule of ``auto`` with a budget: its knobs, and how it shares time out.

The driver (``tilemem.pack.driver.allocate``) runs the passes; this module holds what decides
how long each tile's task gets and when a tile is finished with: the knobs (each with why;
what runs showed it is in docs/tuning.md), the first pass's even shares (``EvenShare``) and
the reserve it keeps for the later passes (``ReserveForecast``), the exact stage's reserve and
second round (``_exact_reserve``, ``_again_seconds``), the sweep (``_sweep_rounds``), the order
of exact work (``_exact_priority``), runs of neighbouring tiles (``_runs``) and the one rule
that finishes a tile (``_finished``).
"""
from __future__ import annotations

import multiprocessing
import threading
from dataclasses import dataclass

from .bounds import TileBound
from .portfolio import NEAR
from .scoreboard import may_fit as _may_fit

#: Seconds per tile of each quick search: a probe or two of the search's descents.
QUICK_SECONDS = 0.5
#: A tile's quick search gets at most this many ``QUICK_SECONDS``: past it, the time does
#: more on other tiles.
QUICK_MAX_SHARE = 4
#: Seconds of a worker the exact stage asks per tile left above 1 %: a big tile's fresh start
#: needs a few seconds of descents to begin; at most ``EXACT_RESERVE`` of the time left.
EXACT_SHARE, EXACT_RESERVE = 3.0, 0.5
#: The exact stage stops a tile within this gap, handing its time on: a little below 1 %, so
#: that rounding does not put it back above.
EXACT_STOP = 0.95 * NEAR
#: The first pass keeps ``FIRST_RESERVE`` of the budget for the later passes; a task's set-up
#: is taken as ``SETUP_SECONDS`` until measured; a share is at least ``MIN_SHARE`` quick
#: searches (one probe).
FIRST_RESERVE, SETUP_SECONDS, MIN_SHARE = 0.10, 0.08, 0.2
#: The first pass stops a tile within this gap: far below the gaps that matter while other
#: tiles are still near 1 %.
FIRST_STOP = 0.002
#: A tile that overflows although its bound fits asks the fit stage ``FIT_SECONDS`` of a
#: worker; the reserve is at most ``MAX_RESERVE`` of the budget (the first pass needs time).
FIT_SECONDS, MAX_RESERVE = 3.0, 0.35
#: The exact stage's part of the reserve is at most this share of the budget: a short first
#: pass leaves more tiles above 1 %, which would ask a larger reserve again.
EXACT_MAX = 0.15
#: A tile whose bound is within ``2 * NEAR`` below tileMemory gets this many first-pass
#: shares: there the question is whether it fits, which a few more descents decide.
NEAR_WEIGHT = 3.0
#: The reserve's forecast starts from priors worth a few dozen tiles, so the first results in
#: do not swing it: the share of tiles left above 1 %, and of near-capacity tiles overflowing.
HIGH_PRIOR, HIGH_WEIGHT = 0.01, 64
FIT_PRIOR, FIT_WEIGHT = 1 / 3, 6
#: Neighbouring tiles go in runs of at most ``CHAIN``, each carried over to the next: they
#: hold nearly the same variables, and a run accumulates its tiles' search.
CHAIN = 16
#: The later passes carry over the allocations of at most ``DONORS`` better neighbours up to
#: ``REACH`` tiles away.
REACH, DONORS = 2, 2
#: The sweep goes on from the tiles that took a neighbour's allocation, at most this many
#: rounds: a lucky search on one tile of a layer reaches the whole layer.
SWEEP_ROUNDS = 8
#: The exact stage's second round takes at most ``AGAIN_MAX`` of the time left, and does not
#: run below ``AGAIN_LEAST`` seconds a tile (a fresh start's descents hardly begin).
AGAIN_MAX, AGAIN_LEAST = 0.5, 1.0
#: Seconds of a worker the sweep takes a tile (its problem and a first fit per donor).
CARRY_SECONDS = 0.05
#: A tile within this gap of its bound is finished with: a smaller gap is below what a user
#: reads off a memory map or a profile, so its time goes to the others, and the run ends once
#: every tile is finished.
SETTLE_GAP = 0.001
#: The first pass's end as the driver revises it (``EvenShare``): shared memory, inherited by
#: the forked workers of the local pool; elsewhere (Dask, another process) it stays unset and
#: a task keeps the end it was given.
_FIRST_END = multiprocessing.RawValue("d", float("nan"))
#: The exact stage's tasks started so far, counted by the tasks themselves (shared memory, as
#: ``_FIRST_END``; -1: not counting, as in a process that does not see it), so that a task's
#: share (``EvenShare``) is of the tasks not started yet, not of those after it in the list:
#: the runs go to the workers as they free up, and a long run's last tiles start after the
#: short runs listed after it have finished.
try:
    _STARTED = multiprocessing.Value("q", -1)
except OSError:
    # no shared semaphores on this host (no /dev/shm): the count is still shared memory, its
    # lock this process's only (reentrant: ``.value`` takes it too, inside ``get_lock()``)
    _STARTED = multiprocessing.Value("q", -1, lock=threading.RLock())


class ReserveForecast:
    """What the first pass's results will ask of the later passes, in seconds of the run
    (``seconds``), revised as each result comes in (``add``): ``FIT_SECONDS`` of a worker
    for each tile that overflows although its bound fits, ``EXACT_SHARE`` for each tile
    left above 1%; for the tiles not done yet, the rates seen so far, each started from its
    prior (``HIGH_PRIOR``, ``FIT_PRIOR``: a Beta prior worth ``HIGH_WEIGHT`` and
    ``FIT_WEIGHT`` tiles). Only the ``near_capacity`` tiles (bound within ``2 * NEAR``
    below tileMemory) are expected to overflow; the others count when they do. At least
    ``FIRST_RESERVE`` and at most ``MAX_RESERVE`` of the ``span``.

    >>> f = ReserveForecast(tiles=1000, near_capacity=set(), workers=2, span=240.0)
    >>> f.seconds()                    # the prior alone: 10 tiles above 1% -> 10 s, the floor
    24.0
    >>> for t in range(100):
    ...     f.add(t, may_fit=False, high=t < 10)
    >>> round(f.high_tiles(), 1)       # 10 + 900 * (10 + 0.64) / 164
    68.4
    >>> round(f.seconds(), 1)          # 68.4 s asked, the exact stage's part at most 0.15 x 240
    36.0
    >>> g = ReserveForecast(tiles=1000, near_capacity={0, 1, 2, 3}, workers=2, span=240.0)
    >>> g.add(0, may_fit=True, high=False)   # 1 + 3 * (1 + 2) / 7 near-capacity tiles overflow
    >>> round(g.fit_tiles(), 3), round(g.high_tiles(), 3)
    (2.286, 9.836)
    """

    def __init__(self, tiles: int, near_capacity: set[int], workers: int, span: float):
        self.tiles, self.near = tiles, near_capacity
        self.workers, self.span = max(workers, 1), span
        self.seen = self.high = 0           # results in; of them left above 1%
        self.near_seen = self.near_fit = 0  # near-capacity results in; of them overflowing
        self.far_fit = 0                    # other tiles that overflow although their bound fits

    def add(self, tile: int, may_fit: bool, high: bool) -> None:
        """A result: ``may_fit``, it overflows although its bound fits (the fit stage's);
        ``high``, it is left above 1% (the exact stage's)."""
        self.seen += 1
        self.high += bool(high)
        if tile in self.near:
            self.near_seen += 1
            self.near_fit += bool(may_fit)
        else:
            self.far_fit += bool(may_fit)

    def high_tiles(self) -> float:
        """Tiles the first pass is expected to leave above 1%: the ones in, and the rest at
        the rate seen so far, from its prior."""
        rate = (self.high + HIGH_PRIOR * HIGH_WEIGHT) / (self.seen + HIGH_WEIGHT)
        return self.high + max(self.tiles - self.seen, 0) * rate

    def fit_tiles(self) -> float:
        """Tiles expected to overflow although their bound fits: the ones in, and the
        near-capacity tiles not done yet at the rate seen among them, from its prior."""
        rate = (self.near_fit + FIT_PRIOR * FIT_WEIGHT) / (self.near_seen + FIT_WEIGHT)
        return self.far_fit + self.near_fit + max(len(self.near) - self.near_seen, 0) * rate

    def seconds(self) -> float:
        """The reserve: what the expected tiles ask, over the workers, within its bounds
        (the exact stage's part within ``EXACT_MAX`` of the span)."""
        fit = FIT_SECONDS * self.fit_tiles() / self.workers
        high = min(EXACT_SHARE * self.high_tiles() / self.workers, EXACT_MAX * self.span)
        return min(max(FIRST_RESERVE * self.span, fit + high), MAX_RESERVE * self.span)


def _exact_reserve(left: float, tiles: int, workers: int) -> float:
    """Seconds kept for the exact stage on ``tiles`` tiles above 1%: ``EXACT_SHARE`` of a
    worker each, at most ``EXACT_RESERVE`` of the ``left`` seconds.

    >>> _exact_reserve(100.0, 10, 2), _exact_reserve(6.0, 10, 2)
    (15.0, 3.0)
    """
    return min(EXACT_RESERVE * max(left, 0.0), tiles * EXACT_SHARE / workers)


def _again_seconds(left: float, lengths: list[int], workers: int) -> float:
    """Seconds for the exact stage's second round on the tiles still above 1%, in runs of
    neighbouring tiles of ``lengths``, with ``left`` seconds of the budget to go: what
    ``EXACT_SHARE`` a tile takes (a run's tiles one after the other, the runs spread over
    the ``workers``), at most ``AGAIN_MAX`` of what is left once the sweep after it has its
    part (``CARRY_SECONDS``); none when that gives a tile less than ``AGAIN_LEAST``.

    >>> _again_seconds(20.0, [1, 2, 1, 1], 2), _again_seconds(10.0, [1] * 5, 2)
    (7.5, 4.9375)
    >>> _again_seconds(20.0, [1], 2), _again_seconds(20.0, [3, 1], 2)   # one worker's time
    (3.0, 9.0)
    >>> _again_seconds(4.0, [1] * 5, 2)   # 1.9375 s: 0.775 s a tile
    0.0
    """
    tiles = sum(lengths)
    need = EXACT_SHARE * max(max(lengths, default=0), tiles / workers)
    span = min(need, AGAIN_MAX * (left - CARRY_SECONDS * tiles / workers))
    return span if need > 0 and span * EXACT_SHARE >= AGAIN_LEAST * need else 0.0


def _sweep_rounds(candidates, donors, carry_round, rounds: int | None = None) -> int:
    """The sweep after the exact stage, in rounds: each tile of ``candidates()`` (those
    still above 1%) with ``donors(t)`` (its better neighbours, ``(tile, offsets)``) tries
    them, ``carry_round({tile: donors}, k)`` carrying them over and returning the tiles that
    took one; after the first round, only the donors that took one in the round before
    (the others were tried already). Stops when no tile took one, or after ``rounds``
    (``SWEEP_ROUNDS``); returns the rounds run.

    >>> value = [5, 5, 5, 5, 1]   # a row of tiles, the last one good; lower is better
    >>> def donors(t):
    ...     near = [d for d in (t - 1, t + 1) if 0 <= d < 5 and value[d] < value[t]]
    ...     return tuple((d, None) for d in near)
    >>> def carry_round(sweep, k):
    ...     took = {t for t, d in sweep.items()}
    ...     for t, d in sweep.items():
    ...         value[t] = min(value[x] for x, _ in d)
    ...     return took
    >>> _sweep_rounds(lambda: [t for t in range(5) if value[t] > 1], donors, carry_round)
    4
    >>> value
    [1, 1, 1, 1, 1]
    """
    rounds = SWEEP_ROUNDS if rounds is None else rounds
    changed = None   # the first round: from every better neighbour
    for k in range(rounds):
        sweep = {}
        for t in candidates():
            d = tuple(x for x in donors(t) if changed is None or x[0] in changed)
            if d:
                sweep[t] = d
        if not sweep:
            return k
        changed = carry_round(sweep, k)
        if not changed:
            return k + 1
    return rounds


def _exact_priority(res, tile_memory: int) -> tuple:
    """Sort key of the exact stage: where exact effort matters most comes first.

    First the tiles that overflow although their bound fits in memory (an exact allocation may
    make them fit: the question a user with an out-of-memory tile asks), fewest overflowed bytes
    first (the likeliest to be closed); then every other tile by its gap to the bound, largest
    first (on a tile whose live data alone exceeds memory, lowering the end lowers the overflow
    by as much).

    >>> from tilemem.pack.result import TileResult
    >>> def r(over, gap, bound=90):
    ...     return TileResult(tile=0, method="heuristic", status="heuristic",
    ...                       overflow_bytes=over, total_including_gaps=0, bound=bound,
    ...                       bound_exact=True, gap=gap, seconds=0.0)
    >>> keys = [_exact_priority(x, 100) for x in (r(0, 0.05), r(8, 0.2), r(4, 0.1),
    ...                                            r(50, 0.3, bound=140))]
    >>> sorted(range(4), key=keys.__getitem__)
    [2, 1, 3, 0]
    """
    if _may_fit(res, tile_memory):
        return (0, res.overflow_bytes, 0.0)
    return (1, 0, -res.gap)


def _runs(tiles: list[int], place: dict[int, int]) -> list[list[int]]:
    """``tiles`` cut into runs of neighbours, in tile order: each tile at most ``REACH``
    places after the one before it in ``place`` (the tiles' order), at most ``CHAIN`` a run.

    >>> _runs([15, 1, 3, 9, 2, 16], {t: t for t in range(20)})
    [[1, 2, 3], [9], [15, 16]]
    """
    runs: list[list[int]] = []
    for t in sorted(tiles, key=place.__getitem__):
        if runs and 0 < place[t] - place[runs[-1][-1]] <= REACH and len(runs[-1]) < CHAIN:
            runs[-1].append(t)
        else:
            runs.append([t])
    return runs



def _fit_end(bound: TileBound, tile_memory: int) -> int | None:
    """Under ``Goal.FIT``, the end address at which a tile's search may stop: tileMemory,
    where its bound fits (an allocation ending there fits); None where it cannot fit."""
    return tile_memory if bound[0] <= tile_memory else None


def _standing(res) -> tuple[bool, float]:
    """How well a tile did, lower is better: overflowed or not, then its gap."""
    return (res.overflow_bytes > 0, res.gap)


@dataclass(frozen=True)
class EvenShare:
    """A task's time as an equal share of what is left of a pass: the task at ``index`` of
    ``count`` gets the seconds until ``until`` times the ``workers``, over the tasks not yet
    started (in proportion to its ``weight`` among theirs, ``rest``, when given), less its
    set-up (``SETUP_SECONDS``), between ``least`` and ``most`` (past the run's deadline
    ``_solve`` gives it none). Worked out
    when the task starts, so a pass whose early tiles finish early gives the rest more. With
    ``revised``, the end is the driver's latest (``_FIRST_END``) where this process sees it.

    >>> _SETUP.clear()   # this process has measured no set-up yet: ``SETUP_SECONDS`` a task
    >>> EvenShare(until=110.0, index=0, count=100, workers=2, least=0.1, most=2.0).seconds(100.0)
    0.12
    >>> EvenShare(110.0, 99, 100, 2, 0.1, 2.0).seconds(109.0), EvenShare(110.0, 0, 100, 2, 0.1, 2.0).seconds(120.0)
    (1.92, 0.1)
    >>> EvenShare(110.0, 0, 100, 2, 0.1, 2.0, weight=3.0, rest=102.0).seconds(100.0)   # 3 of 102
    0.508235
    >>> EvenShare(110.0, 90, 100, 2, 0.1, 2.0, deadline=111.0).seconds(110.5)  # 1 s for 10
    0.02
    >>> _STARTED.value = 8   # counted: 8 of 10 tasks started, this one among them, 3 left
    >>> EvenShare(110.0, 2, 10, 2, 0.1, 9.0, run_rest=3).seconds(100.0)   # all its run's: 10 / 3
    3.253333
    >>> EvenShare(110.0, 2, 10, 2, 0.1, 9.0, run_rest=1).seconds(100.0)   # two workers: 20 / 3
    6.586667
    >>> _STARTED.value = -1
    """

    until: float
    index: int
    count: int
    workers: int
    least: float
    most: float
    #: read the end as the driver revises it (``_FIRST_END``), when this process sees it
    revised: bool = False
    #: this task's weight, and the weights of the tasks from it on (None: one each): its
    #: share is its weight's part of theirs
    weight: float = 1.0
    rest: float | None = None
    #: the tiles of this task's run from it on (itself included), when the tasks started are
    #: counted (``_STARTED``): the tasks not started yet instead of ``index``'s, and when
    #: they are all of this run, one worker's time (a run's tiles go one after the other)
    run_rest: int | None = None
    #: the run's deadline: the floor ``least`` shrinks to what the run has left for the
    #: tasks left
    deadline: float | None = None

    def seconds(self, now: float) -> float:
        until = self.until
        if self.revised and _FIRST_END.value == _FIRST_END.value:   # set (not NaN)
            until = min(until, _FIRST_END.value)
        rest = max(self.count - self.index, 1) if self.rest is None else max(self.rest, 1e-9)
        workers = self.workers
        if self.run_rest is not None and _STARTED.value > 0:
            # this task was counted as it started: the tasks left are it and those after it
            rest = max(self.count - _STARTED.value + 1, 1)
            if rest <= self.run_rest:
                workers = 1
        left = (until - now) * workers * self.weight / rest
        least = self.least
        if self.deadline is not None:
            # the floor only while the run's own time left covers it for the tasks left:
            # on a report of many tiles the floor alone would outlast the budget
            run_left = (self.deadline - now) * workers * self.weight / rest
            least = min(least, max(run_left - _SETUP.seconds(), 0.0))
        return round(min(max(left - _SETUP.seconds(), least), self.most), 6)


class _SetUpClock:
    """What a task costs besides its search, as this process has measured it (the tile's
    problem, the heuristic, the search's arrays, the result): ``SETUP_SECONDS`` until
    ``enough`` tasks are measured, then their mean. An even share that subtracted too little
    gave the first tiles of a pass more than their share and the last ones less.

    >>> c = _SetUpClock(enough=2)
    >>> c.seconds() == SETUP_SECONDS
    True
    >>> c.add(0.2); c.add(0.1); round(c.seconds(), 3)
    0.15
    """

    def __init__(self, enough: int = 8):
        self.enough = enough
        self.total = 0.0
        self.count = 0

    def add(self, seconds: float) -> None:
        self.total += max(seconds, 0.0)
        self.count += 1

    def clear(self) -> None:
        self.total, self.count = 0.0, 0

    def seconds(self) -> float:
        return self.total / self.count if self.count >= self.enough else SETUP_SECONDS


#: This process's measure of a task's set-up (each worker process has its own)
_SETUP = _SetUpClock()
