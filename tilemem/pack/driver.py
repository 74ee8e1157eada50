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

import hashlib
import multiprocessing
import threading
import time
from dataclasses import dataclass
from dataclasses import replace as replace_task

from msgspec.structs import replace

import numpy as np

from ..check import check_allocation
from ..liveness import class_intervals
from ..model import Report
from ..model.names import tensor_keys
from ..rules import DEFAULT_RULES, Rules
from ..model.target import Target
from . import search
from .bounds import TileBound, tile_bounds
from .carry import CARRIED, carry_over
from .cluster import LocalPool, ReportFile, cores, deadline_after, make_executor, remaining
from .firstfit import first_fit
from .guard import self_check
from .journal import FINAL, FIRST
from .portfolio import NEAR, solve_tile
from .problem import TileProblem
from .result import (METHODS, Allocation, Goal, Method, Pass, PassTime, Stage, Status,
                     TileResult, Verdict, gap_of, objective)

#: Seconds per tile of each of auto's quick searches, besides building the search's arrays.
QUICK_SECONDS = 0.5
#: The passes that run the compiled search (on a previous result, within the run's budget).
_SEARCHED = (Pass.AUTO, Pass.EXACT, Pass.QUICK, Pass.NEAR, Pass.FIT)
#: The quick search's share of a tile in the second pass: at most this many times
#: ``QUICK_SECONDS`` (on 37 sampled Mk2 tiles of seed 1 from the heuristic: 0.5 s of quick
#: search gave a median gap of 0.37 %, 1 s 0.23 % and every tile within 1 %).
QUICK_MAX_SHARE = 4
#: The exact stage on the tiles the first pass leaves above 1%: a reserve of ``EXACT_SHARE``
#: seconds a tile (of the workers' time), at most ``EXACT_RESERVE`` of the budget left, kept
#: from the fit stage before it. The stage then gives each of them an equal share of what is
#: left (``EvenShare``, at most ``time_limit``) in one task: the search's descents and
#: neighbourhoods after one set-up. (Seed 2 of the generated Mk2: a quick pass on them before
#: the exact stage, each task its own set-up, with a floor of 0.5 s a tile in the stage, left
#: 28 of the 53 tiles still above 1% unreached.) Three seconds: the stage starts a big tile
#: afresh besides going on from its allocation (``portfolio._fresh_start``), and at 1 s the
#: fresh start's descents hardly begin; what the stage takes the first pass pays (the
#: forecast reserves this much for each tile it expects above 1%), which the median gap
#: feels. Default runs on the generated Mk2 (docs/benchmarks.md, second to eighth parts):
#: with 3 s seed 2 ended 99.73 % within 1% (4 tiles above it), median 0.321 %, where with
#: 2 s 99.18-99.25 % (11-12 above), median 0.304-0.341 %; with 6 s its first pass ended at
#: 152 s, median 0.378 %.
EXACT_SHARE, EXACT_RESERVE = 3.0, 0.5
#: The exact stage stops a tile once its end is within ``EXACT_STOP`` of the bound: the
#: stage is there to bring the tiles left above 1% within it, and what a tile leaves goes
#: to the tiles after it (``EvenShare``), not to lowering one already within 1% further
#: (the later passes, the quick search and the exact portfolio on the rest, lower it while
#: the budget lasts). A little below 1%, not at it: a tile at 0.999% is one rounding away
#: from "above 1%".
EXACT_STOP = 0.95 * NEAR
#: With a budget, the first pass gives every tile an even share of the budget (a tile near
#: capacity more, ``NEAR_WEIGHT``; the heuristic,
#: then the quick search as low as it gets), keeping ``FIRST_RESERVE`` of it for the later
#: passes (the tiles that may fit, the exact stage on the tiles left above 1%). Every tile
#: then pays its set-up once (``SETUP_SECONDS``: the problem, the heuristic, the search's
#: arrays) where a first pass stopped at 1% and a second quick pass paid it twice. (Seed 1 of
#: the generated Mk2, budget 240 s: the first pass to 1% took 150 s and the second reached a
#: seventh of the tiles.) Each share is between ``MIN_SHARE`` times ``quick`` (one or two
#: probes) and ``QUICK_MAX_SHARE`` times it.
FIRST_RESERVE, SETUP_SECONDS, MIN_SHARE = 0.10, 0.08, 0.2
#: The first pass stops a tile's quick search once its end is within ``FIRST_STOP`` of the
#: bound, and what the tile leaves goes to the tiles after it (``EvenShare``): far below the
#: gaps that matter, while a tenth of a Mk2 report's tiles are still above 0.8%.
FIRST_STOP = 0.002
#: The reserve grows while the first pass runs, by what its results ask of the later passes:
#: ``FIT_SECONDS`` of a worker for each tile that overflows although its bound fits (the fit
#: stage took 2.3-3.5 s a tile on seeds 2 and 3 of the generated Mk2), ``EXACT_SHARE`` for
#: each tile left above 1%; at most ``MAX_RESERVE`` of the budget. (Seed 3: the fit stage on
#: 31 tiles took the whole fixed reserve, and the 23 tiles above 1% got none of it.)
FIT_SECONDS, MAX_RESERVE = 3.0, 0.35
#: The exact stage's part of that reserve is at most ``EXACT_MAX`` of the budget: the first
#: pass leaves more tiles above 1% the less time it has, and the reserve asked for them
#: shortened it again. (Seed 4 of the generated Mk2, budget 240 s, two runs alike in the first
#: pass: the first pass ending at 177 s, 46 tiles to the exact passes, median gap 0.332 %;
#: then, the reserve at ``MAX_RESERVE``, at 150 s, 84 tiles, median 0.398 %.)
EXACT_MAX = 0.15
#: A tile whose bound is within ``2 * NEAR`` below tileMemory gets ``NEAR_WEIGHT`` times
#: the first pass's even share: there the question is "does it fit?", a few more of the
#: quick search's descents decide it, and one left overflowing costs the fit stage about
#: ``FIT_SECONDS`` and, forecast, the first pass that much of every tile's share. (Default
#: runs on the generated Mk2 without steps, one share each: seed 4 left 13-17 of its 73 such
#: tiles overflowing in two runs, and 48-72 in four others, three of them on a machine a
#: fifth slower, where a share holds a descent fewer (about two descents a probe at full
#: speed); then the reserve reached its cap and the first pass ended at 150 s
#: instead of 183-191 s, median gap 0.46-0.70 % against 0.33-0.36 %. Three shares: 2 of 73
#: in two runs, the first pass ending at 210 s, 99.66-99.73 % within 1 %, median
#: 0.325-0.332 %; seed 2 0.339 % against 0.372 %; seeds 1 and 3 0.222 % and 0.199 %
#: against 0.230 % and 0.219 %; ``tilemem oom`` on seed 3 at pressure 1.05: 43 fit and 4
#: undecided against 40 and 7.)
NEAR_WEIGHT = 3.0
#: The reserve is projected to the whole pass from the results in (the tiles go in a random
#: order) and from a prior worth a few tiles, so that the first results do not swing it:
#: ``HIGH_PRIOR`` of the tiles left above 1% (the default runs' first passes on the
#: generated Mk2 seeds 1-4 left 0.1-1.4 % once a tile's set-up cost less, 1a1af6f),
#: weighing as much as ``HIGH_WEIGHT`` tiles; and,
#: only among the tiles whose bound is within ``2 * NEAR`` below tileMemory (no other tile
#: ends a first pass overflowing: its gap would have to pass 2%), ``FIT_PRIOR`` of them
#: overflowing (5-53 % on those seeds, 19-37 % on seeds 2 and 4 after 1a1af6f), weighing
#: ``FIT_WEIGHT`` tiles. (Before: the
#: reserve projected from the results alone, as the count of tiles above 1% times the
#: tiles over those seen, after 73 of 1,472 tiles; a tile that overflowed among them
#: counted 20 times, 30 s of the reserve; the pass ended at 152-195 s on seed 2 in runs of
#: the same code, and a seed-1 run whose first seconds shared the cores ended it at 154 s
#: instead of 209 s, median gap 0.33 % against 0.24 %. Seed 3, the reserve grown by the
#: results in alone, not projected: the tiles done before them had taken its time, and the
#: fit stage got 37 s for 38 tiles: 6 more undecided, 6 fewer fit.)
HIGH_PRIOR, HIGH_WEIGHT = 0.01, 64
FIT_PRIOR, FIT_WEIGHT = 1 / 3, 6
#: The first pass goes over the tiles in runs of ``CHAIN`` neighbouring tiles, one task a run
#: (the runs in a random order): each tile of a run starts from the better of the
#: heuristic's allocation and its predecessor's, carried over (``tilemem.pack.carry``: a
#: program's tensors are spread over neighbouring tiles in equal slices, so neighbours hold
#: nearly the same variables). A good allocation found on one tile then lifts the tiles after
#: it, and a tile that starts near its bound spends less of its share getting there; a run
#: accumulates its tiles' search. (Median gap over 96 neighbouring tiles of the generated
#: Mk2, 0.13 s of quick search a tile: seed 2's tiles 1000-1095, each alone 0.69 %, in runs
#: of 8 0.66 %, of 32 0.61 %; tiles 560-655: 0.67, 0.65, 0.62 %; seed 4's tiles 700-795 in
#: runs of 8, 16, 32: 0.80, 0.77, 0.78 %; 1200-1295: 0.31, 0.33, 0.28 %. In default runs,
#: 32 did better on seed 4, median 0.398-0.405 % against 0.466 %, but worse on seeds 2 and 3,
#: 0.458-0.474 % against 0.371-0.431 % and 0.263 % against 0.239 %: with fewer, larger runs
#: the reserve is projected from fewer samples, and the first pass ended 20-40 s earlier.)
CHAIN = 16
#: Neighbours whose allocations are carried over to a tile in the later passes: up to
#: ``REACH`` tiles away in tile order, at most ``DONORS`` of them (the best first). (The
#: generated Mk2's seed-2 tiles left above 1 % by a default run: of 30, the better of the
#: neighbours 1 or 2 tiles away brought 6 within 1 %.)
REACH, DONORS = 2, 2
#: The sweep after the exact stage goes on from the tiles that took a neighbour's allocation,
#: at most this many rounds in all: a run of neighbours left above 1% is often one layer's,
#: nearly one problem, where a lucky search on one tile carries over to the others within 0.01
#: points (the generated Mk2's seed-2 tile 1269 at 0.75 % after 3 s: carried over to tiles
#: 1266-1268 at 0.74-0.75 %, to 1270-1273 at 0.89-0.98 %, where the exact stage had left
#: them at 1.03-1.23 %), and one round reaches only ``REACH`` tiles away.
SWEEP_ROUNDS = 8
#: The exact stage's second round: the tiles still above 1% after the first round and its
#: sweep, with another seed (a big tile's end within reach is a matter of the fresh start's
#: luck: on the generated Mk2's seed-2 tile 1269, after 1.6 s, two of six seeds reach
#: 0.75 % and four stay at 1.08-1.15 %), on the time the first round left unused (its tiles
#: stopped within ``EXACT_STOP`` early, after those above 1% had had their shares: 20 s of
#: seed 4's went to the quick search after it). ``EXACT_SHARE`` a tile, at most
#: ``AGAIN_MAX`` of the time left (the quick search after it lowers the tiles with the
#: largest gaps below 1%), and none below ``AGAIN_LEAST`` a tile (a fresh start's descents
#: hardly begin in a second).
AGAIN_MAX, AGAIN_LEAST = 0.5, 1.0
#: Seconds of a worker the sweep after the exact stage takes a tile (the tile's problem and
#: a first fit or two per donor), kept from the exact stage.
CARRY_SECONDS = 0.05
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
#: Under ``auto`` with a budget, a tile whose end is within this fraction of its bound is
#: finished with: a smaller gap is below what a user reads off a memory map or a profile, so
#: its time goes to the tiles above it, and the run ends once every tile is finished.
SETTLE_GAP = 0.001
#: The note of a tile the exact stage did not reach within the run's budget.
_SPENT = "run budget spent before the exact stage"


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


