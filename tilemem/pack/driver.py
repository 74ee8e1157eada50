"""Re-run the allocation of a report's tiles (the driver): ``allocate``.

``allocate`` packs every chosen tile and returns the new offset column with one
``TileResult`` per tile. Methods:

- ``replay``: first fit in the report's ``allocationOrderByTile`` order (Poplar-like); counts
  how many variables land on the report's own offsets.
- ``heuristic``: the best of a few greedy orders (``tilemem.pack.heuristic``), never worse
  than replay (the replay order is one of its candidates).
- ``auto`` (default): the heuristic everywhere, then the exact portfolio
  (``tilemem.pack.portfolio``) on the tiles where it overflows or stays above the lower bound.
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
import os
import pickle
import queue
import traceback
from dataclasses import dataclass, replace

import numpy as np

from ..check import check_allocation
from ..model import Report
from ..rules import DEFAULT_RULES, Rules
from ..model.target import Target
from . import search
from .bounds import tile_bounds
from .firstfit import first_fit
from .guard import self_check
from .portfolio import solve_tile
from .problem import TileProblem
from .result import Allocation

METHODS = ("auto", "exact", "heuristic", "replay")


def allocate(report: Report, *, method: str = "auto", tiles=None, time_limit: float = 10.0,
             workers: int | None = None, seed: int = 0, rules: Rules = DEFAULT_RULES,
             progress: bool = False, deterministic: bool = False, verify: bool = False,
             bounds: dict[int, tuple[int, bool]] | None = None) -> Allocation:
    """Pack ``tiles`` (default: every tile in use) of ``report`` with ``method``.

    ``time_limit``: seconds per tile for the exact part. ``workers``: processes (default all
    cores). ``deterministic``: CP-SAT and the local search stop on work done rather than on
    the clock (repeatable whatever the load; the compiled search stays clock-bounded).
    ``verify``: run ``tilemem.check`` on the result and raise if it finds a violation.
    ``bounds``: precomputed ``{tile: (maximum live bytes, exact)}`` (as ``tile_bounds``
    gives), used instead of computing them again; tiles missing from it are computed.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    tiles = (report.tiles_in_use() if tiles is None
             else np.unique(np.asarray(tiles, np.int64)))
    workers = _cores() if workers is None else max(1, int(workers))
    _warm_up()
    groups = _group_identical(report, tiles, rules)
    reps = list(groups)
    known = {int(t): (int(b), bool(e)) for t, (b, e) in (bounds or {}).items()}
    with _Pool(_Shared(report, rules), workers, len(reps), progress) as run:
        # pass 0: maximum live bytes, in chunks of tiles (one compiled pass per chunk)
        missing = [t for t in reps if t not in known]
        if missing:
            known.update(run.bounds(missing, time_limit=min(time_limit, 10.0)))
        # pass 1: replay or heuristic on every distinct problem
        first_pass = "replay" if method == "replay" else "heuristic"
        done = run.solve([(t, first_pass, None, known[t], time_limit, seed, 1, deterministic)
                          for t in reps], first_pass)
        if method in ("auto", "exact"):
            todo = [t for t in reps if method == "exact" or done[t][0].status != "optimal"]
            if todo:
                cp_workers = max(1, _cores() // min(workers, len(todo)))
                more = run.solve([(t, method, done[t][1], known[t], time_limit, seed,
                                   cp_workers, deterministic) for t in todo], "exact")
                for t, (res, off) in more.items():
                    prev = done[t][0]
                    done[t] = (replace(res, seconds=res.seconds + prev.seconds), off)
    offsets = report.offset.copy()
    results = []
    for rep, members in groups.items():
        res, off = done[rep]
        for t in members:
            rows = report.tile_rows(int(t))
            offsets[rows] = off
            r = res if t == rep else replace(res, tile=int(t), seconds=0.0,
                                              note=f"same problem as tile {rep}")
            if method == "replay":
                r = replace(r, placed_as_report=int(np.sum(off == report.offset[rows])))
            results.append(r)
    results.sort(key=lambda r: r.tile)
    alloc = Allocation(offsets, results)
    if verify:
        _verify(report, alloc, rules)
    return alloc


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


# ---- the tasks and the worker pool ----------------------------------------------------------
@dataclass(frozen=True)
class _Shared:
    """What every task reads: the report and the rules. Forked workers inherit it at the fork
    (as an argument of their loop), so it is never pickled."""

    report: Report
    rules: Rules


def _solve(shared: _Shared, task: tuple):
    """Task: solve one tile, ``(tile, (TileResult, local offsets))``."""
    tile, method, hint, bound, time_limit, seed, cp_workers, deterministic = task
    p = TileProblem.from_report(shared.report, tile, shared.rules)
    return tile, solve_tile(p, method, hint=hint,
                            replay_order=_replay_order(shared.report, tile, p.rows),
                            time_limit=time_limit, seed=seed, cp_workers=cp_workers,
                            deterministic=deterministic, bound=bound)


def _bounds(shared: _Shared, task: tuple) -> dict[int, tuple[int, bool]]:
    """Task: ``tile_bounds`` of a chunk of tiles."""
    tiles, time_limit = task
    return tile_bounds(shared.report, tiles, time_limit)


def _serve(shared: _Shared, inbox, outbox) -> None:
    """A worker process's loop: ``(i, fn, arg)`` from ``inbox`` -> ``(i, ok, fn(shared, arg)
    or the exception)`` to ``outbox``, until ``None``."""
    while True:
        item = inbox.get()
        if item is None:
            return
        i, fn, arg = item
        try:
            out = (i, True, fn(shared, arg))
        except Exception as e:  # sent back and raised in the parent, with this traceback
            e.add_note("in a packing worker:\n" + traceback.format_exc())
            try:
                pickle.dumps(e)
            except Exception:
                e = RuntimeError(f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
            out = (i, False, e)
        outbox.put(out)


class _Pool:
    """Runs tasks ``fn(shared, arg)`` in-process (one worker) or in forked worker processes
    (``_serve``), with a progress bar."""

    def __init__(self, shared: _Shared, workers: int, num_tasks: int, progress: bool):
        self.shared = shared
        self.workers = workers if num_tasks > 1 else 1
        self.procs: list = []
        self.progress = None
        self.show = progress

    def __enter__(self):
        if self.workers > 1:
            import multiprocessing

            ctx = multiprocessing.get_context("fork")
            self.inbox, self.outbox = ctx.Queue(), ctx.Queue()
            # fork every worker now, before the progress bar's thread exists
            self.procs = [ctx.Process(target=_serve, args=(self.shared, self.inbox, self.outbox),
                                      daemon=True) for _ in range(self.workers)]
            for p in self.procs:
                p.start()
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

    def _map(self, fn, args: list, label: str):
        """``fn(shared, arg)`` of every ``arg`` as they complete, advancing a progress bar."""
        bar = (self.progress.add_task(label, total=len(args))
               if self.progress is not None else None)
        if not self.procs or len(args) <= 1:
            results = (fn(self.shared, a) for a in args)
        else:
            for i, a in enumerate(args):
                self.inbox.put((i, fn, a))
            results = (self._next() for _ in args)
        for res in results:
            if bar is not None:
                self.progress.advance(bar)
            yield res

    def _next(self):
        while True:
            try:
                _, ok, out = self.outbox.get(timeout=1.0)
            except queue.Empty:
                dead = [p for p in self.procs if not p.is_alive()]
                if dead:
                    raise RuntimeError(f"a packing worker process died (exit code "
                                       f"{dead[0].exitcode}; out of memory?)") from None
                continue
            if not ok:
                raise out
            return out

    def solve(self, tasks: list[tuple], label: str) -> dict:
        """``_solve`` of every task: ``tile -> (TileResult, local offsets)``."""
        return dict(self._map(_solve, tasks, label))

    def bounds(self, tiles: list[int], time_limit: float) -> dict[int, tuple[int, bool]]:
        """``tile_bounds`` of ``tiles`` (one compiled pass per chunk of tiles), in parallel."""
        k = 1 if not self.procs or len(tiles) < 64 else self.workers * 4
        chunks = [tiles[i::k] for i in range(k) if tiles[i::k]]
        out = {}
        for part in self._map(_bounds, [(c, time_limit / len(chunks)) for c in chunks],
                              "maximum live bytes"):
            out.update(part)
        return out

    def __exit__(self, exc_type, *exc):
        if self.progress is not None:
            self.progress.stop()
        if self.procs:
            if exc_type is None:
                for _ in self.procs:
                    self.inbox.put(None)
            else:  # stop at once; what is queued is dropped
                self.inbox.cancel_join_thread()
                for p in self.procs:
                    p.terminate()
            for p in self.procs:
                p.join()
            self.inbox.close()
            self.outbox.close()


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


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
