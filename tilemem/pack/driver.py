"""Re-run the allocation of a report's tiles (the driver): ``allocate``.

``allocate`` packs every chosen tile and returns the new offset column with one
``TileResult`` per tile. Methods:

- ``replay``: first fit in the report's ``allocationOrderByTile`` order (Poplar-like); counts
  how many variables land on the report's own offsets.
- ``heuristic``: the best of a few greedy orders (``tilemem.pack.heuristic``), never worse
  than replay (the replay order is one of its candidates).
- ``auto`` (default): the heuristic everywhere; on the tiles that overflow although their
  bound fits, the quick search (``tilemem.pack.portfolio.quick_search``) and then the exact
  portfolio (``tilemem.pack.portfolio``) until they fit; the quick search stopped within 1%
  of the bound on every other tile above it (a little time on every tile first); the exact
  portfolio (on big tiles the search's descents and neighbourhoods,
  ``tilemem.pack.neighbourhood``) on every tile still above 1%, an even share of the time
  left each, and a second round with another seed on those it leaves above 1% where time
  is left; the quick search again, as low as it gets; then the exact portfolio on the
  rest.
- ``exact``: the exact portfolio on every tile (it also lowers the regions' high-water marks,
  the objective's last criterion).

The lower bound of each tile is its maximum live bytes (``tilemem.pack.bounds.tile_bounds``),
computed once for all tiles, or passed in (``bounds``). Identical tiles (same columns, classes,
constraints and replay order) are solved once. Tiles run in parallel in forked worker
processes, which inherit the report at the fork rather than receive a copy of it.

>>> from tilemem.model import Report
>>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0, 0, 1], size=[8, 8, 4],
...     alignment=[4, 4, 4], offset=[8, 0, 0], category=["variable"] * 3,
...     eq_class=[0, 0, 0], interference=[[]], allocation_order=[[1, 0], [2]])
>>> a = allocate(r, method="replay", workers=1)
>>> a.offsets.tolist(), [t.placed_as_report for t in a.tiles]
([8, 0, 0], [2, 1])
>>> allocate(r, workers=1).tiles[0].status
'optimal'
"""
from __future__ import annotations

import time

from msgspec.structs import replace

import numpy as np

from ..model import Report
from ..model.names import tensor_keys
from ..rules import DEFAULT_RULES, Rules
from .bounds import TileBound
from .carry import CARRIED
from .cluster import ReportFile, cores, deadline_after, make_executor
from .result import METHODS, Allocation, Goal, Method, Pass, Stage, Status
from .schedule import (  # noqa: F401 (re-exported: the names tests and benchmarks read here)
    _FIRST_END, _SETUP, _STARTED, AGAIN_LEAST, CARRY_SECONDS, CHAIN, DONORS, EXACT_STOP,
    FIRST_RESERVE, FIRST_STOP, MIN_SHARE, NEAR, NEAR_WEIGHT, QUICK_MAX_SHARE, QUICK_SECONDS,
    REACH, SETTLE_GAP, SETUP_SECONDS, EvenShare, ReserveForecast, _again_seconds,
    _exact_priority, _exact_reserve, _fit_end, _runs, _standing, _sweep_rounds)
from .scoreboard import Scoreboard, may_fit as _may_fit
from .scoreboard import finished
from .scoreboard import finished as _finished  # noqa: F401 (its readers' name)
from .tasks import (  # noqa: F401
    _SPENT, BoundsTask, TileTask, _bounds, _cut, _group_identical, _Progress,
    _replay_order, _report_intervals, _Shared, _solve, _solve_run, _verify, _warm_up,
    _workers_of)


