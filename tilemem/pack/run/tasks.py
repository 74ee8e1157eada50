"""The tasks of a packing run, as a worker runs them: one tile (``TileTask``, ``_solve``), a
run of neighbouring tiles each carried over to the next (``RunTask``, ``_solve_run``), a chunk
of tiles' bounds (``BoundsTask``); what every task reads (``_Shared``), the tiles' replay
orders and identical problems, the progress bar and the final check.
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from dataclasses import replace as replace_task

from msgspec.structs import replace

import numpy as np

from ...check import check_allocation
from ...liveness import class_intervals
from ...model.interference import prunes
from ...model import Report
from ...model.target import Target
from ...rules import Rules
from ..bounds import TileBound, tile_bounds
from ..carry import carry_over
from ..workers.cluster import LocalPool, ReportFile, remaining
from ..params import DEFAULT_PARAMS, SolverParams
from ..portfolio import solve_tile
from ..quick import NEAR
from ..problem import TileProblem
from ...rules import overflow_bytes
from ..proof import fit_verdict
from .schedule import _standing
from ..kinds import Pass, Stage, Status
from ..result import Allocation, PassTime, TileResult, gap_of, joined_note, objective

#: The passes that run the compiled search (on a previous result, within the run's budget).
_SEARCHED = (Pass.AUTO, Pass.EXACT, Pass.QUICK, Pass.NEAR, Pass.FIT)
#: What a result the run's budget stopped says to people (``TileResult.spent`` to code).
SPENT_NOTE = "run budget spent before this slice"


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
    groups: dict = {}
    # tiles with equal problems have equal sums of their columns: a tile whose sums no other
    # tile has is alone, without its digest (most tiles of a Pod's report: a third of its
    # set-up went to digests)
    sums = _tile_sums(r, tiles)
    _, inv, counts = np.unique(sums, axis=0, return_inverse=True, return_counts=True)
    alone = counts[inv.reshape(-1)] == 1
    for t, single in zip(tiles.tolist(), alone.tolist()):
        if single:
            groups[("alone", t)] = [t]
            continue
        rows = r.tile_rows(t)
        flags = np.stack([r.always_live[rows], r.executable[rows], r.vertex_code[rows],
                          r.lowest_256kb[rows], r.in_interleaved_mem[rows]],
                         axis=1).astype(np.uint8)
        h = hashlib.blake2b(digest_size=16)
        for a in (r.size[rows], r.alignment[rows], r.eq_class[rows], flags,
                  _local_pair_key(r.element_constraints, rows),
                  _local_pair_key(r.region_constraints, rows), _replay_order(r, t, rows)):
            a = np.ascontiguousarray(a)
            h.update(str(a.shape).encode())
            h.update(a.tobytes())
        groups.setdefault(h.digest(), []).append(t)
    return {members[0]: members for members in groups.values()}


def _tile_sums(r: Report, tiles: np.ndarray) -> np.ndarray:
    """Per tile of ``tiles``: its allocated rows' count and the sums of their sizes,
    alignments, classes and flags (``(len(tiles), 5)``), equal for tiles with equal
    columns."""
    # (every row, as a slice, where every row is allocated: no copy of a Pod's columns)
    m = slice(None) if bool(r.allocated.all()) else np.flatnonzero(r.allocated)
    tile = r.tile[m]
    flags = (r.always_live[m].astype(np.int64) + 2 * r.executable[m] + 4 * r.vertex_code[m]
             + 8 * r.lowest_256kb[m] + 16 * r.in_interleaved_mem[m])
    n = r.num_tiles
    cols = [np.bincount(tile, minlength=n)] + [
        np.bincount(tile, weights=np.asarray(c, np.float64), minlength=n)
        for c in (r.size[m], r.alignment[m], r.eq_class[m], flags)]
    return np.stack(cols, axis=1).astype(np.int64)[tiles]


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
    """What every task reads: the report, the rules and the solvers' parameters. Forked pool
    workers inherit it at the fork; Dask workers receive it once (or open a ``ReportFile``
    themselves, its ``extra`` the rules and the parameters)."""

    report: Report
    rules: Rules
    params: SolverParams = DEFAULT_PARAMS


def _state(shared, tile: int | None = None) -> tuple[Report, Rules]:
    """The report a task reads and the rules: for a ``ReportFile`` (a Dask worker that opens
    the report itself), the shard of ``tile``'s IPU (built once, ``ReportFile.shard``);
    else the whole report, as forked or scattered."""
    if isinstance(shared, ReportFile):
        if tile is None:
            return shared.load(), shared.extra[0]
        return shared.shard(shared.ipu_of(tile)), shared.extra[0]
    return shared.report, shared.rules


def _params(shared) -> SolverParams:
    """The solvers' parameters the run was given (``RunOptions.solver``)."""
    return shared.extra[1] if isinstance(shared, ReportFile) else shared.params


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
    #: the run ends by then (a clock time): each tile gets at most its planned seconds, less
    #: in proportion when what is left of the run (less the set-up the run has measured on
    #: its tiles so far, ``setup`` until it has) falls short of them
    until: float | None = None
    setup: float = 0.0
    #: a tile that searches its whole time without reaching its stop gap holds the next
    #: tiles' stop at the gap it reached (paced visits: ``_solve_run``)
    hold: bool = False