def _cut(tasks: list["TileTask"], lengths: list[int]) -> list["RunTask"]:
    """``tasks``, in their order, as consecutive runs of the given ``lengths``."""
    ends = np.cumsum(lengths).tolist()
    return [RunTask(tasks[a:b]) for a, b in zip([0] + ends[:-1], ends)]


def _finished(res, tile_memory: int, goal: str, settle: float | None) -> bool | None:
    """Is a tile finished with, whichever pass made ``res``? The one place a run of ``auto``
    with a budget decides it. True: proven optimal; under ``Goal.FIT``, it fits, cannot fit
    (its bound is past tileMemory) or is proven not to; under ``Goal.END``, its end is within
    ``settle`` of its bound and it does not overflow where its bound fits. False: under
    ``Goal.FIT``, still undecided (no pass lets it go). None: the pass that made it decides.

    >>> from tilemem.pack.result import TileResult
    >>> def r(over=0, gap=0.005, bound=90, status="feasible", proven=None):
    ...     return TileResult(tile=0, method="quick", status=status, overflow_bytes=over,
    ...                       total_including_gaps=0, bound=bound, bound_exact=True, gap=gap,
    ...                       seconds=0.0, proven_on=proven)
    >>> [_finished(x, 100, "end", 0.001) for x in (r(), r(gap=0.0005), r(status="optimal"),
    ...                                            r(over=4, gap=0.0005))]
    [None, True, True, None]
    >>> [_finished(x, 100, "fit", 0.001) for x in (r(), r(over=4), r(over=4, bound=120),
    ...                                            r(over=4, proven=12))]
    [True, False, True, True]
    """
    if res.status == Status.OPTIMAL:
        return True
    if goal == Goal.FIT:
        return not _may_fit(res, tile_memory) or res.proven_on is not None
    if settle is not None and res.gap <= settle and not _may_fit(res, tile_memory):
        return True
    return None


