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
>>> a = allocate(r, method="replay", run=RunOptions(workers=1))
>>> a.offsets.tolist(), [t.placed_as_report for t in a.tiles]
([8, 0, 0], [2, 1])
>>> allocate(r, run=RunOptions(workers=1)).tiles[0].status
'optimal'
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from msgspec.structs import replace

import numpy as np

from ...model import Report
from ...model.names import tensor_keys
from ...rules import DEFAULT_RULES, Rules, overflow_bytes
from ..bounds import TileBound
from ..compiled import ready
from ...jit import compiled, interpreting
from ..workers.cluster import ReportFile, cores, deadline_after
from ..workers.executors import make_executor
from ..kinds import DEFAULTS, METHODS, Goal, Method, Pass, Stage
from ..result import Allocation
from ..params import DEFAULT_PARAMS, SolverParams
from .plan import DEFAULT_POLICY, Move, Order, Planner, Policy
from ..quick import NEAR
from .schedule import _exact_priority, _fit_end, _runs, _standing
from .scoreboard import Question, Scoreboard, may_fit as _may_fit
from .tasks import (BoundsTask, RunTask, TileTask, _as_reported, _bounds, _cut,
                    _group_identical,
                    _Progress, _report_intervals, _Shared, _solve_run,
                    _verify, _workers_of, task_ipu)

#: What a Dask worker makes ready as it starts (``make_executor``'s ``setup``).
_ready_to_pack = partial(ready, "problem", "pack")


@dataclass(frozen=True)
class RunOptions:
    """How a run of ``allocate`` runs, not what it tunes (that is ``Policy``): each field
    with why it is there.

    ``executor``: the seam the tests use: an executor to run the tasks on (the interface of
    ``cluster.LocalPool``: a context manager with ``run`` and ``stream``) instead of the one
    ``workers`` and ``scheduler`` make; it holds its own copy of the report.
    """

    #: processes of this machine's pool (None: every core)
    workers: int | None = None
    #: None: this machine's process pool; ``"local"``: a Dask LocalCluster;
    #: ``"tcp://HOST:PORT"``: a running Dask scheduler (``tilemem.pack.workers.cluster``)
    scheduler: str | None = None
    #: on Dask, whether the workers open the report's own file (``Report.file``, set by the
    #: loader) and build their IPUs' shards of it (``cluster.ReportFile``; a capnp report is
    #: memory-mapped) instead of receiving a copy: None, a capnp file is opened by the
    #: workers, and sent to every worker where one cannot read it; True, the file is opened
    #: whatever its format and a worker that cannot read it is a ``ReportError``; False,
    #: every worker receives the report
    shared_file: bool | None = None
    #: runs the tasks instead of the pool ``workers`` and ``scheduler`` make (the tests')
    executor: Any = None
    #: stop on work done rather than the clock (repeatable on any machine; the budget, a
    #: clock, is not applied): the heuristic, then the exact portfolio on every tile
    deterministic: bool = False
    #: every random choice of the run derives from it
    seed: int = 0
    #: the placement rules' parameters (``tilemem.rules``)
    rules: Rules = DEFAULT_RULES
    #: under ``auto``, what each tile is asked: ``Goal.END`` how low its end goes,
    #: ``Goal.FIT`` whether it fits (a tile finished once that is known)
    goal: Goal = Goal.END
    #: ``{tile: (maximum live bytes, exact)}`` or ``TileBound`` s already known (as
    #: ``tile_bounds`` gives): not computed again
    bounds: Mapping[int, Any] | None = None
    #: a ``tilemem.pack.run.journal.Journal`` (or what stands for one): tiles it has finished
    #: are not solved again, every tile appended as it finishes
    journal: Any = None
    #: where to say which cluster runs the tasks
    echo: Callable[[str], Any] | None = None
    #: a progress bar on stderr
    progress: bool = False
    #: run ``tilemem.check`` on the result and raise on a violation
    verify: bool = False
    #: the search's and the portfolio's tuning values (``tilemem.pack.params``; None: the
    #: defaults), handed to every worker with the report
    solver: SolverParams | None = None


#: A run with every default: this machine's cores, seed 0, ``Goal.END``.
DEFAULT_RUN = RunOptions()