def _cut(tasks: list["TileTask"], lengths: list[int]) -> list["RunTask"]:
    """``tasks``, in their order, as consecutive runs of the given ``lengths``."""
    ends = np.cumsum(lengths).tolist()
    return [RunTask(tasks[a:b]) for a, b in zip([0] + ends[:-1], ends)]

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
    time_limit = task.time_limit
    searched = method in _SEARCHED
    if searched:
        # a visit (no ``prev``) still places the tile by the heuristic when the
        # budget is spent; a later one keeps what the tile has
        time_limit = remaining(deadline, time_limit)
        if prev is not None and time_limit < 0.05:
            # seconds=0: this task took none (the caller adds the passes' seconds up)
            return tile, replace(prev, seconds=0.0, spent=True, note=(
                prev.note if prev.spent else joined_note(prev.note, SPENT_NOTE))), hint
    if method == Pass.CARRY and prev is not None and remaining(deadline, 1.0) <= 0.0:
        # the run's budget is spent: the sweep carries nothing more over (it would build
        # every tile's problem again past the budget)
        return tile, replace(prev, seconds=0.0), hint
    report, rules = _state(shared, tile)
    p = TileProblem.from_report(report, tile, rules,
                                _report_intervals(report) if searched else None)
    rows = p.rows
    carried = None
    failed: list[str] = []
    if searched or method == Pass.CARRY:
        # the best of the donors' allocations carried over (solve_tile takes it when it is
        # better than the tile's own)
        for d, d_off in task.donors:
            if isinstance(shared, ReportFile) and shared.ipu_of(d) != shared.ipu_of(tile):
                continue   # another IPU's tile: not in this shard (and another program stage)
            try:
                c = carry_over(report, d, d_off, p)
            except Exception as e:  # noqa: BLE001 - a failed carry costs that donor only
                failed.append(f"carry from tile {d} failed: {type(e).__name__}: {e}")
                continue
            if c is not None and (carried is None or objective(p, c) < objective(p, carried[1])):
                carried = (d, c)
    res, off = solve_tile(p, method, hint=hint, carried=carried,
                          replay_order=_replay_order(report, tile, rows),
                          time_limit=time_limit, seed=task.seed, cp_workers=task.cp_workers,
                          deterministic=task.deterministic, bound=task.bound,
                          given=None if method == Pass.REPLAY else report.offset[rows],
                          stop_gap=task.stop_gap, stop_end=task.stop_end,
                          params=_params(shared))
    if failed:
        res = replace(res, note=joined_note(res.note, *failed),
                      failed=tuple(dict.fromkeys(res.failed + ("carry",))))
    return tile, res, off


class RunOut(list):
    """What a run's task returns: ``[(tile, TileResult, local offsets), ...]``, and in
    ``setups`` the seconds each of its tiles that searched for all its time took besides its
    search (its problem, the heuristic, the search's arrays, the result)."""

    setups: list


