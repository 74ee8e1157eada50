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
from .journal import FINAL, FIRST
from .result import METHODS, Allocation, Goal, Method, Pass, Stage, Status, gap_of
from .schedule import (  # noqa: F401 (the knobs, re-exported for their readers)
    _FIRST_END, _SETUP, _STARTED, AGAIN_LEAST, AGAIN_MAX, CARRY_SECONDS, CHAIN, DONORS,
    EXACT_MAX, EXACT_RESERVE, EXACT_SHARE, EXACT_STOP, FIRST_RESERVE, FIRST_STOP, FIT_SECONDS,
    MAX_RESERVE, MIN_SHARE, NEAR, NEAR_WEIGHT, QUICK_MAX_SHARE, QUICK_SECONDS, REACH,
    SETTLE_GAP, SETUP_SECONDS, SWEEP_ROUNDS, EvenShare, ReserveForecast, _again_seconds,
    _exact_priority, _exact_reserve, _finished, _fit_end, _may_fit, _runs, _standing,
    _sweep_rounds)
from .tasks import (  # noqa: F401
    _SPENT, BoundsTask, RunTask, TileTask, _bounds, _cut, _group_identical, _Progress,
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
    tiles = (report.tiles_in_use() if tiles is None
             else np.unique(np.asarray(tiles, np.int64)))
    deadline = None if deterministic else deadline_after(budget)
    _warm_up()
    groups = _group_identical(report, tiles, rules)
    if method in (Method.AUTO, Method.EXACT):
        # once, before the workers fork (they inherit them): the interval model the search
        # reads sections off, the tensor keys ``carry_over`` matches twins by
        _report_intervals(report)
        tensor_keys(report)
    reps = list(groups)
    place = {t: i for i, t in enumerate(reps)}   # a tile's place among them, in tile order
    known = {int(t): TileBound.of(v) for t, v in (bounds or {}).items()}
    recorded = journal.records if journal is not None else {}
    final = {t: v for t, v in recorded.get(FINAL, {}).items() if t in groups}
    done = {t: v for t, v in recorded.get(FIRST, {}).items() if t in groups}
    done.update(final)
    resumed = set(final)   # not solved again at all
    state = (_Shared(report, rules) if scheduler is None or state_path is None
             else ReportFile(state_path, extra=rules))
    tm = report.target.tile_memory
    with make_executor(scheduler, state, workers=workers, setup=_warm_up, echo=echo) as ex, \
            _Progress(progress) as bar:
        # pass 0: maximum live bytes, in chunks of tiles (one compiled pass per chunk)
        missing = [t for t in reps if t not in known and t not in final]
        if missing:
            k = 1 if len(missing) < 64 else max(1, _workers_of(ex)) * 4
            chunks = [missing[i::k] for i in range(k) if missing[i::k]]
            tl = min(time_limit, 10.0) / len(chunks)
            for _, part in bar.run(ex, _bounds, [BoundsTask(c, tl) for c in chunks],
                                   "maximum live bytes"):
                known.update(part)
        # pass 1: replay or heuristic on every distinct problem not yet done; under auto the
        # heuristic and the quick search in one task (one build of the tile's problem and
        # search arrays for both)
        searching = method == Method.AUTO and quick > 0 and not deterministic
        # with a budget, an even share of it; without one, the quick search to 1% (the
        # later passes then lower every tile further)
        sharing = searching and deadline is not None
        # the tiles' questions decide when each is finished (``_finished``)
        adaptive = sharing
        fit_goal = adaptive and goal == Goal.FIT
        first_pass = (Pass.REPLAY if method == Method.REPLAY
                      else Pass.QUICK if sharing else Pass.NEAR if searching
                      else Pass.HEURISTIC)
        last = method in (Method.REPLAY, Method.HEURISTIC)
        todo = [t for t in reps if t not in done]
        share = None
        # with the search, neighbouring tiles in one task a run, each tile carried over to
        # the next (``CHAIN``); else a task a tile
        runs = _runs(todo, place) if searching else [[t] for t in todo]
        _FIRST_END.value = float("nan")
        if sharing:
            _SETUP.clear()   # measured afresh on this report's tiles (forked workers inherit it)
            # in an order that mixes the program's parts (the tiles of a layer, alike in how
            # hard they are, sit side by side): what the pass learns as it goes (the time a
            # set-up takes, the reserve the later passes ask) then holds for the tiles left:
            # the runs in a random order
            runs = [runs[k] for k in np.random.default_rng(seed).permutation(len(runs))]
            todo = [t for run in runs for t in run]
            w = _workers_of(ex)
            span = max(deadline - time.time(), 0.0)
            until = deadline - FIRST_RESERVE * span
            # the tiles a first pass is expected to leave overflowing although their bound
            # fits (any other that does counts as it comes in)
            near_capacity = {t for t in todo if tm >= known[t][0] > tm / (1 + 2 * NEAR)}
            weight = np.array([NEAR_WEIGHT if t in near_capacity else 1.0 for t in todo])
            rest = np.cumsum(weight[::-1])[::-1]
            share = [EvenShare(until, i, len(todo), w, MIN_SHARE * quick,
                               QUICK_MAX_SHARE * quick, revised=True, weight=float(weight[i]),
                               rest=float(rest[i]))
                     for i in range(len(todo))]
            forecast = ReserveForecast(len(todo), near_capacity, w, span)
            _FIRST_END.value = deadline - forecast.seconds()
        tasks = [TileTask(t, first_pass, None, None, known[t],
                          quick if searching else time_limit, seed,
                          deterministic=deterministic,
                          share=share[i] if share else None,
                          stop_gap=FIRST_STOP if share else None,
                          stop_end=_fit_end(known[t], tm) if fit_goal else None)
                 for i, t in enumerate(todo)]
        first_label = ("heuristic, then quick search (an even share of the budget)" if sharing
                       else "heuristic, then quick search to 1% of the bound" if searching
                       else str(first_pass))

        def record(t: int, res, off, is_final: bool) -> None:
            """Keep a tile's latest result (its seconds summed over the passes) and journal
            it, as final or as a first pass that later passes may improve."""
            if t in done:
                # the seconds of every pass, and the highest bound any of them proved
                prev = done[t][0]
                bound = max(res.bound, prev.bound)
                res = replace(res, seconds=res.seconds + prev.seconds, bound=bound,
                              gap=gap_of(res.total_including_gaps, bound),
                              bound_exact=res.bound_exact or prev.bound_exact)
            done[t] = (res, off)
            answered = _finished(res, tm, goal, settle) if adaptive else None
            if answered if answered is not None else is_final:
                final[t] = done[t]
            if journal is not None:
                journal.append(t, res, off, FINAL if t in final else FIRST)

        first = _cut(tasks, [len(run) for run in runs])
        for _, out in bar.run(ex, _solve_run, first, first_label,
                              deadline=deadline if searching else None):
            for t, res, off in out:
                record(t, res, off,
                       last or (method == Method.AUTO and res.status == Status.OPTIMAL))
                if sharing:
                    # the reserve, revised: what this result will ask of the later passes
                    asks_fit = _may_fit(res, tm)
                    forecast.add(t, asks_fit, not asks_fit and res.gap > NEAR
                                 and res.status != Status.OPTIMAL)
                    _FIRST_END.value = deadline - forecast.seconds()
        _FIRST_END.value = float("nan")
        todo = [] if last else [t for t in reps if t not in final
                                and (method == Method.EXACT or done[t][0].status != Status.OPTIMAL)]
        todo.sort(key=lambda t: _exact_priority(done[t][0], tm) + (t,))
        # deterministic: one CP-SAT worker whatever the machine, so a run repeats on any
        # number of cores and on a cluster
        n = max(1, min(_workers_of(ex), len(todo)))
        cp_workers = max(1, cores() // n) if scheduler is None and not deterministic else 1

        def donors(t: int) -> tuple[tuple[int, np.ndarray], ...]:
            """The allocations of the neighbours (up to ``REACH`` tiles away in tile order)
            that did better than tile ``t``, best first, at most ``DONORS`` of them: to carry
            over (``tilemem.pack.carry``). None with ``deterministic``: which results the
            neighbours have when a task is made depends on what finished first, and a
            resumed run (its finished tiles at their final results) would differ from the
            uninterrupted one."""
            if deterministic or method not in (Method.AUTO, Method.EXACT):
                return ()
            own = _standing(done[t][0])
            near = [reps[j] for j in range(place[t] - REACH, place[t] + REACH + 1)
                    if 0 <= j < len(reps) and j != place[t]]
            better = sorted((_standing(done[d][0]), d) for d in near
                            if d in done and _standing(done[d][0]) < own)
            return tuple((d, done[d][1]) for _, d in better[:DONORS])

        reached: set[int] = set()   # tiles the exact stage (either round) reached

        def exact(tiles_: list[int], how: Pass = Pass(method), until: float | None = deadline,
                  shares: list["EvenShare"] | None = None,
                  lengths: list[int] | None = None, stop_gap: float | None = None,
                  seed_: int = seed, label: str = "exact") -> None:
            tasks = [TileTask(t, how, done[t][1], done[t][0], known[t], time_limit, seed_,
                              cp_workers, deterministic, share=shares[i] if shares else None,
                              donors=donors(t), stop_gap=stop_gap)
                     for i, t in enumerate(tiles_)]
            # runs of the given ``lengths`` (neighbouring tiles, each carried over to the
            # next), else a task a tile
            runs = _cut(tasks, lengths or [1] * len(tasks))
            for _, out in bar.run(ex, _solve_run, runs, label, deadline=until):
                for t, res, off in out:
                    if t in reached and _SPENT in res.note:
                        continue   # reached by the exact stage before: it keeps that result
                    # "fit" stops once the tile fits, and a stage with ``stop_gap`` once
                    # the tile is within it: it goes on to the later passes
                    stop = (stop_gap is not None and res.status != Status.OPTIMAL
                            and res.gap <= stop_gap)
                    if shares is not None:
                        reached.add(t)
                    record(t, res, off, not stop and (
                        how != Pass.FIT or res.status == Status.OPTIMAL
                        or res.overflow_bytes > 0))

        def quick_pass(label: str, seed: int, tiles_: list[int]) -> None:
            """The quick search, as low as it gets, on ``tiles_`` (the tiles that overflow
            although their bound fits first, fewest overflowed bytes first; then the largest
            gap first) within the run's budget: each tile gets an equal share of the time
            left, between ``quick`` and ``QUICK_MAX_SHARE`` times it."""
            tiles_ = sorted(tiles_, key=lambda t: _exact_priority(done[t][0], tm) + (t,))
            share = quick
            if deadline is not None and tiles_:
                share = (deadline - time.time()) * _workers_of(ex) / len(tiles_)
            share = min(max(share, quick), QUICK_MAX_SHARE * quick)
            tasks = [TileTask(t, Pass.QUICK, done[t][1], done[t][0], known[t], share, seed,
                              donors=donors(t), stop_gap=settle if adaptive else None,
                              stop_end=_fit_end(known[t], tm) if fit_goal else None)
                     for t in tiles_]
            for _, (t, res, off) in bar.run(ex, _solve, tasks, label, deadline=deadline):
                if _SPENT not in res.note:   # not reached: the exact pass says so if it is not
                    record(t, res, off, res.status == Status.OPTIMAL)

        def still_high() -> list[int]:
            """The tiles above 1% of their bound (not proven optimal) whose bound is above
            tileMemory or which fit: the sweep's and the exact stage's second round's."""
            return [t for t in todo if done[t][0].gap > NEAR
                    and done[t][0].status != Status.OPTIMAL
                    and not _may_fit(done[t][0], tm)]

        def above_near() -> list[int]:
            """Those no pass has finished with: the exact stage's first round's (under
            auto a tile proven optimal is finished with)."""
            return [t for t in still_high() if t not in final]

        may_fit = {t for t in todo if _may_fit(done[t][0], tm)}
        # pass 2: exact where a tile overflows although its bound fits (would a better
        # allocation fit? what a user with an out-of-memory tile asks); under auto only until
        # it fits, its end address then lowered like every other tile's; it leaves the
        # tiles above 1% whose bound fits their reserve (below), which it otherwise spent on
        # seed 3 (a tile that cannot fit waits: "would it fit?" comes before its overflow)
        fit_until = deadline
        tail = [t for t in above_near() if known[t][0] <= tm]
        if searching and deadline is not None and tail:
            fit_until = deadline - _exact_reserve(deadline - time.time(), len(tail),
                                                  _workers_of(ex))
        exact([t for t in todo if t not in final and t in may_fit],
              Pass.FIT if method == Method.AUTO else Pass(method), until=fit_until)
        if searching:
            # pass 3: the exact stage (on big tiles its descents, then neighbourhoods) on
            # every tile still above 1%, one set-up a tile: each an even share of the time
            # left, worked out when it starts (``EvenShare``), so that it reaches them all;
            # neighbouring tiles in one task a run (the tiles left above 1% are often one
            # layer's, side by side), the search's gains on one carried over to the next;
            # then the sweep, and a second round where time is left; pass 4: the quick
            # search on every other tile (a little time on every tile lowers far more of
            # them than seconds of exact effort on a few)
            def exact_stage(tiles_: list[int], until: float | None, seed_: int,
                            label: str) -> None:
                runs = _runs(tiles_, place)
                runs.sort(key=lambda run: min(_exact_priority(done[t][0], tm) + (t,)
                                              for t in run))
                high = [t for run in runs for t in run]
                shares = None
                if until is not None and high:
                    # each tile's share of the tasks not started yet (``_STARTED``), of one
                    # worker's time once they are all its run's
                    run_rest = [len(run) - k for run in runs for k in range(len(run))]
                    shares = [EvenShare(until, i, len(high), w, MIN_SHARE * quick, time_limit,
                                        run_rest=run_rest[i])
                              for i in range(len(high))]
                _STARTED.value = 0
                try:
                    exact(high, shares=shares, lengths=[len(run) for run in runs],
                          stop_gap=EXACT_STOP if shares else None, seed_=seed_, label=label)
                finally:
                    _STARTED.value = -1

            # the sweep: the tiles still above 1% take a better neighbour's latest allocation,
            # carried over, where it is better than theirs (no search)
            # (the exact stage's tiles among them: their results there are final); again
            # from the neighbours that took one, while any did (``_sweep_rounds``)
            def carry_round(sweep: dict, k: int) -> set[int]:
                tasks = [TileTask(t, Pass.CARRY, done[t][1], done[t][0], known[t], 0.0, seed,
                                  donors=d) for t, d in sweep.items()]
                changed = set()
                for _, (t, res, off) in bar.run(ex, _solve, tasks, "carry over"
                                                if k == 0 else "carry over again"):
                    if res.note.startswith(CARRIED):
                        record(t, res, off, t in final)
                        changed.add(t)
                return changed

            w = _workers_of(ex)
            high = above_near()
            # the exact stage ends early enough for the sweep after it
            exact_stage(high, None if deadline is None
                        else deadline - CARRY_SECONDS * len(high) / w, seed, "exact")
            _sweep_rounds(still_high, donors, carry_round)
            # a second round on the tiles still above 1%, with another seed, on the time the
            # first round left (its tiles stopped within ``EXACT_STOP`` early, after the
            # tiles above 1% had had their shares): ``_again_seconds``
            again = still_high()
            if deadline is not None and again:
                span = _again_seconds(deadline - time.time(),
                                      [len(run) for run in _runs(again, place)], w)
                if span > 0:
                    exact_stage(again, time.time() + span, seed + 2, "exact again")
                    _sweep_rounds(still_high, donors, carry_round)
            quick_pass("quick search", seed + 1, [t for t in todo if t not in final])
        # pass 5: exact on the rest, largest gap first, while the budget lasts
        exact([t for t in todo if t not in final], stop_gap=settle if adaptive else None)
    ended_early = None
    # ended before the budget because every tile's question is answered (not merely
    # because every pass had run)
    if adaptive and deadline is not None and all(
            _finished(done[t][0], tm, goal, settle) for t in reps):
        left = deadline - time.time()
        ended_early = round(left, 1) if left > 1.0 else None
    offsets = report.offset.copy()
    results = []
    for rep, members in groups.items():
        res, off = done[rep]
        for t in members:
            rows = report.tile_rows(int(t))
            offsets[rows] = off
            r = res if t == rep else replace(res, tile=int(t), seconds=0.0,
                                              note=f"same problem as tile {rep}")
            if method == Method.REPLAY:
                r = replace(r, placed_as_report=int(np.sum(off == report.offset[rows])))
            results.append(r)
    results.sort(key=lambda r: r.tile)
    spent = [t for t in groups if _SPENT in done[t][0].note]
    unreached = sum(len(groups[t]) for t in spent)
    unreached_far = sum(len(groups[t]) for t in spent if done[t][0].gap > NEAR)
    # a tile a search pass reached carries that pass's method ("quick" or "exact")
    unsearched = sum(len(groups[t]) for t in spent
                     if done[t][0].method in (Stage.HEURISTIC, Stage.REPLAY))
    alloc = Allocation(offsets, results, from_journal=len(resumed), unreached=unreached,
                       unreached_far=unreached_far, unsearched=unsearched, passes=bar.passes,
                       ended_early=ended_early, goal=Goal(goal),
                       settle=settle if adaptive and goal == Goal.END else None)
    if verify:
        _verify(report, alloc, rules)
    return alloc