def allocate(report: Report, *, method: str = Method.AUTO, tiles=None,
             budget: float | None = None, policy: Policy = DEFAULT_POLICY,
             run: RunOptions = DEFAULT_RUN) -> Allocation:
    """Pack ``tiles`` (default: every tile in use) of ``report`` with ``method``: the one
    entry point of packing (the API and ``figures.oom`` call it; the commands, the API).

    ``budget``: seconds for the whole run (None: no run-wide limit). Every tile gets its bound
    whatever the budget. Under ``auto`` (not ``deterministic``, ``policy.quick`` above 0) the
    time then goes by the plan (``tilemem.pack.run.plan``): every tile visited (the heuristic,
    then the quick search, an even share of the time no revisit is expected to need), then
    each next slice of a worker to the tiles that may fit and, among the rest, to the tile
    and move expected to close the most gap per second (``Planner``); without a budget, a
    visit stopped within 1 % and one slice of each move on each tile left. A tile not
    visited within the budget keeps the report's own offsets; one visited keeps its valid
    allocation, never worse than them. With ``run.deterministic`` or ``policy.quick`` 0:
    the heuristic, then the exact portfolio on every tile not proven optimal.

    ``policy``: the plan's knobs (``Policy``: ``time_limit``, a slice's cap; ``settle``, the
    gap a tile is finished within, None: never; ``quick``, the quick search's probe, ...).
    The run ends early once every tile is finished (``Allocation.ended_early``).
    ``run``: how it runs (``RunOptions``: workers, scheduler, executor, seed, goal, known
    bounds, journal, progress, verify, ...).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if interpreting() and (method in (Method.AUTO, Method.EXACT)
                           or (budget is not None and not run.deterministic)):
        # the first run's tier (``tilemem.jit``): the plan weighs each move by its seconds
        # and the budget (from the run's start), so as Python it would choose other moves.
        # What the set-up derives from the report alone (cached on it) is made first, as
        # Python: the run then finds it, as a compiled run finds it within milliseconds
        if method in (Method.AUTO, Method.EXACT):
            _report_intervals(report)
            tensor_keys(report)
        with compiled():
            return allocate(report, method=method, tiles=tiles, budget=budget, policy=policy,
                            run=run)
    began = time.perf_counter()
    packing = _Packing(report, method=method, tiles=tiles, budget=budget, policy=policy,
                       run=run)
    ex = run.executor
    if ex is None:
        params = run.solver or DEFAULT_PARAMS
        shared = _Shared(report, run.rules, params)
        file = _shared_file(report, run)
        state = shared if file is None else ReportFile.of(file, extra=(run.rules, params))
        # on Dask, each IPU's tasks go to the same workers, which build only its shard
        ex = make_executor(run.scheduler, state, workers=run.workers, setup=_ready_to_pack,
                           echo=run.echo, groups=packing.ipus, group_of=task_ipu(report.target),
                           fallback=None if run.shared_file else shared)
    with ex, _Progress(run.progress) as bar:
        packing.start(ex, bar, run.scheduler)
        packing.set_up = time.perf_counter() - began
        # the plan: each pass takes the tiles not finished with (``Scoreboard``)
        packing.bounds()              # every tile's maximum live bytes
        if packing.searching:
            packing.plan()            # auto: visits, then slices by the plan's rule
        else:
            packing.first_pass()      # replay or the heuristic
            if not packing.last:
                packing.fit_stage()   # exact where a tile overflows although its bound fits
                packing.exact_rest()  # the exact portfolio on every other tile not finished
    alloc = packing.allocation(time.perf_counter() - began)
    if run.verify:
        _verify(report, alloc, run.rules)
    return alloc


def _shared_file(report: Report, run: RunOptions):
    """The report's file (``ReportSource``) the Dask workers open themselves, or None (they
    receive the report): by ``run.shared_file``, only on Dask."""
    if run.scheduler is None or run.shared_file is False:
        return None
    file = report.file
    if run.shared_file and file is None:
        from ...errors import ReportError

        raise ReportError("the workers cannot open the report's file: this report was not "
                          "read from one (or was changed since)", field="--shared-report")
    return file if file is not None and (run.shared_file or file.format == "capnp") else None


class _Packing:
    """One run of ``allocate``: its settings, the tiles' problems (identical tiles grouped),
    their bounds, the ``Scoreboard``, and a method a pass."""

    def __init__(self, report: Report, *, method, tiles, budget, policy: Policy,
                 run: RunOptions):
        self.report, self.method, self.policy = report, method, policy
        self.time_limit, self.seed = policy.time_limit, run.seed
        self.deterministic, self.goal = run.deterministic, run.goal
        tiles = (report.tiles_in_use() if tiles is None
                 else np.unique(np.asarray(tiles, np.int64)))
        self.deadline = None if run.deterministic else deadline_after(budget)
        # what every run compiles (first fit, the guard, the bounds), before the workers fork
        # (they inherit it); the search's versions when a tile first searches (``compiled``)
        ready("problem", "pack")
        self.groups = _group_identical(report, tiles, run.rules)
        if method in (Method.AUTO, Method.EXACT):
            # once, before the workers fork (they inherit them): the interval model the
            # search reads sections off, the tensor keys ``carry_over`` matches twins by
            _report_intervals(report)
            tensor_keys(report)
        self.reps = list(self.groups)
        # the IPUs of the tiles; on a cluster each task holds one IPU's tiles (a worker then
        # reads one IPU's shard, ``cluster.ReportFile``)
        self.ipu = dict(zip(tiles.tolist(), report.target.ipu_of(tiles).tolist())).__getitem__
        self.ipus = sorted(set(map(self.ipu, tiles.tolist())))
        self.by_ipu = run.scheduler is not None and len(self.ipus) > 1
        # a tile's place among them, in tile order
        self.place = {t: i for i, t in enumerate(self.reps)}
        self.known = {int(t): TileBound.of(v) for t, v in (run.bounds or {}).items()}
        self.tm = report.target.tile_memory
        self.searching = (method == Method.AUTO and policy.quick > 0 and not run.deterministic)
        self.fit_goal = self.searching and run.goal == Goal.FIT
        self.last = method in (Method.REPLAY, Method.HEURISTIC)
        # when a tile is finished: under the plan its question, else the method's passes
        # (``scoreboard.finished``, the one place this is decided)
        self.board = Scoreboard(Question(Goal(run.goal), policy.settle, Method(method),
                                         planned=self.searching), self.tm, run.journal,
                                self.groups)
        self.todo: list[int] = []
        #: representatives the budget did not reach: they keep the report's offsets (of
        #: them, those that decide whether the program fits, ``deciding``)
        self.kept_report: list[int] = []
        self.kept_deciding: list[int] = []
        #: every tile of the kept groups: its result at the report's offsets
        self.kept_results: dict[int, Any] = {}
        self.planner: Planner | None = None
        self.cp_workers = 1
        #: seconds from the run's start to its first pass (grouping the tiles, the shared
        #: tables, the workers started)
        self.set_up = 0.0

    def start(self, ex, bar, scheduler) -> None:
        """The pool the passes run on, and its progress bar."""
        self.ex, self.bar, self.scheduler = ex, bar, scheduler
        self.w = _workers_of(ex)

    def bounds(self) -> None:
        """Maximum live bytes, in chunks of tiles (one compiled pass per chunk)."""
        missing = [t for t in self.reps if t not in self.known and not self.board.is_final(t)]
        if missing:
            # compiled here, the workers load it (a caller that knows every bound, as
            # ``oom``'s re-pack, compiles none)
            ready("bounds")
            k = 1 if len(missing) < 64 else max(1, self.w) * 4
            parts = [missing]
            if self.by_ipu:   # one IPU's tiles a chunk, each in the order of ``missing``
                m = np.asarray(missing, np.int64)
                of = self.report.target.ipu_of(m)
                parts = [m[of == i].tolist() for i in self.ipus]
            k = max(1, k // len(parts))
            chunks = [p[i::k] for p in parts for i in range(k) if p[i::k]]
            # the bounds' clique searches take a default slice at most in all: a longer
            # ``time_limit`` is for the packers' slices
            tl = min(self.time_limit, DEFAULTS.time_limit) / len(chunks)
            for _, part in self.bar.run(self.ex, _bounds, [BoundsTask(c, tl) for c in chunks],
                                        "maximum live bytes"):
                self.known.update(part)

    # ---- auto: the plan ------------------------------------------------------------------
    def plan(self) -> None:
        """Every tile visited, then slices by the plan's rule until every tile is finished
        or the budget is spent (``tilemem.pack.run.plan``): the planner decides each next task
        when a worker frees up, with every result before it in."""
        board, p = self.board, self.policy
        todo = [t for t in self.reps if not board.is_final(t)]
        runs = _runs(todo, self.place, p.reach, p.chain)
        if self.by_ipu:   # a run within one IPU (a task reads one IPU's shard)
            runs = [[t for t in r if self.ipu(t) == i] for r in runs
                    for i in dict.fromkeys(map(self.ipu, r))]
        if self.deadline is not None:
            # in an order that mixes the program's parts (the tiles of a layer, alike in how
            # hard they are, sit side by side): what the visits learn as they go (a task's
            # set-up, what the revisits will ask) then holds for the tiles left
            runs = [runs[k] for k in np.random.default_rng(self.seed).permutation(len(runs))]
        # where the budget cannot reach every tile, the runs of the tiles that decide whether
        # the program fits are visited first (in the same mixed order)
        deciding = self.deciding(todo)
        runs = ([r for r in runs if any(t in deciding for t in r)]
                + [r for r in runs if not any(t in deciding for t in r)])
        planner = self.planner = Planner(
            todo, runs, workers=self.w, deadline=self.deadline, tile_memory=self.tm,
            goal=self.goal, policy=p, board=board,
            neighbours={t: self.near(t) for t in todo},
            # capacity first: their bound within 2 % under tileMemory
            near_capacity={t for t in todo
                           if self.tm >= self.known[t][0] and self.near_or_above(t)})
        for t in todo:
            if t in board.done:
                self._tell(t)
        self.cp_workers = (max(1, cores() // self.w) if self.scheduler is None else 1)
        sent: dict[int, tuple[Order, list[float], float]] = {}

        def next_task():
            now = time.time()
            order = planner.next(now)
            if order is None:
                return None
            planner.started(order, now)
            task = self._task(order)
            gaps = [board.result(t).gap if t in board.done else 0.0 for t in order.tiles]
            sent[id(task)] = (order, gaps, now)
            return task

        for task, out in self.bar.stream(self.ex, _solve_run, next_task, self._label,
                                         total=len(todo), deadline=self.deadline):
            order, gaps, began = sent.pop(id(task))
            for t, res, off in out:
                if not res.spent or order.move == Move.VISIT:
                    board.record(t, res, off)
                self._tell(t)
            planner.finished_order(order, gaps, time.time() - began, out.setups)
        # the budget ran out before their visits: the report's offsets, as they were (no
        # copy of them held: ``allocation`` keeps the column's; not journalled: nothing was
        # done that a resumed run should not redo)
        self.kept_report = [t for t in todo if t not in board.done]
        # every member of a kept group keeps its own offsets, so each its own result
        members = [int(m) for t in self.kept_report for m in self.groups[t]]
        bounds = {m: self.known[t] for t in self.kept_report for m in self.groups[t]}
        self.kept_results = {res.tile: res
                             for res in _as_reported(self.report, members, bounds)}
        for t in self.kept_report:
            board.record(t, self.kept_results[t], None, journaled=False)
        self.kept_deciding = [t for t in self.kept_report if t in deciding]

    def deciding(self, tiles: list[int]) -> set[int]:
        """Of ``tiles``, those that decide whether the program fits: out of memory with the
        report's own offsets, or with a bound within ``2 * NEAR`` of tileMemory (under or
        above it). The others fit whatever their allocation, with room to spare."""
        r = self.report
        m = np.flatnonzero(r.allocated)
        # the report's own offsets by the one definition of overflow (``rules``)
        over = overflow_bytes(r.tile[m], r.offset[m], r.size[m], self.tm, r.num_tiles)
        return {t for t in tiles if over[t] > 0 or self.near_or_above(t)}

    def near_or_above(self, t: int) -> bool:
        """Tile ``t``'s bound within ``2 * NEAR`` under tileMemory, or above it."""
        return self.known[t][0] > self.tm / (1 + 2 * NEAR)

    def _label(self, task) -> str:
        """The pass a task counts in (``Allocation.passes``: where the time went)."""
        first = task.tasks[0]
        if first.prev is None:
            return "visits: the heuristic, then the quick search"
        return {Pass.CARRY: "revisits: carry", Pass.QUICK: "revisits: quick search",
                Pass.AUTO: "revisits: exact", Pass.FIT: "revisits: until it fits"}.get(
                    first.method, f"revisits: {first.method}")

    def _tell(self, t: int) -> None:
        # the planner reads the tile's record on the scoreboard (which asked ``finished``
        # when it recorded it)
        self.planner.update(t)

    def _task(self, order: Order) -> RunTask:
        """The worker's task of an order: its tiles with their allocations so far and their
        better neighbours'."""
        board, known, tm = self.board, self.known, self.tm
        stop_end = (lambda t: _fit_end(known[t], tm) if self.fit_goal else None)
        if order.move == Move.VISIT:
            how = Pass.QUICK if self.deadline is not None else Pass.NEAR
            each = order.each or [order.seconds] * len(order.tiles)
            # each tile carries over its predecessor's allocation, and a run's first and
            # last tiles their neighbours' in the runs beside it (those visited already)
            last = len(order.tiles) - 1
            return RunTask([TileTask(t, how, None, None, known[t], x, self.seed,
                                     stop_gap=order.stop_gap, stop_end=stop_end(t),
                                     donors=self.donors(t) if k in (0, last) else ())
                            for k, (t, x) in enumerate(zip(order.tiles, each))],
                           order.until, order.setup, hold=order.paced)
        t = order.tiles[0]
        how, seed = {Move.CARRY: (Pass.CARRY, self.seed),
                     Move.QUICK: (Pass.QUICK, self.seed + 1),
                     Move.EXACT: (Pass.AUTO, self.seed),
                     Move.FIT: (Pass.FIT, self.seed)}[order.move]
        return RunTask([TileTask(t, how, board.offsets(t), board.result(t), known[t],
                                 order.seconds, seed + 3 * order.attempt, self.cp_workers,
                                 donors=self.donors(t), stop_gap=order.stop_gap,
                                 stop_end=stop_end(t) if how == Pass.QUICK else None)])

    def donors(self, t: int) -> tuple[tuple[int, np.ndarray], ...]:
        """The allocations of the neighbours (up to ``Policy.reach`` tiles away in tile
        order) that did better than tile ``t`` (before its visit, every visited one), best
        first, at most ``Policy.reach`` of them: to carry over (``tilemem.pack.carry``).
        None with ``deterministic``: which results the neighbours have when a task is made
        depends on what finished first, and a resumed run (its finished tiles at their final
        results) would differ from the uninterrupted one."""
        if self.deterministic or self.method not in (Method.AUTO, Method.EXACT):
            return ()
        done = self.board.done
        own = _standing(done[t][0]) if t in done else (True, float("inf"))
        better = sorted((_standing(done[d][0]), d) for d in self.near(t)
                        if d in done and _standing(done[d][0]) < own)
        return tuple((d, done[d][1]) for _, d in better[:self.policy.reach])

    def near(self, t: int) -> list[int]:
        """The tiles up to ``Policy.reach`` places from ``t`` in tile order."""
        reps, reach, i = self.reps, self.policy.reach, self.place[t]
        return [reps[j] for j in range(i - reach, i + reach + 1) if 0 <= j < len(reps) and j != i]

    # ---- the other methods -----------------------------------------------------------------
    def first_pass(self) -> None:
        """Replay or the heuristic on every distinct problem not yet done."""
        how = Pass.REPLAY if self.method == Method.REPLAY else Pass.HEURISTIC
        todo = [t for t in self.reps if t not in self.board.done]
        tasks = [TileTask(t, how, None, None, self.known[t], self.time_limit, self.seed,
                          deterministic=self.deterministic) for t in todo]
        for _, out in self.bar.run(self.ex, _solve_run, _cut(tasks, [1] * len(tasks)),
                                   str(how)):
            for t, res, off in out:
                self.board.record(t, res, off, how)
        board = self.board
        self.todo = [t for t in self.reps if not board.is_final(t)]
        self.todo.sort(key=lambda t: _exact_priority(board.result(t), self.tm) + (t,))
        # CP-SAT's threads: the cores over the tasks at once; deterministic: one whatever the
        # machine, so a run repeats on any number of cores and on a cluster
        n = max(1, min(self.w, len(self.todo)))
        self.cp_workers = (max(1, cores() // n)
                           if self.scheduler is None and not self.deterministic else 1)

    def exact(self, tiles: list[int], how: Pass) -> None:
        """The exact portfolio (``how``) on ``tiles``, a task a tile, until the deadline."""
        board = self.board
        tasks = [TileTask(t, how, board.offsets(t), board.result(t), self.known[t],
                          self.time_limit, self.seed, self.cp_workers, self.deterministic,
                          donors=self.donors(t)) for t in tiles]
        for _, out in self.bar.run(self.ex, _solve_run, _cut(tasks, [1] * len(tasks)),
                                   "exact", deadline=self.deadline):
            for t, res, off in out:
                # "fit" stops once the tile fits: it goes on to the exact portfolio after
                board.record(t, res, off, how)

    def fit_stage(self) -> None:
        """Exact where a tile overflows although its bound fits (would a better allocation
        fit? what a user with an out-of-memory tile asks): under auto only until it fits."""
        may_fit = {t for t in self.todo if _may_fit(self.board.result(t), self.tm)}
        self.exact([t for t in self.todo if not self.board.is_final(t) and t in may_fit],
                   Pass.FIT if self.method == Method.AUTO else Pass(self.method))

    def exact_rest(self) -> None:
        """The exact portfolio on the rest, the tiles that may fit first, then the largest
        gap first, while the budget lasts."""
        self.exact([t for t in self.todo if not self.board.is_final(t)], Pass(self.method))

    # ---- the result ------------------------------------------------------------------------
    def allocation(self, seconds: float) -> Allocation:
        """The offsets of every tile (identical tiles share their representative's) and a
        ``TileResult`` each; what the budget left undone; whether the run ended early;
        ``seconds``: the run's, from its set-up to its last result."""
        report, groups, board = self.report, self.groups, self.board
        offsets = report.offset.copy()
        results = []
        for rep, members in groups.items():
            res, off = board.done[rep]
            for t in members:
                rows = report.tile_rows(int(t))
                if off is None:   # the report's own, kept: the tile's own result
                    results.append(self.kept_results[int(t)])
                    continue
                offsets[rows] = off
                r = res if t == rep else replace(res, tile=int(t), seconds=0.0,
                                                  note=f"same problem as tile {rep}")
                if self.method == Method.REPLAY:
                    r = replace(r, placed_as_report=int(np.sum(off == report.offset[rows])))
                results.append(r)
            # the tile's offsets are in the column now: not held twice (a Pod's worth)
            board.done[rep] = (res, None)
            if rep in board.final:
                board.final[rep] = board.done[rep]
        results.sort(key=lambda r: r.tile)
        # tiles not finished that no revisit reached (the budget went to others first)
        left = (self.planner.unreached() if self.planner is not None
                else [t for t in groups if board.result(t).spent])
        # (those not visited at all keep the report's offsets: ``kept_report``)
        kept = set(self.kept_report)
        left = [t for t in left if not board.is_final(t) and t not in kept]
        unreached = sum(len(groups[t]) for t in left)
        unreached_far = sum(len(groups[t]) for t in left if board.result(t).gap > NEAR)
        # of them, those no search reached either: they keep the heuristic's allocation
        unsearched = sum(len(groups[t]) for t in left if board.result(t).method in (
            Stage.HEURISTIC, Stage.REPLAY))
        # ended before the budget because every tile's question is answered (not merely
        # because every slice had run)
        ended_early = None
        if self.searching and self.deadline is not None and board.all_final(self.reps):
            remaining = self.deadline - time.time()
            ended_early = round(remaining, 1) if remaining > 1.0 else None
        return Allocation(offsets, results, from_journal=len(board.resumed),
                          unreached=unreached, unreached_far=unreached_far,
                          unsearched=unsearched,
                          kept_report=sum(len(groups[t]) for t in self.kept_report),
                          kept_report_deciding=sum(len(groups[t]) for t in self.kept_deciding),
                          passes=self.bar.passes, set_up=round(self.set_up, 3),
                          run_seconds=round(seconds, 3),
                          ended_early=ended_early, goal=Goal(self.goal),
                          settle=(self.policy.settle if self.searching and self.goal == Goal.END
                                  else None))
