"""Maximum live bytes: the heaviest set of variables that must be live together on a tile
(``max_live_all``, ``max_live``), the bound no allocator can beat, and the peak live set.

Exact and fast where the structure allows it: program steps known and consistent with the
interference: a sweep over steps; a chordal class graph (every interval graph is one): a
perfect elimination ordering, linear time (``tilemem.liveness.graphalg``); otherwise bounds and a
branch and bound under a time limit.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from ..jit import njit

from ..model import Csr, Report
from .classgraph import _local_graph, _tile_nodes, sorted_interference
from .sweep import live_sweep
from .graphalg import _chordal_pass, _earlier_neighbours, max_weight_clique
from .sorting import argsort, search_left_between, sort


#: Search nodes per second of the exact branch and bound (measured here: ~1e7 on a dense
#: 400-vertex graph); turns a time limit into a deterministic node budget.
NODES_PER_SECOND = 5_000_000


@dataclass(frozen=True)
class MaxLive:
    """Maximum live bytes of one tile and the live set at that peak.

    - ``always_live_bytes``: bytes of the tile's alwaysLive variables (live at every step).
    - ``max_live_bytes``: ``always_live_bytes`` + the weight of ``peak_classes``, a clique of the
      tile's class conflict graph (INCLUDING always-live bytes, as Poplar's "Maximum live bytes
      (including always-live)"). Those variables really are live together, so this is always a
      valid lower bound for allocators; when ``exact`` it is the maximum.
    - ``upper_bound_bytes``: a proven upper bound on the maximum (equal when ``exact``).
    - ``exact``: the figure is proven to be the maximum-weight clique (+ always-live bytes).
      When false (search budget ran out), ``max_live_bytes`` is the heaviest clique found.
    - ``method``: ``"steps"`` (sweep over program steps), ``"chordal"``, ``"bounds"``,
      ``"branch-and-bound"``, ``"greedy"`` (not proven), ``"empty"`` (no live classes).
    - ``peak_classes``: global class ids of the clique (classes with non-always-live bytes).
    - ``peak_rows``: model rows of every variable live at the peak, always-live rows INCLUDED
      (tell them apart with ``report.always_live[peak_rows]``); sorted.
    """

    tile: int
    always_live_bytes: int
    max_live_bytes: int
    upper_bound_bytes: int
    exact: bool
    method: str
    peak_classes: np.ndarray
    peak_rows: np.ndarray

    @property
    def peak_bytes(self) -> int:
        """Live bytes at the peak excluding always-live ones."""
        return self.max_live_bytes - self.always_live_bytes


def always_live_bytes(r: Report) -> np.ndarray:
    """Bytes of allocated alwaysLive variables on every tile (int64, length ``num_tiles``).

    >>> from tilemem.model import Report
    >>> from tilemem.model.target import MK1
    >>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0, 1, 1], size=[8, 4, 12],
    ...     alignment=[4] * 3, offset=[0] * 3, category=["stack"] * 3, eq_class=[0] * 3,
    ...     interference=[[]], always_live=[1, 1, 0], target=MK1.with_tiles(3))
    >>> always_live_bytes(r).tolist()
    [8, 4, 0]
    """
    m = r.allocated & r.always_live
    return np.bincount(r.tile[m], weights=r.size[m], minlength=r.num_tiles).astype(np.int64)


@njit(cache=True)
def all_tiles_chordal(g_indptr, g_indices, tile_ptr, node_class, node_w, num_classes):
    """For every tile: the MCS pass on its class graph. Returns per tile the best candidate
    weight (an upper bound; the maximum when chordal), the chordal flag, and the candidate
    clique's members (local node indices, offset into the tile) in a flat buffer."""
    nt = len(tile_ptr) - 1
    best = np.zeros(nt, np.int64)
    chordal = np.ones(nt, np.bool_)
    members = np.empty(len(node_class), np.int64)
    mptr = np.zeros(nt + 1, np.int64)
    mark = np.full(num_classes, -1, np.int64)
    out = 0
    for t in range(nt):
        a = tile_ptr[t]
        b = tile_ptr[t + 1]
        if b > a:
            ip, ix = _local_graph(g_indptr, g_indices, node_class[a:b], mark)
            pos, cand, ch = _chordal_pass(ip, ix, node_w[a:b])
            v = np.argmax(cand)
            best[t] = cand[v]
            chordal[t] = ch
            if ch:
                mem = _earlier_neighbours(ip, ix, pos, v)
                # a loop, not a slice assignment: numba compiles that with its error message
                # (string formatting, a few seconds of every first run)
                for i in range(len(mem)):
                    members[out + i] = mem[i] + a
                out += len(mem)
        mptr[t + 1] = out
    return best, chordal, members[:out], mptr