def _fit_end(bound: TileBound, tile_memory: int) -> int | None:
    """Under ``Goal.FIT``, the end address at which a tile's search may stop: tileMemory,
    where its bound fits (an allocation ending there fits); None where it cannot fit."""
    return tile_memory if bound[0] <= tile_memory else None


def _standing(res) -> tuple[bool, float]:
    """How well a tile did, lower is better: overflowed or not, then its gap."""
    return (res.overflow_bytes > 0, res.gap)


def _may_fit(res, tile_memory: int) -> bool:
    """The tile overflows although its lower bound fits in memory."""
    return res.overflow_bytes > 0 and res.bound <= tile_memory


# ---- the tiles' problems -------------------------------------------------------------------
def _replay_order(report: Report, tile: int, rows: np.ndarray) -> np.ndarray:
    """The report's allocation order of ``tile`` as local indices."""
    order = report.allocation_order
    if tile >= order.num_rows:
        return np.zeros(0, np.int64)
    listed = order.row(tile)
    pos = np.searchsorted(rows, listed)  # rows of a tile are increasing
    pos_c = np.minimum(pos, max(len(rows) - 1, 0))
    ok = (pos < len(rows)) & (rows[pos_c] == listed) if len(rows) else pos < 0
    return pos_c[ok].astype(np.int64)