def _solve_run(shared, run: RunTask, deadline: float | None, solve=None) -> RunOut:
    """Task: the tiles of a run in order (``solve`` each, default ``_solve``), each given its
    predecessor's allocation to carry over; with ``run.until``, each within its part of what
    is left of the run (its planned seconds, less when the run is behind); with
    ``run.hold``, each stopping no lower than the gap a tile before it stalled at.
    """
    solve = solve or _solve
    out = RunOut()
    out.setups = []
    # with ``run.hold``, the gap a tile before stalled at while none since has met its stop:
    # neighbours hold nearly the same variables and start from that tile's allocation
    # carried over, so a search that stalled on one mostly stalls on the next at the same
    # place, for its whole time. Held at most at 1 % (the gap users read off a map)
    held = None
    for k, task in enumerate(run.tasks):
        if out and task.method in _SEARCHED:
            task = replace_task(task, donors=((out[-1][0], out[-1][2]),) + task.donors)
        stop = task.stop_gap
        if held is not None and stop is not None:
            task = replace_task(task, stop_gap=max(stop, held))
        if run.until is not None:
            # the tiles left keep their planned seconds while the run is on time; behind
            # it, each gets its part of what is left in proportion to them
            setup = sum(out.setups) / len(out.setups) if out.setups else run.setup
            planned = sum(x.time_limit for x in run.tasks[k:])
            left = run.until - time.time() - (len(run.tasks) - k) * setup
            scale = min(max(left, 0.0) / planned, 1.0) if planned > 0 else 0.0
            task = replace_task(task, time_limit=task.time_limit * scale)
        started = time.time()
        out.append(solve(shared, task, deadline))
        res = out[-1][1]
        stalled = res.status != Status.OPTIMAL and (task.stop_gap is None
                                                    or res.gap > task.stop_gap)
        if stalled:
            out.setups.append(max(time.time() - started - task.time_limit, 0.0))
        if run.hold and stop is not None:
            if stalled:
                held = min(max(held or 0.0, res.gap), NEAR)
            elif res.gap <= stop:
                held = None
    if run.tasks and run.tasks[0].method in _SEARCHED and run.tasks[0].prev is None:
        _carry_back(shared, run, out, deadline, solve)
    return out


def _carry_back(shared, run: RunTask, out: RunOut, deadline: float | None,
                solve=None) -> None:
    """A visit run's way back: from its last tile but one to its first, each tile whose
    successor ended nearer its bound tries the successor's allocation carried over (no
    search), in place in ``out``. The way out carried each tile's allocation to the next,
    whose search then often ended lower than where it started: the tile before never saw
    that allocation, and a carry costs a small part of a search (the tile's problem, a
    first fit and the guard)."""
    for k in range(len(out) - 2, -1, -1):
        tile, res, off = out[k]
        after, after_res, after_off = out[k + 1]
        if _standing(after_res) >= _standing(res):
            continue
        task = replace_task(run.tasks[k], method=Pass.CARRY, hint=off, prev=res,
                            donors=((after, after_off),))
        _, got, got_off = (solve or _solve)(shared, task, deadline)
        if _standing(got) < _standing(res):
            out[k] = (tile, replace(got, seconds=res.seconds + got.seconds,
                                    note=joined_note(res.note, got.note)), got_off)


def _as_reported(report: Report, tiles: list[int], bounds: dict) -> list[TileResult]:
    """The ``TileResult`` of each of ``tiles`` left at the report's own offsets (no pass
    reached it before the budget ran out; ``bounds``: ``tile -> TileBound``): nothing
    built, their ends and overflow read off the columns a block of tiles at a time, so that
    a report of many tiles ends within its budget."""
    tm = report.target.tile_memory
    out = []
    step = 1024   # tiles whose rows are read at a time (a block's rows held, not a Pod's)
    for b0 in range(0, len(tiles), step):
        block = tiles[b0:b0 + step]
        parts = [report.tile_rows(t) for t in block]
        lengths = np.array([len(p) for p in parts], np.int64)
        rows = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        owner = np.repeat(np.arange(len(block)), lengths)
        off = report.offset[rows].astype(np.int64)
        end = off + report.size[rows].astype(np.int64)
        total = np.zeros(len(block), np.int64)
        np.maximum.at(total, owner, end)
        over = overflow_bytes(owner, off, end - off, tm, len(block))
        for k, t in enumerate(block):
            b = TileBound.of(bounds[t])
            out.append(TileResult(
                tile=int(t), method=Stage.REPORT, status=Status.REPORT,
                overflow_bytes=int(over[k]), total_including_gaps=int(total[k]),
                bound=int(b[0]), bound_exact=bool(b[1]), gap=gap_of(int(total[k]), int(b[0])),
                seconds=0.0, num_vars=int(lengths[k]), note=SPENT_NOTE, spent=True,
                verdict=fit_verdict(int(over[k]), int(b[0]), tm, None)))
    return out