def steps_consistent(r: Report) -> tuple[bool, bool]:
    """``(superset, equal)``: whether every interfering class pair of ``r`` overlaps in the
    program steps, and whether the steps' overlap graph is exactly the interference (a pass
    over the whole relation, cached on the report; an IPU's view made after it shares it).
    ``(False, False)`` without class steps."""
    if r.class_steps is None:
        return False, False
    return r.cached("steps_consistent", lambda: _steps_consistent(r, sorted_interference(r)))


def _steps_consistent(r: Report, inter: Csr) -> tuple[bool, bool]:
    """``(superset, equal)``: whether every interfering class pair overlaps in the program
    steps, and whether the steps' overlap graph is exactly the interference."""
    s = r.class_steps
    src, dst = inter.row_ids(), inter.indices
    superset = bool(np.all(np.maximum(s[src, 0], s[dst, 0]) < np.minimum(s[src, 1], s[dst, 1])))
    if not superset:
        return False, False
    # Number of overlapping pairs of the non-empty intervals: for each interval j (sorted by
    # start), the earlier-starting intervals minus those that ended at or before its start.
    ne = s[s[:, 1] > s[:, 0]]
    starts = np.sort(ne[:, 0])
    ends = np.sort(ne[:, 1])
    before = np.arange(len(starts)) - np.searchsorted(ends, starts, side="right")
    return True, int(before.sum()) == inter.nnz // 2


@njit(cache=True)
def _tile_step_peaks(tile_ptr, start, end, w):
    """Per tile: the heaviest weight of classes live at one program step (its first such
    step; a class with an empty interval is alone in its clique, so it is the peak where it
    is heavier) and the nodes live there, ``(best, members, mptr)``: members are node
    positions, tile ``t``'s at ``members[mptr[t]:mptr[t + 1]]``. Compiled, a tile at a
    time: an interval sweep of its few thousand classes."""
    nt = len(tile_ptr) - 1
    best = np.zeros(nt, np.int64)
    members = np.empty(len(start), np.int64)
    mptr = np.zeros(nt + 1, np.int64)
    out = 0
    for t in range(nt):
        a, b = tile_ptr[t], tile_ptr[t + 1]
        n = b - a
        ev_t = np.empty(2 * n, np.int64)
        ev_w = np.empty(2 * n, np.int64)
        m = 0
        for i in range(a, b):
            if end[i] > start[i]:
                ev_t[m] = start[i]
                ev_w[m] = w[i]
                ev_t[m + 1] = end[i]
                ev_w[m + 1] = -w[i]
                m += 2
        at = -1
        top = 0
        if m:
            order = argsort(ev_t[:m])
            live = 0
            k = 0
            first = True
            while k < m:
                time = ev_t[order[k]]
                while k < m and ev_t[order[k]] == time:
                    live += ev_w[order[k]]
                    k += 1
                if first or live > top:
                    top = live
                    at = time
                    first = False
        # a class with an empty interval is alone in its clique: where heavier, it is the peak
        j = -1
        for i in range(a, b):
            if end[i] <= start[i] and (j < 0 or w[i] > w[j]):
                j = i
        if j >= 0 and w[j] > top:
            best[t] = w[j]
            members[out] = j
            out += 1
        else:
            best[t] = top
            for i in range(a, b):
                if start[i] <= at and at < end[i]:
                    members[out] = i
                    out += 1
        mptr[t + 1] = out
    return best, members[:out], mptr