def allocate(report: Report, *, method: str = "auto", tiles=None, time_limit: float = 10.0,
             workers: int | None = None, seed: int = 0, rules: Rules = DEFAULT_RULES,
             progress: bool = False, deterministic: bool = False, verify: bool = False,
             bounds: dict[int, tuple[int, bool]] | None = None, budget: float | None = None,
             scheduler: str | None = None, state_path=None, journal=None,
             echo=None, quick: float = QUICK_SECONDS, goal: str = Goal.END,
             settle: float | None = SETTLE_GAP) -> Allocation:
    """Pack ``tiles`` (default: every tile in use) of ``report`` with ``method``.

    ``time_limit``: seconds per tile for the exact part (a cap). ``budget``: seconds for the
    whole run (None: no run-wide limit). Every tile gets the bound and the heuristic whatever
    the budget; under ``auto`` the quick search too, in the same task: with a budget as low
    as it gets (at most to ``FIRST_STOP``), the tiles in a random order, within an even
    share of the budget (``EvenShare``; ``FIRST_RESERVE`` of it
    kept, more as the results ask for the later passes: ``FIT_SECONDS``, ``EXACT_SHARE``,
    at most ``MAX_RESERVE``), without one stopped within 1% of the bound. Then, while the
    budget lasts: on the tiles that overflow although their bound fits (fewest overflowed
    bytes first) the exact portfolio until they fit; the exact portfolio on every tile left
    above 1% (largest gap first, each an even share of the time left, at most
    ``time_limit``), and again, with another seed, on those still above 1% where the first
    round left time (``_again_seconds``); the quick search on every other tile; and the
    exact portfolio on the rest (largest gap first). A tile not
    reached keeps its valid allocation, never worse than replay.
    ``workers``: processes (default all cores). ``scheduler``: ``None`` this machine's process
    pool, ``"local"`` a Dask LocalCluster, ``"tcp://HOST:PORT"`` a Dask scheduler
    (``tilemem.pack.cluster``); ``state_path``: the report's file, which Dask workers then open
    themselves (a capnp report is memory-mapped) instead of receiving it.
    ``deterministic``: CP-SAT and the local search stop on work done rather than on the clock
    (repeatable whatever the load or the machine; the budget is then not applied, as it is a
    clock). ``verify``: run ``tilemem.check`` on the result and raise if it finds a violation.
    ``bounds``: precomputed ``{tile: (maximum live bytes, exact)}`` or ``TileBound`` (as
    ``tile_bounds`` gives),
    used instead of computing them again. ``journal``: a ``tilemem.pack.journal.Journal``:
    tiles it has finished are not solved again, and every tile is appended as it finishes.
    ``echo``: where to say which cluster runs the tasks. ``quick``: seconds per tile of
    ``auto``'s quick search (``tilemem.pack.portfolio.quick_search``), run on every tile the
    heuristic leaves above its bound before the exact stage (0: none; not with
    ``deterministic``, as it stops on the clock). ``goal`` (under ``auto`` with a budget):
    ``Goal.END`` lowers every tile's end; ``Goal.FIT`` answers whether each tile fits, a
    tile finished once it fits or is known not to, its time going to the tiles still
    undecided. ``settle``: under ``Goal.END``, a tile within this fraction of its bound is
    finished (None: never, the budget is spent); the run ends early once every tile is
    finished (``Allocation.ended_early``).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    run = _Run(report, method=method, tiles=tiles, time_limit=time_limit, seed=seed,
               rules=rules, deterministic=deterministic, bounds=bounds, budget=budget,
               journal=journal, quick=quick, goal=goal, settle=settle)
    state = (_Shared(report, rules) if scheduler is None or state_path is None
             else ReportFile(state_path, extra=rules))
    with make_executor(scheduler, state, workers=workers, setup=_warm_up, echo=echo) as ex, \
            _Progress(progress) as bar:
        run.start(ex, bar, scheduler)
        # the plan: each pass takes the tiles not finished with (``Scoreboard``)
        run.bounds()              # every tile's maximum live bytes
        run.first_pass()          # replay or the heuristic; under auto the quick search too
        if not run.last:
            run.fit_stage()       # the tiles that overflow although their bound fits
            if run.searching:
                run.exact_stage(run.seed, "exact")   # the tiles left above 1 %
                run.sweep()                          # their better neighbours carried over
                run.second_round()                   # again, another seed, on time left
                run.quick_pass()                     # the quick search on the rest
            run.exact_rest()      # the exact portfolio on the rest while the budget lasts
            run.undecided()       # under Goal.FIT: the time left to the tiles undecided
    alloc = run.allocation()
    if verify:
        _verify(report, alloc, rules)
    return alloc


class _Run:
    """One run of ``allocate``: its settings, the tiles' problems (identical tiles grouped),
    their bounds, the ``Scoreboard``, and a method a pass."""

    def __init__(self, report: Report, *, method, tiles, time_limit, seed, rules,
                 deterministic, bounds, budget, journal, quick, goal, settle):
        self.report, self.method, self.time_limit, self.seed = report, method, time_limit, seed
        self.deterministic, self.quick, self.goal, self.settle = (deterministic, quick, goal,
                                                                  settle)
        tiles = (report.tiles_in_use() if tiles is None
                 else np.unique(np.asarray(tiles, np.int64)))
        self.deadline = None if deterministic else deadline_after(budget)
        _warm_up()
        self.groups = _group_identical(report, tiles, rules)
        if method in (Method.AUTO, Method.EXACT):
            # once, before the workers fork (they inherit them): the interval model the
            # search reads sections off, the tensor keys ``carry_over`` matches twins by
            _report_intervals(report)
            tensor_keys(report)
        self.reps = list(self.groups)
        # a tile's place among them, in tile order
        self.place = {t: i for i, t in enumerate(self.reps)}
        self.known = {int(t): TileBound.of(v) for t, v in (bounds or {}).items()}
        self.tm = report.target.tile_memory
        self.searching = method == Method.AUTO and quick > 0 and not deterministic
        # with a budget, an even share of it; without one, the quick search to 1% (the
        # later passes then lower every tile further)
        self.sharing = self.searching and self.deadline is not None
        # the tiles' questions decide when each is finished (``Scoreboard``)
        self.adaptive = self.sharing
        self.fit_goal = self.adaptive and goal == Goal.FIT
        self.last = method in (Method.REPLAY, Method.HEURISTIC)
        self.board = Scoreboard(self.tm, goal, settle, self.adaptive, journal, self.groups)
        self.todo: list[int] = []
        self.reached: set[int] = set()   # tiles the exact stage (either round) reached
        self.cp_workers = 1

    def start(self, ex, bar, scheduler) -> None:
        """The pool the passes run on, and its progress bar."""
        self.ex, self.bar, self.scheduler = ex, bar, scheduler
        self.w = _workers_of(ex)

    # ---- pass 0 and pass 1 --------------------------------------------------------------
    def bounds(self) -> None:
        """Maximum live bytes, in chunks of tiles (one compiled pass per chunk)."""
        missing = [t for t in self.reps if t not in self.known and not self.board.is_final(t)]
        if missing:
            k = 1 if len(missing) < 64 else max(1, self.w) * 4
            chunks = [missing[i::k] for i in range(k) if missing[i::k]]
            tl = min(self.time_limit, 10.0) / len(chunks)
            for _, part in self.bar.run(self.ex, _bounds, [BoundsTask(c, tl) for c in chunks],
                                        "maximum live bytes"):
                self.known.update(part)

    def first_pass(self) -> None:
        """Replay or heuristic on every distinct problem not yet done; under auto the
        heuristic and the quick search in one task (one build of the tile's problem and
        search arrays for both), neighbouring tiles in one task a run, each carried over to
        the next (``CHAIN``); with a budget, each an even share of it (``EvenShare``), less
        a reserve for the later passes (``ReserveForecast``)."""
        method, quick, tm, known = self.method, self.quick, self.tm, self.known
        first_pass = (Pass.REPLAY if method == Method.REPLAY
                      else Pass.QUICK if self.sharing else Pass.NEAR if self.searching
                      else Pass.HEURISTIC)
        todo = [t for t in self.reps if t not in self.board.done]
        share = forecast = None
        runs = _runs(todo, self.place) if self.searching else [[t] for t in todo]
        _FIRST_END.value = float("nan")
        if self.sharing:
            _SETUP.clear()   # measured afresh on this report's tiles (forked workers inherit it)
            # in an order that mixes the program's parts (the tiles of a layer, alike in how
            # hard they are, sit side by side): what the pass learns as it goes (the time a
            # set-up takes, the reserve the later passes ask) then holds for the tiles left
            runs = [runs[k] for k in np.random.default_rng(self.seed).permutation(len(runs))]
            todo = [t for run in runs for t in run]
            span = max(self.deadline - time.time(), 0.0)
            until = self.deadline - FIRST_RESERVE * span
            # the tiles a first pass is expected to leave overflowing although their bound
            # fits (any other that does counts as it comes in)
            near_capacity = {t for t in todo if tm >= known[t][0] > tm / (1 + 2 * NEAR)}
            weight = np.array([NEAR_WEIGHT if t in near_capacity else 1.0 for t in todo])
            rest = np.cumsum(weight[::-1])[::-1]
            share = [EvenShare(until, i, len(todo), self.w, MIN_SHARE * quick,
                               QUICK_MAX_SHARE * quick, revised=True, weight=float(weight[i]),
                               rest=float(rest[i]), deadline=self.deadline)
                     for i in range(len(todo))]
            forecast = ReserveForecast(len(todo), near_capacity, self.w, span)
            _FIRST_END.value = self.deadline - forecast.seconds()
        tasks = [TileTask(t, first_pass, None, None, known[t],
                          quick if self.searching else self.time_limit, self.seed,
                          deterministic=self.deterministic,
                          share=share[i] if share else None,
                          stop_gap=FIRST_STOP if share else None,
                          stop_end=_fit_end(known[t], tm) if self.fit_goal else None)
                 for i, t in enumerate(todo)]
        label = ("heuristic, then quick search (an even share of the budget)" if self.sharing
                 else "heuristic, then quick search to 1% of the bound" if self.searching
                 else str(first_pass))
        first = _cut(tasks, [len(run) for run in runs])
        for _, out in self.bar.run(self.ex, _solve_run, first, label,
                                   deadline=self.deadline if self.searching else None):
            for t, res, off in out:
                self.board.record(t, res, off, self.last or (
                    method == Method.AUTO and res.status == Status.OPTIMAL))
                if forecast is not None:
                    # the reserve, revised: what this result will ask of the later passes
                    asks_fit = _may_fit(res, tm)
                    forecast.add(t, asks_fit, not asks_fit and res.gap > NEAR
                                 and res.status != Status.OPTIMAL)
                    _FIRST_END.value = self.deadline - forecast.seconds()
        _FIRST_END.value = float("nan")
        board = self.board
        self.todo = [] if self.last else [
            t for t in self.reps if not board.is_final(t)
            and (method == Method.EXACT or board.result(t).status != Status.OPTIMAL)]
        self.todo.sort(key=lambda t: _exact_priority(board.result(t), tm) + (t,))
        # CP-SAT's threads: the cores over the tasks at once; deterministic: one whatever the
        # machine, so a run repeats on any number of cores and on a cluster
        n = max(1, min(self.w, len(self.todo)))
        self.cp_workers = (max(1, cores() // n)
                           if self.scheduler is None and not self.deterministic else 1)

    # ---- which tiles ----------------------------------------------------------------------
    def donors(self, t: int) -> tuple[tuple[int, np.ndarray], ...]:
        """The allocations of the neighbours (up to ``REACH`` tiles away in tile order) that
        did better than tile ``t``, best first, at most ``DONORS`` of them: to carry over
        (``tilemem.pack.carry``). None with ``deterministic``: which results the neighbours
        have when a task is made depends on what finished first, and a resumed run (its
        finished tiles at their final results) would differ from the uninterrupted one."""
        if self.deterministic or self.method not in (Method.AUTO, Method.EXACT):
            return ()
        done, reps = self.board.done, self.reps
        own = _standing(done[t][0])
        near = [reps[j] for j in range(self.place[t] - REACH, self.place[t] + REACH + 1)
                if 0 <= j < len(reps) and j != self.place[t]]
        better = sorted((_standing(done[d][0]), d) for d in near
                        if d in done and _standing(done[d][0]) < own)
        return tuple((d, done[d][1]) for _, d in better[:DONORS])

    def still_high(self) -> list[int]:
        """The tiles above 1% of their bound (not proven optimal) whose bound is above
        tileMemory or which fit: the sweep's and the exact stage's second round's."""
        return [t for t in self.todo if (r := self.board.result(t)).gap > NEAR
                and r.status != Status.OPTIMAL and not _may_fit(r, self.tm)]

    def above_near(self) -> list[int]:
        """Those no pass has finished with: the exact stage's first round's."""
        return [t for t in self.still_high() if not self.board.is_final(t)]

    # ---- the passes after the first -------------------------------------------------------
    def exact(self, tiles: list[int], how: Pass | None = None, until: float | None = None,
              shares: list[EvenShare] | None = None, lengths: list[int] | None = None,
              stop_gap: float | None = None, seed: int | None = None,
              label: str = "exact", time_limit: float | None = None) -> None:
        """The exact portfolio (``how``: a pass, default the method) on ``tiles`` in runs of
        the given ``lengths`` (neighbouring tiles, each carried over to the next), else a
        task a tile; ``until`` (default the run's deadline); ``stop_gap``: a tile stops once
        within it, and goes on to the later passes."""
        how = Pass(self.method) if how is None else how
        until = self.deadline if until is None else until
        seed = self.seed if seed is None else seed
        board = self.board
        tasks = [TileTask(t, how, board.offsets(t), board.result(t), self.known[t],
                          self.time_limit if time_limit is None else time_limit, seed,
                          self.cp_workers, self.deterministic,
                          share=shares[i] if shares else None, donors=self.donors(t),
                          stop_gap=stop_gap)
                 for i, t in enumerate(tiles)]
        runs = _cut(tasks, lengths or [1] * len(tasks))
        for _, out in self.bar.run(self.ex, _solve_run, runs, label, deadline=until):
            for t, res, off in out:
                if t in self.reached and _SPENT in res.note:
                    continue   # reached by the exact stage before: it keeps that result
                # "fit" stops once the tile fits, and a stage with ``stop_gap`` once the tile
                # is within it: it goes on to the later passes
                stop = (stop_gap is not None and res.status != Status.OPTIMAL
                        and res.gap <= stop_gap)
                if shares is not None:
                    self.reached.add(t)
                board.record(t, res, off, not stop and (
                    how != Pass.FIT or res.status == Status.OPTIMAL or res.overflow_bytes > 0))

    def fit_stage(self) -> None:
        """Exact where a tile overflows although its bound fits (would a better allocation
        fit? what a user with an out-of-memory tile asks); under auto only until it fits,
        its end then lowered like every other tile's. It leaves the tiles above 1% whose
        bound fits their reserve (``_exact_reserve``); a tile that cannot fit waits: "would
        it fit?" comes before its overflow."""
        may_fit = {t for t in self.todo if _may_fit(self.board.result(t), self.tm)}
        until = self.deadline
        tail = [t for t in self.above_near() if self.known[t][0] <= self.tm]
        if self.searching and self.deadline is not None and tail:
            until = self.deadline - _exact_reserve(self.deadline - time.time(), len(tail),
                                                   self.w)
        self.exact([t for t in self.todo if not self.board.is_final(t) and t in may_fit],
                   Pass.FIT if self.method == Method.AUTO else Pass(self.method), until=until)

    def exact_stage(self, seed: int, label: str, tiles: list[int] | None = None,
                    until: float | None = None) -> None:
        """The exact stage (on big tiles its descents, then neighbourhoods) on the tiles
        still above 1% (``tiles``, default those no pass has finished with), one set-up a
        tile: each an even share of the time left, worked out when it starts
        (``EvenShare`` over the tasks started, ``_STARTED``), so that it reaches them all;
        neighbouring tiles in one task a run (the tiles left above 1% are often one
        layer's, side by side), the search's gains on one carried over to the next. By
        default it ends early enough for the sweep after it."""
        if tiles is None:
            tiles = self.above_near()
            until = (None if self.deadline is None
                     else self.deadline - CARRY_SECONDS * len(tiles) / self.w)
        runs = _runs(tiles, self.place)
        runs.sort(key=lambda run: min(_exact_priority(self.board.result(t), self.tm) + (t,)
                                      for t in run))
        high = [t for run in runs for t in run]
        shares = None
        if until is not None and high:
            # each tile's share of the tasks not started yet (``_STARTED``), of one worker's
            # time once they are all its run's
            run_rest = [len(run) - k for run in runs for k in range(len(run))]
            shares = [EvenShare(until, i, len(high), self.w, MIN_SHARE * self.quick,
                                self.time_limit, run_rest=run_rest[i])
                      for i in range(len(high))]
        _STARTED.value = 0
        try:
            # (the tasks themselves stop at ``until`` by their shares; the pool at the
            # run's deadline)
            self.exact(high, shares=shares, lengths=[len(run) for run in runs],
                       stop_gap=EXACT_STOP if shares else None, seed=seed, label=label)
        finally:
            _STARTED.value = -1

    def carry_round(self, sweep: dict, k: int) -> set[int]:
        """Tiles take a better neighbour's latest allocation, carried over, where it is
        better than theirs (no search); returns the tiles that took one."""
        board = self.board
        tasks = [TileTask(t, Pass.CARRY, board.offsets(t), board.result(t), self.known[t],
                          0.0, self.seed, donors=d) for t, d in sweep.items()]
        changed = set()
        for _, (t, res, off) in self.bar.run(self.ex, _solve, tasks, "carry over"
                                             if k == 0 else "carry over again",
                                             deadline=self.deadline):
            if res.note.startswith(CARRIED):
                board.record(t, res, off, board.is_final(t))
                changed.add(t)
        return changed

    def sweep(self) -> None:
        """The tiles still above 1% take their better neighbours' allocations, again from
        the neighbours that took one, while any did (``_sweep_rounds``)."""
        _sweep_rounds(self.still_high, self.donors, self.carry_round)

    def second_round(self) -> None:
        """The exact stage again on the tiles still above 1%, with another seed, on the time
        the first round left (its tiles stopped within ``EXACT_STOP`` early, after the
        tiles above 1% had had their shares): ``_again_seconds``; then the sweep."""
        again = self.still_high()
        if self.deadline is None or not again:
            return
        span = _again_seconds(self.deadline - time.time(),
                              [len(run) for run in _runs(again, self.place)], self.w)
        if span > 0:
            self.exact_stage(self.seed + 2, "exact again", again, time.time() + span)
            self.sweep()

    def quick_pass(self) -> None:
        """The quick search, as low as it gets, on every tile not finished with (the tiles
        that overflow although their bound fits first, fewest overflowed bytes first; then
        the largest gap first) within the run's budget: each an equal share of the time
        left, between ``quick`` and ``QUICK_MAX_SHARE`` times it."""
        board, tm = self.board, self.tm
        tiles = sorted((t for t in self.todo if not board.is_final(t)),
                       key=lambda t: _exact_priority(board.result(t), tm) + (t,))
        share = self.quick
        if self.deadline is not None and tiles:
            share = (self.deadline - time.time()) * self.w / len(tiles)
        share = min(max(share, self.quick), QUICK_MAX_SHARE * self.quick)
        tasks = [TileTask(t, Pass.QUICK, board.offsets(t), board.result(t), self.known[t],
                          share, self.seed + 1, donors=self.donors(t),
                          stop_gap=self.settle if self.adaptive else None,
                          stop_end=_fit_end(self.known[t], tm) if self.fit_goal else None)
                 for t in tiles]
        for _, (t, res, off) in self.bar.run(self.ex, _solve, tasks, "quick search",
                                             deadline=self.deadline):
            if _SPENT not in res.note:   # not reached: the exact pass says so if it is not
                board.record(t, res, off, res.status == Status.OPTIMAL)

    def exact_rest(self) -> None:
        """The exact portfolio on the rest, largest gap first, while the budget lasts."""
        self.exact([t for t in self.todo if not self.board.is_final(t)],
                   stop_gap=self.settle if self.adaptive else None)

    def undecided(self) -> None:
        """Under ``Goal.FIT``, the time left goes to the tiles still undecided (they may fit,
        no pass found how, none proved they cannot): the exact portfolio until they fit, all
        the time left shared among them, with another seed each round, until none is left
        or the budget is spent."""
        board, tm = self.board, self.tm
        for k in range(1, 1 << 30):
            if not self.fit_goal:
                return
            left = self.deadline - time.time()
            tiles = [t for t in self.reps
                     if finished(board.result(t), tm, self.goal, self.settle) is False]
            if not tiles or left < 1.0:
                return
            share = left * self.w / len(tiles)
            self.exact(tiles, Pass.FIT, seed=self.seed + 3 * k, label="until it fits",
                       time_limit=max(self.time_limit, share))

    # ---- the result ------------------------------------------------------------------------
    def allocation(self) -> Allocation:
        """The offsets of every tile (identical tiles share their representative's) and a
        ``TileResult`` each; what the budget left undone; whether the run ended early."""
        report, groups, board = self.report, self.groups, self.board
        offsets = report.offset.copy()
        results = []
        for rep, members in groups.items():
            res, off = board.done[rep]
            for t in members:
                rows = report.tile_rows(int(t))
                offsets[rows] = off
                r = res if t == rep else replace(res, tile=int(t), seconds=0.0,
                                                  note=f"same problem as tile {rep}")
                if self.method == Method.REPLAY:
                    r = replace(r, placed_as_report=int(np.sum(off == report.offset[rows])))
                results.append(r)
        results.sort(key=lambda r: r.tile)
        spent = [t for t in groups if _SPENT in board.result(t).note]
        unreached = sum(len(groups[t]) for t in spent)
        unreached_far = sum(len(groups[t]) for t in spent if board.result(t).gap > NEAR)
        # a tile a search pass reached carries that pass's method ("quick" or "exact")
        unsearched = sum(len(groups[t]) for t in spent
                         if board.result(t).method in (Stage.HEURISTIC, Stage.REPLAY))
        # ended before the budget because every tile's question is answered (not merely
        # because every pass had run)
        ended_early = None
        if self.adaptive and board.all_answered(self.reps):
            left = self.deadline - time.time()
            ended_early = round(left, 1) if left > 1.0 else None
        return Allocation(offsets, results, from_journal=len(board.resumed),
                          unreached=unreached, unreached_far=unreached_far,
                          unsearched=unsearched, passes=self.bar.passes,
                          ended_early=ended_early, goal=Goal(self.goal),
                          settle=(self.settle if self.adaptive and self.goal == Goal.END
                                  else None))
