"""Re-run the allocation of a report's tiles: replay, heuristic, exact (the driver).

``allocate`` packs every chosen tile and returns the new offset column with one
``TileResult`` per tile. Methods:

- ``replay``: first fit in the report's ``allocationOrderByTile`` order (Poplar-like); counts
  how many variables land on the report's own offsets.
- ``heuristic``: the best of a few greedy orders (``tilemem.pack.heuristic``), never worse
  than replay (the replay order is one of its candidates).
- ``auto`` (default): the heuristic everywhere, then the exact portfolio on the tiles where it
  overflows or stays above the lower bound.
- ``exact``: the exact portfolio on every tile (it also lowers the regions' high-water marks,
  the objective's last criterion).

The exact portfolio (``_exact``), within the per-tile time limit: the compiled search
(``tilemem.pack.search.solve_search``, which decides whether everything fits below a given
address) when it is installed, to settle whether the tile fits and then to bisect on the end
address; a local search over placement orders (``heuristic.improve``); CP-SAT
(``tilemem.pack.cpsat``) with the best allocation so far as its complete hint. A tile's result
is "optimal" when proven (CP-SAT's proof, the search's bisection closed, or the lower bound
met with nothing overflowed), "feasible" when the time limit stopped the proof.

Every allocation a solver returns is re-checked here (``self_check``) before it is accepted;
a rejected one falls back to the heuristic's, which is valid by construction.

Tiles run in parallel in a process pool (forked, so workers share the report without
copying it); identical tiles (same columns, classes, constraints and replay order) are solved
once.

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

import os
import time
from dataclasses import replace

import numpy as np

from ..model import Report
from ..rules import DEFAULT_RULES, Rules
from .firstfit import first_fit
from .guard import self_check
from .heuristic import heuristic_runs
from .problem import TileProblem
from .result import Allocation, TileResult, gap_of, objective

METHODS = ("auto", "exact", "heuristic", "replay")

# Shared with forked workers: (report, rules). Set just before the pool starts.
_STATE: tuple | None = None


def allocate(report: Report, *, method: str = "auto", tiles=None, time_limit: float = 10.0,
             workers: int | None = None, seed: int = 0, rules: Rules = DEFAULT_RULES,
             progress: bool = False, deterministic: bool = False,
             verify: bool = False) -> Allocation:
    """Pack ``tiles`` (default: every tile in use) of ``report`` with ``method``.

    ``time_limit``: seconds per tile for the exact part. ``workers``: processes (default all
    cores). ``deterministic``: CP-SAT and the local search stop on work done rather than on
    the clock (repeatable whatever the load; the compiled search stays clock-bounded).
    ``verify``: run ``tilemem.check`` on the result and raise if it finds a violation.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    tiles = (report.tiles_in_use() if tiles is None
             else np.unique(np.asarray(tiles, np.int64)))
    workers = _cores() if workers is None else max(1, int(workers))
    global _STATE
    _STATE = (report, rules)
    _warm_up()
    groups = _group_identical(report, tiles, rules)
    reps = list(groups)
    with _Runner(workers, len(reps), progress) as run:
        # pass 0: maximum live bytes, in chunks of tiles (one compiled pass per chunk)
        bounds = run.bounds(reps, time_limit=min(time_limit, 10.0))
        # pass 1: replay or heuristic on every distinct problem
        first_pass = "replay" if method == "replay" else "heuristic"
        done = run([(t, first_pass, None, bounds[t], time_limit, seed, 1, deterministic)
                    for t in reps], f"{first_pass}")
        if method in ("auto", "exact"):
            todo = [t for t in reps if method == "exact" or done[t][0].status != "optimal"]
            if todo:
                cp_workers = max(1, _cores() // min(workers, len(todo)))
                more = run([(t, method, done[t][1], bounds[t], time_limit, seed, cp_workers,
                             deterministic) for t in todo], "exact")
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
        _verify(report, alloc, tiles, rules)
    return alloc


def solve_tile(p: TileProblem, method: str, *, hint: np.ndarray | None = None,
               replay_order: np.ndarray | None = None, time_limit: float = 10.0,
               seed: int = 0, cp_workers: int = 1, deterministic: bool = False,
               bound: tuple[int, bool] | None = None) -> tuple[TileResult, np.ndarray]:
    """Pack one tile problem; ``(result, local offsets)``.

    ``method``: "replay", "heuristic", "auto" or "exact" (the latter two run the exact
    portfolio from ``hint`` or from the heuristic). ``bound``: ``(bytes, exact)``, else
    computed from the problem alone.
    """
    t0 = time.perf_counter()
    b, b_exact = bound if bound is not None else simple_bound(p)
    # all three are valid lower bounds on the end address of an allocation that fits
    lower = max(int(b), window_bound(p), region_bound(p))
    note = ""
    ran_exact = False
    if method == "replay":
        off = first_fit(p, replay_order)
        status = "replay"
    else:
        if hint is None:
            extra = [replay_order] if replay_order is not None else []
            h = heuristic_runs(p, bound=lower, extra_orders=extra, seed=seed)
            hint, note = h.offsets, h.name
        off = hint
        status = "optimal" if _meets(p, off, lower) else "heuristic"
        if method in ("auto", "exact") and (method == "exact" or status != "optimal"):
            ran_exact = True
            off, status, note = _exact(p, off, lower, time_limit, seed, cp_workers, deterministic,
                                       polish=(method == "exact"))
    over, total, _, _ = objective(p, off)
    used = method if method in ("replay", "heuristic") else (
        "exact" if ran_exact else "heuristic")
    res = TileResult(tile=p.tile, method=used, status=status, overflow_bytes=over,
                     total_including_gaps=total, bound=lower, bound_exact=bool(b_exact),
                     gap=gap_of(total, lower), seconds=time.perf_counter() - t0,
                     num_vars=p.n, note=note)
    return res, off


def _meets(p: TileProblem, off: np.ndarray, bound: int) -> bool:
    over, total, _, _ = objective(p, off)
    return over == 0 and total <= bound


def _exact(p, hint, bound, time_limit, seed, cp_workers, deterministic, polish):
    """The exact portfolio from a valid ``hint``: ``(offsets, status, note)``.

    Within ``time_limit`` seconds, in turn:

    1. when the hint overflows, the compiled search (if installed) decides whether everything
       fits in memory (up to half the time);
    2. local search over placement orders (``heuristic.improve``; 40% of what is left): on big
       tiles it is what lowers the end address, where the exact methods rarely can in seconds;
    3. the search again, now minimising the end address: briefly C = the lower bound (before
       the local search: on exact fits this is the proof), then a bisection between the
       bound and the best end; an infeasible C raises the bound, a found allocation lowers
       the best; when the two meet the tile is proven optimal;
    4. CP-SAT for the rest, with the best allocation as its complete hint and the raised bound
       (always run with ``polish``, to lower the regions' high-water marks).
    """
    from .cpsat import solve_cpsat
    from .heuristic import HeuristicResult, improve

    t0 = time.perf_counter()
    tm = p.capacity
    best = hint
    lower = int(bound)
    notes = []
    proven = False
    search = _search_function() if p.n else None

    def probe(cap, until):
        nonlocal best
        budget = until - time.perf_counter()
        if budget <= 0.01:
            return "unknown"
        try:
            r = search(p, time_limit=budget, hint=best, capacity=int(cap))
        except Exception as e:  # a failing helper must not lose the tile
            first_line = (str(e).strip().splitlines() or [""])[0][:120]
            notes.append(f"search failed: {type(e).__name__}: {first_line}")
            return "unknown"
        if r.offsets is not None:
            cand = np.asarray(r.offsets, np.int64)
            if self_check(p, cand) and int((cand + p.size).max(initial=0)) <= cap:
                if objective(p, cand) < objective(p, best):
                    best = cand
                return "found"
            notes.append("search result rejected by self-check")
            return "unknown"
        return r.status

    def done():
        return _meets(p, best, lower) and not polish

    if search is not None and np.any(best >= tm) and lower <= tm and not done():
        verdict = probe(tm, t0 + 0.5 * time_limit)
        notes.append(f"search fit {verdict}")
    if search is not None and not np.any(best >= tm) and not done():
        # the bound itself first, briefly: on exact fits (MiniMalloc's instances) this is
        # the proof, and on the rest a short "unknown"
        verdict = probe(lower, time.perf_counter() + 0.2 * (time_limit -
                                                           (time.perf_counter() - t0)))
        if verdict == "infeasible":
            lower += 1
        notes.append(f"search at bound {verdict}")
    if not _meets(p, best, lower) and p.n > 1:
        share = 0.4 * (time_limit - (time.perf_counter() - t0))
        start = HeuristicResult(best, "hint", np.argsort(best, kind="stable"), False)
        # deterministic: a budget of moves from the configured limit, not the clock
        its = max(10, int(40 * time_limit)) if deterministic else None
        res, it = improve(p, start, time_limit=share * (3 if deterministic else 1),
                          bound=lower, seed=seed, max_iterations=its)
        if objective(p, res.offsets) < objective(p, best):
            best = res.offsets
        notes.append(f"local search {it} moves")
    if search is not None and not np.any(best >= tm) and not done():
        lo, hi = lower, objective(p, best)[1] - 1
        probe_lo = lo  # an "unknown" moves the probes up without proving anything
        first = "search at bound unknown" not in notes  # do not repeat a probe that stalled
        while probe_lo <= hi:
            cap = probe_lo if first else (probe_lo + hi) // 2
            left = t0 + 0.8 * time_limit - time.perf_counter()
            if left <= 0.01:
                break
            verdict = probe(cap, time.perf_counter() + (0.5 if first else 0.35) * left)
            first = False
            if verdict == "found":
                hi = objective(p, best)[1] - 1
            elif verdict == "infeasible":
                lo = probe_lo = cap + 1
            else:  # unknown at cap: look for a better allocation above it instead of stopping
                probe_lo = cap + 1
        lower = max(lower, lo)
        proven = lo > hi
        notes.append(f"search end {'proven' if proven else 'open'} "
                     f"[{lower:,}, {objective(p, best)[1]:,}]")
    if done() or (proven and not polish):
        return best, "optimal", ",".join(notes)
    left = time_limit - (time.perf_counter() - t0)
    if left > 0.05 or polish:
        res = solve_cpsat(p, hint=best, time_limit=max(left, 0.1), bound=lower,
                          allow_overflow=bool(np.any(best >= tm)), workers=cp_workers,
                          seed=seed, deterministic=deterministic, polish=polish)
        notes.append(f"cp-sat {res.status} ({res.note})")
        if res.offsets is not None:
            cand = np.asarray(res.offsets, np.int64)
            if self_check(p, cand):
                if objective(p, cand) <= objective(p, best):
                    best = cand
                    proven |= res.status == "optimal"
            else:
                notes.append("cp-sat result rejected by self-check")
    status = "optimal" if proven or _meets(p, best, lower) else "feasible"
    return best, status, ",".join(notes)


def _search_function():
    """The compiled exact search, when that module exists (it is optional)."""
    try:
        from .search import solve_search
    except ImportError:
        return None
    return solve_search


# ---- the lower bound -------------------------------------------------------------------
def tile_bounds(report: Report, tiles, time_limit: float = 10.0) -> dict[int, tuple[int, bool]]:
    """Maximum live bytes of each tile, ``tile -> (bytes, exact)``, from
    ``tilemem.liveness.max_live_all`` (one compiled pass over all tiles; ``time_limit`` is the
    budget of its searches for all tiles together)."""
    from ..liveness import max_live_all

    tiles = np.asarray(list(tiles), np.int64)
    if len(tiles) == 0:
        return {}
    return {m.tile: (int(m.max_live_bytes), bool(m.exact))
            for m in max_live_all(report, tiles, time_limit=time_limit)}


def tile_bound(report: Report, tile: int, time_limit: float = 1.0) -> tuple[int, bool]:
    """Maximum live bytes of ``tile``, ``(bytes, exact)``, from
    ``tilemem.liveness.max_live`` (``time_limit``: its search budget when the class graph is
    not chordal; past it the figure is a clique found, a valid lower bound)."""
    from ..liveness import max_live

    m = max_live(report, int(tile), time_limit=time_limit)
    return int(m.max_live_bytes), bool(m.exact)


def window_bound(p: TileProblem) -> int:
    """The highest window start plus size: no allocation with nothing overflowed ends lower."""
    fits = p.lo + p.size <= p.hi
    return int((p.lo + p.size)[fits].max()) if fits.any() else 0


def region_bound(p: TileProblem, node_limit: int = 20_000) -> int:
    """``interleavedMemoryStart`` + the heaviest clique of the variables that must lie in the
    interleaved region: pairwise conflicting, they fit only in ``[ils, end)`` side by side.

    The maximum live bytes ignore where variables may go; on tiles with interleaved data this
    bound is often the higher one (0 when no variable is confined to the interleaved region).

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0, 0, 0], size=[100, 100, 8],
    ...     alignment=[16, 16, 4], offset=[0, 0, 0], category=["variable"] * 3,
    ...     eq_class=[0, 1, 2], interference=[[1], [0], []],
    ...     in_interleaved_mem=[True, True, False])
    >>> region_bound(TileProblem.from_report(r, 0))
    131272
    """
    from ..graphalg import max_weight_clique

    ils = p.target.interleaved_memory_start
    sub = np.flatnonzero((p.lo >= ils) & (p.lo + p.size <= p.hi))
    if len(sub) == 0:
        return 0
    indptr, indices = p.conflicts.conflict_csr(sub, sort=True)
    clique = max_weight_clique(indptr, indices, p.size[sub], node_limit=node_limit)
    return ils + int(clique.weight)  # a real clique's weight: valid even when not proven


def simple_bound(p: TileProblem) -> tuple[int, bool]:
    """A valid lower bound on the highest end address of any allocation with nothing
    overflowed: the heaviest clique found greedily in the conflict graph (always-live bytes
    plus mutually interfering classes). ``exact`` is False (a greedy clique is not proven
    maximum). The driver uses ``tilemem.liveness.max_live_all`` instead; this is for callers
    of ``solve_tile`` without a report.

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=range(4), tile=[0] * 4, size=[10, 20, 30, 5],
    ...     alignment=[4] * 4, offset=[0] * 4, category=["variable"] * 4,
    ...     eq_class=[0, 1, 2, 3], interference=[[1], [0], [], []], always_live=[0, 0, 0, 1])
    >>> simple_bound(TileProblem.from_report(r, 0))
    (35, False)
    """
    if p.n == 0:
        return 0, True
    c = p.conflicts
    al = c.always_live.astype(bool)
    size = p.size.astype(np.int64)
    nc = len(c.classes)
    w = np.bincount(c.local_class[~al], weights=size[~al], minlength=nc).astype(np.int64)

    def interfering(a: int) -> np.ndarray:  # the classes interfering with a (not a itself)
        row = np.zeros(nc, bool)
        row[c.class_adj.row(a)] = True
        return row

    best = 0
    for seed in np.argsort(-w, kind="stable")[:64]:
        total = w[seed]
        cand = interfering(seed) & (w > 0)
        while cand.any():
            k = int(np.argmax(np.where(cand, w, -1)))
            total += w[k]
            cand &= interfering(k)
        best = max(best, int(total))
    return int(size[al].sum()) + best, False


# ---- orchestration ------------------------------------------------------------------------
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
    solved separately, which is merely slower.
    """
    import hashlib

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


def _work(task):
    """Worker: solve one tile of the shared report."""
    tile, method, hint, bound, time_limit, seed, cp_workers, deterministic = task
    report, rules = _STATE
    p = TileProblem.from_report(report, tile, rules)
    if bound is None:
        bound = tile_bound(report, tile, time_limit=min(1.0, time_limit))
    return tile, solve_tile(p, method, hint=hint,
                            replay_order=_replay_order(report, tile, p.rows),
                            time_limit=time_limit, seed=seed, cp_workers=cp_workers,
                            deterministic=deterministic, bound=bound)


class _Runner:
    """Runs tile tasks in-process (one worker) or in a forked process pool, with progress."""

    def __init__(self, workers: int, num_tasks: int, progress: bool):
        self.workers = workers if num_tasks > 1 else 1
        self.pool = None
        self.progress = None
        self.show = progress

    def __enter__(self):
        if self.workers > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self.pool = ProcessPoolExecutor(self.workers,
                                            mp_context=multiprocessing.get_context("fork"))
            # fork every worker now, before the progress bar's thread exists
            list(self.pool.map(_noop, range(self.workers)))
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

    def _map(self, fn, tasks, label):
        """Results of ``fn`` over ``tasks`` as they complete, advancing a progress bar."""
        bar = (self.progress.add_task(label, total=len(tasks))
               if self.progress is not None else None)
        if self.pool is None or len(tasks) <= 1:
            results = map(fn, tasks)
        else:
            from concurrent.futures import as_completed

            futures = [self.pool.submit(fn, t) for t in tasks]
            results = (f.result() for f in as_completed(futures))
        for res in results:
            if bar is not None:
                self.progress.advance(bar)
            yield res

    def __call__(self, tasks, label) -> dict:
        return dict(self._map(_work, tasks, label))

    def bounds(self, tiles: list[int], time_limit: float) -> dict[int, tuple[int, bool]]:
        """``tile_bounds`` of ``tiles`` (one compiled pass per chunk of tiles), in parallel."""
        k = 1 if self.pool is None or len(tiles) < 64 else self.workers * 4
        chunks = [tiles[i::k] for i in range(k) if tiles[i::k]]
        out = {}
        for part in self._map(_bounds_work, [(c, time_limit / len(chunks)) for c in chunks],
                              "maximum live bytes"):
            out.update(part)
        return out

    def __exit__(self, *exc):
        if self.progress is not None:
            self.progress.stop()
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)


def _bounds_work(task):
    tiles, time_limit = task
    return tile_bounds(_STATE[0], tiles, time_limit)


def _noop(_):
    return None


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _warm_up() -> None:
    """Compile the numba kernels once in the parent, so forked workers inherit them."""
    from ..target import Target

    r = Report.from_columns(target=Target(1, 64, 32, np.array([0, 32])), var_id=[0, 1],
                            tile=[0, 0], size=[4, 4], alignment=[4, 4], offset=[0, 0],
                            category=["variable"] * 2, eq_class=[0, 0], interference=[[]],
                            element_constraints=[[1], []], region_constraints=[[1], []])
    p = TileProblem.from_report(r, 0)
    self_check(p, first_fit(p))
    try:
        from .search import warm_up
    except ImportError:
        return
    warm_up()


def _verify(report: Report, alloc: Allocation, tiles, rules: Rules) -> None:
    try:
        from ..check import check_allocation
    except ImportError:
        return
    res = check_allocation(report, alloc.offsets, rules=rules)
    if not res.ok:
        raise AssertionError(f"allocation failed the checker: {res.violations[:3]}")