def _report_intervals(report: Report) -> np.ndarray | None:
    """The report's interval model (``tilemem.liveness.class_intervals``, cached on the
    report) when it has several tiles in use: the search reads every tile's sections off it.
    A one-tile report recognises its own graph as before (the same work, done once anyway).

    Not on a report over several IPUs: its interference holds only the pairs of classes that
    share a tile (``tilemem.model.interference.prunes``), which drops the edges between
    classes live together on different tiles, so the whole graph is seldom an interval graph
    (on no generated one), while telling so is a pass over the Pod's graph, the longest part
    of a Pod's set-up. Each tile's search recognises its own graph, as wherever there is no
    model."""
    if len(report.tiles_in_use()) < 2 or prunes(report.target):
        return None
    return class_intervals(report)


def _bounds(shared, task: BoundsTask, deadline: float | None) -> dict[int, tuple[int, bool]]:
    """Task: ``tile_bounds`` of a chunk of tiles (each IPU's on its shard)."""
    if not isinstance(shared, ReportFile):
        return tile_bounds(shared.report, task.tiles, task.time_limit)
    by_ipu: dict[int, list[int]] = {}
    for t in task.tiles:
        by_ipu.setdefault(shared.ipu_of(t), []).append(t)
    out = {}
    for ipu, tiles in by_ipu.items():
        out.update(tile_bounds(shared.shard(ipu), tiles,
                               task.time_limit * len(tiles) / len(task.tiles)))
    return out


def task_ipu(target: Target):
    """The IPU of a task's (first) tile: the group ``DaskExecutor`` sends to the same
    workers (a ``RunTask`` and a ``BoundsTask`` of the driver's hold one IPU's tiles)."""
    def ipu(task) -> int | None:
        first = (task.tasks[0].tile if isinstance(task, RunTask) and task.tasks
                 else task.tiles[0] if isinstance(task, BoundsTask) and task.tiles else None)
        return None if first is None else int(target.ipu_of(first))
    return ipu


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

    def stream(self, ex, fn, next_task, label, *, total: int, deadline: float | None = None):
        """``ex.stream`` of the tasks ``next_task()`` gives, a bar a pass ``label(task)``
        names (the first ``total`` results advance the first), each pass's seconds and tasks
        kept in ``passes``."""
        bars: dict[str, list] = {}   # label -> [bar, first started, last finished, tasks]
        t0 = time.perf_counter()
        for task, out in ex.stream(fn, next_task, deadline=deadline):
            name = label(task)
            now = time.perf_counter()
            if name not in bars:
                bar = (self.progress.add_task(name, total=total if not bars else None)
                       if self.progress is not None else None)
                bars[name] = [bar, t0 if not bars else now, now, 0]
            entry = bars[name]
            entry[2], entry[3] = now, entry[3] + 1
            if entry[0] is not None:
                self.progress.advance(entry[0], len(getattr(task, "tasks", [task])))
            yield task, out
        for name, (_, first, last, count) in bars.items():
            self.passes.append(PassTime(name, round(last - first, 3), count))

    def __exit__(self, *exc) -> None:
        if self.progress is not None:
            self.progress.stop()


def _verify(report: Report, alloc: Allocation, rules: Rules) -> None:
    res = check_allocation(report, alloc.offsets, rules=rules)
    if not res.ok:
        raise AssertionError(f"allocation failed the checker: {res.violations[:3]}")