def _group_identical(report: Report, tiles: np.ndarray, rules: Rules) -> dict[int, list[int]]:
    """Representative tile -> the tiles with the same problem and the same replay order.

    The key is a digest of the tile's own columns with the *global* class ids, its
    constraint pairs and replay order in local indices: tiles with equal keys have equal
    ``TileProblem`` s (same classes, so the same interference) without building them (which
    costs ~10x more on a big report). Tiles equal only up to a renaming of classes are
    solved separately, which is merely slower. (``rules`` are the same for every tile.)
    """
    r = report
    groups: dict[bytes, list[int]] = {}
    flags = np.stack([r.always_live, r.executable, r.vertex_code, r.lowest_256kb,
                      r.in_interleaved_mem], axis=1).astype(np.uint8)
    for t in tiles.tolist():
        rows = r.tile_rows(t)
        h = hashlib.blake2b(digest_size=16)
        for a in (r.size[rows], r.alignment[rows], r.eq_class[rows], flags[rows],
                  _local_pair_key(r.element_constraints, rows),
                  _local_pair_key(r.region_constraints, rows), _replay_order(r, t, rows)):
            a = np.ascontiguousarray(a)
            h.update(str(a.shape).encode())
            h.update(a.tobytes())
        groups.setdefault(h.digest(), []).append(t)
    return {members[0]: members for members in groups.values()}


def _local_pair_key(csr, rows: np.ndarray) -> np.ndarray:
    """The constraint lists of ``rows`` with entries as local indices (order kept)."""
    lengths, entries = csr.gather(rows)
    if len(entries) == 0:
        return np.zeros(0, np.int64)
    local = np.searchsorted(rows, entries)
    return np.concatenate([lengths, local]).astype(np.int64)


# ---- the tasks and the progress bar ---------------------------------------------------------
@dataclass(frozen=True)
class _Shared:
    """What every task reads: the report and the rules. Forked pool workers inherit it at the
    fork; Dask workers receive it once (or open a ``ReportFile`` themselves)."""

    report: Report
    rules: Rules