def _sub_tiles(tile_ptr: np.ndarray, tiles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The nodes of some of the tiles (positions ``tiles`` into ``tile_ptr``'s groups):
    ``(their tile_ptr, the nodes' positions in the whole)``."""
    lengths = tile_ptr[tiles + 1] - tile_ptr[tiles]
    ptr = np.zeros(len(tiles) + 1, np.int64)
    np.cumsum(lengths, out=ptr[1:])
    nodes = np.repeat(tile_ptr[tiles] - ptr[:-1], lengths) + np.arange(ptr[-1], dtype=np.int64)
    return ptr, nodes


@njit(cache=True)
def _step_peaks_are_cliques(g_indptr, g_indices, tile_ptr, node_class, members, mptr):
    """For every tile: whether its peak members (node positions ``members[mptr[t]:mptr[t +
    1]]``) have classes that interfere pairwise. Each member's row is read only over the
    range of the members' classes (rows are sorted): a class that interferes with a whole
    Pod's classes costs a search, not a pass over them."""
    nt = len(tile_ptr) - 1
    ok = np.zeros(nt, np.bool_)
    for t in range(nt):
        a, b = mptr[t], mptr[t + 1]
        k = b - a
        cls = sort(node_class[members[a:b]])
        if k <= 1:
            ok[t] = True
            continue
        lo, hi = cls[0], cls[k - 1]
        good = True
        for i in range(k):
            c = cls[i]
            if i > 0 and c == cls[i - 1]:
                good = False   # (a tile's nodes are distinct classes)
                break
            # the row's entries from the members' lowest class to their highest
            j = search_left_between(g_indices, g_indptr[c], g_indptr[c + 1], lo)
            end = search_left_between(g_indices, j, g_indptr[c + 1], hi + 1)
            # a merge of that range with the members: every other member must be in it
            m = 0
            found = 0
            while j < end and m < k:
                if g_indices[j] < cls[m]:
                    j += 1
                elif g_indices[j] > cls[m]:
                    m += 1
                else:
                    found += 1
                    j += 1
                    m += 1
            if found != k - 1:
                good = False
                break
        ok[t] = good
    return ok


def max_live_all(r: Report, tiles=None, time_limit: float = 10.0,
                 progress: bool = False) -> list[MaxLive]:
    """``MaxLive`` of every tile in ``tiles`` (default: all tiles), in that order.

    With program steps whose overlaps hold every interference edge, each tile's heaviest
    step (a compiled interval sweep) is exact where the classes live at it interfere
    pairwise. The other tiles' class graphs go through one compiled pass (MCS + perfect
    elimination check); those whose graph is not chordal get a greedy clique, upper bounds
    and, if those differ, a branch and bound. ``time_limit`` (seconds) is the budget of those searches for ALL tiles together,
    shared out as they go; a tile whose search runs out reports ``exact=False``.
    """
    if tiles is None:
        tiles = np.arange(r.num_tiles, dtype=np.int64)
        tile_ptr, node_class, node_w = _tile_nodes(r, None)
    else:
        tiles = np.atleast_1d(np.asarray(tiles, np.int64))
        bad = tiles[(tiles < 0) | (tiles >= r.num_tiles)]
        if len(bad):
            raise ValueError(f"tile {bad[0]} is outside [0, {r.num_tiles})")
        tile_ptr, node_class, node_w = _tile_nodes(r, tiles)
    inter = sorted_interference(r)
    nt = len(tiles)
    best = np.zeros(nt, np.int64)
    upper = np.zeros(nt, np.int64)
    exact = np.zeros(nt, bool)
    method = np.empty(nt, object)
    members: list = [None] * nt
    steps_superset = steps_equal = False
    if r.class_steps is not None and len(node_class):
        # a pass over the whole interference: once per report, not per batch of tiles
        steps_superset, steps_equal = steps_consistent(r)
    rest = np.arange(nt)
    if steps_superset:
        # every clique's classes share a step (intervals that meet pairwise share a point),
        # so the heaviest step bounds the clique from above; where the steps are the
        # interference, or the classes live at that step interfere pairwise, they are the
        # heaviest clique, and the tile's graph need not be built (at a Pod's tiles that
        # was most of the pass)
        steps = r.class_steps[node_class]
        sweep, flat, mptr = _tile_step_peaks(tile_ptr, steps[:, 0].copy(), steps[:, 1].copy(),
                                             node_w)
        ok = (np.ones(nt, np.bool_) if steps_equal else
              _step_peaks_are_cliques(inter.indptr, inter.indices, tile_ptr, node_class,
                                      flat, mptr))
        for t in np.flatnonzero(ok):
            best[t] = upper[t] = sweep[t]
            exact[t] = True
            method[t] = "steps"
            members[t] = flat[mptr[t]:mptr[t + 1]]
        rest = np.flatnonzero(~ok)
    if len(rest):   # the class graph of each tile left: MCS, then a search where not chordal
        sub_ptr, sub_nodes = _sub_tiles(tile_ptr, rest)
        cand_s, chordal_s, flat, mptr = all_tiles_chordal(
            inter.indptr, inter.indices, sub_ptr, node_class[sub_nodes], node_w[sub_nodes],
            max(r.num_classes, 1))
        cand = np.zeros(nt, np.int64)
        cand[rest] = cand_s
        for k in np.flatnonzero(chordal_s):
            t = rest[k]
            best[t] = upper[t] = cand_s[k]
            exact[t] = True
            method[t] = "chordal"
            members[t] = sub_nodes[flat[mptr[k]:mptr[k + 1]]]
        todo = rest[~chordal_s]
        if len(todo):
            _search(r, inter, todo, tile_ptr, node_class, node_w, cand,
                    r.class_steps if steps_superset else None, time_limit, progress,
                    best, upper, exact, method, members)
    out = []
    for t, tile in enumerate(tiles.tolist()):
        peak = np.sort(node_class[members[t]]) if members[t] is not None else np.zeros(0, np.int64)
        if tile_ptr[t + 1] == tile_ptr[t]:
            method[t] = "empty"
        rows = r.tile_rows(tile)
        always = r.always_live[rows]
        al = int(r.size[rows[always]].sum())
        live = always | np.isin(r.eq_class[rows], peak)
        out.append(MaxLive(
            tile=tile, always_live_bytes=al, max_live_bytes=int(al + best[t]),
            upper_bound_bytes=int(al + upper[t]), exact=bool(exact[t]),
            method=str(method[t]), peak_classes=peak, peak_rows=np.sort(rows[live])))
    return out


def _search(r, inter, todo, tile_ptr, node_class, node_w, cand, steps, time_limit, progress,
            best, upper, exact, method, members):
    """Bounds and branch and bound for the tiles whose class graph is not chordal.

    ``steps``: class steps whose overlaps include every interference edge (else ``None``): the
    heaviest step of the tile is then an upper bound (e.g. If/Else branches share steps in
    the linear order but do not interfere)."""
    from contextlib import nullcontext

    mark = np.full(max(r.num_classes, 1), -1, np.int64)
    deadline = time.monotonic() + max(0.0, time_limit)
    bar = nullcontext()
    if progress:
        from rich.progress import Progress

        bar = Progress(transient=True)
    with bar as p:
        task = p.add_task("maximum live bytes (exact search)", total=len(todo)) if p else None
        for i, t in enumerate(todo):
            a, b = tile_ptr[t], tile_ptr[t + 1]
            ip, ix = _local_graph(inter.indptr, inter.indices, node_class[a:b], mark)
            left = max(0.0, deadline - time.monotonic()) / (len(todo) - i)
            ub = int(cand[t])
            if steps is not None:
                ub = min(ub, _heaviest_step(steps[node_class[a:b]], node_w[a:b]))
            c = max_weight_clique(ip, ix, node_w[a:b], upper=ub,
                                  node_limit=max(1000, int(left * NODES_PER_SECOND)))
            best[t], upper[t], exact[t], method[t] = c.weight, c.upper, c.exact, c.method
            members[t] = c.members + a
            if p:
                p.advance(task)


def _heaviest_step(steps: np.ndarray, w: np.ndarray) -> int:
    """Largest total weight of intervals live at one step (an empty interval counts alone)."""
    ne = steps[:, 1] > steps[:, 0]
    times = np.unique(steps[ne].ravel())
    live = int(live_sweep(steps[ne, 0], steps[ne, 1], w[ne], times).max()) if len(times) else 0
    return max(live, int(w[~ne].max()) if (~ne).any() else 0)


def max_live(r: Report, tile: int, time_limit: float = 5.0) -> MaxLive:
    """``MaxLive`` of one tile (see ``max_live_all``)."""
    if not 0 <= int(tile) < r.num_tiles:
        raise ValueError(f"tile {tile} is outside [0, {r.num_tiles})")
    return max_live_all(r, [int(tile)], time_limit=time_limit)[0]