def _state(shared) -> tuple[Report, Rules]:
    if isinstance(shared, ReportFile):
        return shared.load(), shared.extra
    return shared.report, shared.rules


@dataclass(frozen=True)
class TileTask:
    """One tile for a worker (``_solve``): pack ``tile`` with ``method`` (a method or a pass of
    ``solve_tile``) from ``hint`` (local offsets) within ``time_limit`` seconds; ``prev``: its
    result so far (kept when the run's budget is spent before it is reached); ``bound``:
    ``(maximum live bytes, exact)``; ``cp_workers``: CP-SAT's threads."""

    tile: int
    method: Pass
    hint: np.ndarray | None
    prev: TileResult | None
    bound: TileBound
    time_limit: float
    seed: int
    cp_workers: int = 1
    deterministic: bool = False
    share: "EvenShare | None" = None
    stop_gap: float | None = None
    #: the quick search also stops once the end is at or below this address (``_fit_end``)
    stop_end: int | None = None
    #: ``(tile, local offsets)`` of similar tiles (neighbours), to carry over as a start
    donors: tuple[tuple[int, np.ndarray], ...] = ()


@dataclass(frozen=True)
class RunTask:
    """Neighbouring tiles for one worker (``_solve_run``), in order: each tile's result is
    carried over to the next (its first donor)."""

    tasks: list[TileTask]


@dataclass(frozen=True)
class EvenShare:
    """A task's time as an equal share of what is left of a pass: the task at ``index`` of
    ``count`` gets the seconds until ``until`` times the ``workers``, over the tasks not yet
    started (in proportion to its ``weight`` among theirs, ``rest``, when given), less its
    set-up (``SETUP_SECONDS``), between ``least`` and ``most``. Worked out
    when the task starts, so a pass whose early tiles finish early gives the rest more. With
    ``revised``, the end is the driver's latest (``_FIRST_END``) where this process sees it.

    >>> _SETUP.clear()   # this process has measured no set-up yet: ``SETUP_SECONDS`` a task
    >>> EvenShare(until=110.0, index=0, count=100, workers=2, least=0.1, most=2.0).seconds(100.0)
    0.12
    >>> EvenShare(110.0, 99, 100, 2, 0.1, 2.0).seconds(109.0), EvenShare(110.0, 0, 100, 2, 0.1, 2.0).seconds(120.0)
    (1.92, 0.1)
    >>> EvenShare(110.0, 0, 100, 2, 0.1, 2.0, weight=3.0, rest=102.0).seconds(100.0)   # 3 of 102
    0.508235
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
        return round(min(max(left - _SETUP.seconds(), self.least), self.most), 6)


class _SetUpClock:
    """What a task costs besides its search, as this process has measured it (the tile's
    problem, the heuristic, the search's arrays, the result): ``SETUP_SECONDS`` until
    ``enough`` tasks are measured, then their mean. An even share that subtracted too little
    gave the first tiles of a pass more than their share and the last ones less (seed 2 of
    the generated Mk2: 0.31 s a tile at the start, 0.14 s at the end).

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


@dataclass(frozen=True)
class BoundsTask:
    """A chunk of tiles whose bounds a worker computes (``_bounds``)."""

    tiles: list[int]
    time_limit: float


def _solve(shared, task: TileTask, deadline: float | None):
    """Task: solve one tile, ``(tile, TileResult, local offsets)``. The exact part gets what
    is left of the run's budget (``deadline``), at most ``time_limit``; a tile reached after
    the deadline keeps its previous result (``prev``)."""
    tile, method, hint, prev = task.tile, task.method, task.hint, task.prev
    started = time.time()
    if task.share is not None and task.share.run_rest is not None:
        with _STARTED.get_lock():
            if _STARTED.value >= 0:
                _STARTED.value += 1
    time_limit = task.time_limit if task.share is None else task.share.seconds(started)
    searched = method in _SEARCHED
    if searched:
        # a first pass (no ``prev``) still places the tile by the heuristic when the
        # budget is spent; a later one keeps what the tile has
        time_limit = remaining(deadline, time_limit)
        if prev is not None and time_limit < 0.05:
            # seconds=0: this task took none (the caller adds the passes' seconds up)
            return tile, replace(prev, seconds=0.0, note=(prev.note + "," if prev.note else "")
                                 + _SPENT), hint
    report, rules = _state(shared)
    p = TileProblem.from_report(report, tile, rules,
                                _report_intervals(report) if searched else None)
    rows = p.rows
    carried = None
    if searched or method == Pass.CARRY:
        # the best of the donors' allocations carried over (solve_tile takes it when it is
        # better than the tile's own)
        for d, d_off in task.donors:
            c = carry_over(report, d, d_off, p)
            if c is not None and (carried is None or objective(p, c) < objective(p, carried[1])):
                carried = (d, c)
    res, off = solve_tile(p, method, hint=hint, carried=carried,
                          replay_order=_replay_order(report, tile, rows),
                          time_limit=time_limit, seed=task.seed, cp_workers=task.cp_workers,
                          deterministic=task.deterministic, bound=task.bound,
                          given=None if method == Pass.REPLAY else report.offset[rows],
                          stop_gap=task.stop_gap, stop_end=task.stop_end)
    if task.share is not None and res.status != Status.OPTIMAL and (
            task.stop_gap is None or res.gap > task.stop_gap):
        # the search had its whole share: the rest of the task's time was its set-up
        _SETUP.add(time.time() - started - time_limit)
    return tile, res, off


def _solve_run(shared, run: RunTask, deadline: float | None):
    """Task: the tiles of a run in order (``_solve`` each), each given its predecessor's
    allocation to carry over; ``[(tile, TileResult, local offsets), ...]``."""
    out = []
    for task in run.tasks:
        if out and task.method in _SEARCHED:
            task = replace_task(task, donors=((out[-1][0], out[-1][2]),) + task.donors)
        out.append(_solve(shared, task, deadline))
    return out


def _report_intervals(report: Report) -> np.ndarray | None:
    """The report's interval model (``tilemem.liveness.class_intervals``, cached on the
    report) when it has several tiles in use: the search reads every tile's sections off it.
    A one-tile report recognises its own graph as before (the same work, done once anyway)."""
    if len(report.tiles_in_use()) < 2:
        return None
    return class_intervals(report)


def _bounds(shared, task: BoundsTask, deadline: float | None) -> dict[int, tuple[int, bool]]:
    """Task: ``tile_bounds`` of a chunk of tiles."""
    report, _ = _state(shared)
    return tile_bounds(report, task.tiles, task.time_limit)


def _workers_of(ex) -> int:
    if isinstance(ex, LocalPool):
        return ex.workers
    try:
        return max(1, len(ex.client.scheduler_info().get("workers", {})))
    except Exception:  # noqa: BLE001 - a scheduler that does not say: assume one
        return 1


class _Progress:
    """A progress bar on stderr over the passes (or nothing)."""

    def __init__(self, show: bool):
        self.show = show
        self.progress = None
        self.passes: list[PassTime] = []

    def __enter__(self) -> "_Progress":
        if self.show:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                     MofNCompleteColumn(), TimeElapsedColumn(),
                                     TimeRemainingColumn(), console=Console(stderr=True),
                                     transient=True)
            self.progress.start()
        return self

    def run(self, ex, fn, tasks: list, label: str, deadline: float | None = None):
        """``ex.run`` of the tasks, advancing a bar as results arrive; each pass's seconds
        and tasks are kept in ``passes`` (where a run's budget went)."""
        bar = (self.progress.add_task(label, total=len(tasks))
               if self.progress is not None and tasks else None)
        t0 = time.perf_counter()
        for item in ex.run(fn, tasks, deadline=deadline):
            if bar is not None:
                self.progress.advance(bar)
            yield item
        if tasks:
            self.passes.append(PassTime(label, round(time.perf_counter() - t0, 3), len(tasks)))

    def __exit__(self, *exc) -> None:
        if self.progress is not None:
            self.progress.stop()


def _warm_up() -> None:
    """Compile the numba kernels once in the parent, so forked workers inherit them."""
    r = Report.from_columns(target=Target(1, 64, 32, np.array([0, 32])), var_id=[0, 1],
                            tile=[0, 0], size=[4, 4], alignment=[4, 4], offset=[0, 0],
                            category=["variable"] * 2, eq_class=[0, 0], interference=[[]],
                            element_constraints=[[1], []], region_constraints=[[1], []])
    p = TileProblem.from_report(r, 0)
    self_check(p, first_fit(p))
    search.warm_up()


def _verify(report: Report, alloc: Allocation, rules: Rules) -> None:
    res = check_allocation(report, alloc.offsets, rules=rules)
    if not res.ok:
        raise AssertionError(f"allocation failed the checker: {res.violations[:3]}")
