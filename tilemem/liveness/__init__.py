"""Liveness: which variables of a tile conflict, how many bytes must be live at once, and when.

Two variables of one tile conflict (may not share a byte) when either is alwaysLive, or they
are in the same equivalence class, or their classes interfere (004; FACTS.md). So the bytes live
together are the always-live bytes of the tile plus a *clique* of its class conflict graph
(vertices: the classes with variables on the tile that are not always-live, weighted by those
variables' bytes; edges: interference). The heaviest clique is the **maximum live bytes**: no
allocator can fit the tile in fewer bytes (alignment gaps aside).

- ``max_live`` / ``max_live_all``: that maximum and the peak live set. Exact and fast where the
  structure allows it: program steps known and consistent with the interference (the
  ``equivalenceClassSteps`` extension): a sweep over steps; a chordal graph (every interval graph
  is one): a perfect elimination ordering, linear time (``tilemem.liveness.graphalg``); otherwise bounds
  and a branch and bound under a time limit. ``MaxLive.exact`` says whether the figure is proven.
- ``always_live_bytes``: per tile. ``class_graph``: the interference as a networkx graph (on
  demand; CSR inside for speed). ``timeline``: class lifetimes ``[start, end)`` for drawing maps
  as time x address: the steps when present, else an interval model recovered from the graph.
- ``tile_conflicts``: the per-tile conflict structure every packer reads (``TileConflicts``,
  with the compiled conflict test ``conflicts_with`` / ``conflict_row``).

>>> from tilemem.model import Report
>>> r = Report.from_columns(var_id=[0, 1, 2, 3, 4], tile=[0] * 5, size=[100, 8, 16, 32, 4],
...     alignment=[4] * 5, offset=[0] * 5, category=["stack"] + ["variable"] * 4,
...     eq_class=[0, 1, 2, 3, 1], always_live=[1, 0, 0, 0, 0],
...     interference=[[], [2], [3], []])            # classes 1-2 and 2-3 interfere, 1-3 do not
>>> m = max_live(r, 0)
>>> m.always_live_bytes, m.max_live_bytes, m.exact, m.peak_classes.tolist()
(100, 148, True, [2, 3])
>>> m.peak_rows.tolist()                          # always-live rows included (see MaxLive)
[0, 2, 3]
>>> timeline(r, 0).tolist()       # per class [start, end): 1-2 and 2-3 overlap, 1-3 do not
[[0, 1], [1, 3], [2, 4], [3, 4]]
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np
from numba import njit

from .graphalg import DENSE_MAX, _chordal_pass, _earlier_neighbours, interval_order, max_weight_clique
from ..model import Csr, Report

#: Search nodes per second of the exact branch and bound (measured here: ~1e7 on a dense
#: 400-vertex graph); turns a time limit into a deterministic node budget.
NODES_PER_SECOND = 5_000_000


class ConflictArrays(NamedTuple):
    """A tile's conflict structure as plain arrays for compiled code (``conflict_row``,
    ``conflict``, the packers' kernels): each variable's local class and whether it is always
    live, the class conflict matrix (0x0 past the dense limit) and the class adjacency as
    CSR."""

    local_class: np.ndarray
    always_live: np.ndarray
    class_matrix: np.ndarray
    class_ptr: np.ndarray
    class_idx: np.ndarray


@dataclass(frozen=True)
class TileConflicts:
    """The conflict structure of one tile, over *local* indices ``0..n-1``: the one every
    packer reads (``tilemem.check`` keeps its own, independent reading of the rule).

    Two variables conflict (may not share a byte) when either is alwaysLive, or they are in
    the same class, or their classes interfere. ``rows[i]`` is the model row of local variable
    ``i``; ``local_class[i]`` indexes ``classes`` (the global class ids present on the tile,
    sorted); ``class_adj`` is the interference among those classes (symmetric CSR over local
    class indices, rows sorted, no self entries). ``class_matrix``: the same as a dense
    boolean matrix *with a true diagonal* (a class conflicts with itself), ``matrix[a, b]``
    "classes a and b conflict"; ``None`` past ``DENSE_MAX`` classes (16 MiB).

    Compiled code tests pairs with ``conflicts_with`` on a ``conflict_row`` (one pair:
    ``conflict(i, j, *tc.arrays)``); Python code with ``tc.conflicts(i, j)``, and reads the
    whole graph with ``conflict_csr``.

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0, 1, 2, 3], tile=[0, 0, 0, 1], size=[4, 4, 4, 4],
    ...     alignment=[4] * 4, offset=[0] * 4, category=["variable"] * 4,
    ...     eq_class=[0, 1, 2, 0], interference=[[1], [], []], always_live=[0, 0, 0, 0])
    >>> tc = tile_conflicts(r, 0)
    >>> tc.conflicts(0, 1), tc.conflicts(0, 2), tc.conflicts(1, 2)
    (True, False, False)
    >>> [p.tolist() for p in tc.conflict_pairs()]
    [[0], [1]]
    >>> tc.class_matrix.astype(int).tolist()
    [[1, 1, 0], [1, 1, 0], [0, 0, 1]]
    """

    tile: int
    rows: np.ndarray
    local_class: np.ndarray
    classes: np.ndarray
    class_adj: Csr
    always_live: np.ndarray
    class_matrix: np.ndarray | None = None

    @property
    def num_vars(self) -> int:
        return len(self.rows)

    @cached_property
    def arrays(self) -> "ConflictArrays":
        """The structure as plain arrays for compiled code (``conflict_row``, ``conflict``):
        a ``ConflictArrays`` (the class matrix a 0x0 matrix past the dense limit)."""
        m = self.class_matrix
        return ConflictArrays(
            local_class=self.local_class.astype(np.int64),
            always_live=self.always_live.astype(np.bool_),
            class_matrix=np.ascontiguousarray(m if m is not None else np.zeros((0, 0), np.bool_)),
            class_ptr=self.class_adj.indptr.astype(np.int64),
            class_idx=self.class_adj.indices.astype(np.int64))

    @cached_property
    def members(self) -> tuple[np.ndarray, np.ndarray]:
        """The variables of each local class: ``(class_ptr, by_class)``, class ``a`` holds
        ``by_class[class_ptr[a]:class_ptr[a + 1]]`` (increasing; always-live ones included)."""
        k = len(self.classes)
        by_class = np.argsort(self.local_class, kind="stable").astype(np.int64)
        class_ptr = np.zeros(k + 1, np.int64)
        np.cumsum(np.bincount(self.local_class, minlength=k), out=class_ptr[1:])
        return class_ptr, by_class

    def class_members(self, always_live: bool = True) -> list[np.ndarray]:
        """The variables of each local class (increasing), without the always-live ones when
        ``always_live`` is false."""
        class_ptr, by_class = self.members
        if len(self.classes) == 0:
            return []
        out = np.split(by_class, class_ptr[1:-1])
        if not always_live:
            al = self.always_live.astype(bool)
            out = [m[~al[m]] for m in out]
        return out

    def conflicts(self, i: int, j: int) -> bool:
        """Do local variables ``i`` and ``j`` conflict?"""
        return bool(conflict(int(i), int(j), *self.arrays))

    def conflict_csr(self, sub: np.ndarray | None = None,
                     sort: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The conflict graph of the variables ``sub`` (sorted local indices; default all) as
        CSR ``(indptr, indices)`` over positions in ``sub``, symmetric, no self entries;
        ``sort``: each row ascending. O(conflicting pairs) memory."""
        n = self.num_vars
        sub = np.arange(n, dtype=np.int64) if sub is None else np.asarray(sub, np.int64)
        class_ptr, by_class = self.members
        a = self.arrays
        lc, al, cptr, cidx = a.local_class, a.always_live, a.class_ptr, a.class_idx
        ptr, idx = _conflict_rows(sub, n, lc, by_class, class_ptr, cptr, cidx, al)
        if sort and len(idx):
            row = np.repeat(np.arange(len(sub), dtype=np.int64), np.diff(ptr))
            idx = idx[np.lexsort((idx, row))]
        return ptr, idx

    def conflict_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Every conflicting pair ``(i, j)``, ``i < j``, explicitly (O(pairs) memory)."""
        ptr, idx = self.conflict_csr()
        src = np.repeat(np.arange(self.num_vars, dtype=np.int64), np.diff(ptr))
        keep = src < idx
        n = max(self.num_vars, 1)
        key = np.sort(src[keep] * n + idx[keep])
        return key // n, key % n

    def conflict_bytes(self, size: np.ndarray) -> np.ndarray:
        """Per variable: bytes (``size``, per local variable) of the variables it conflicts
        with, itself included."""
        nc = len(self.classes)
        al = self.always_live.astype(bool)
        size = np.asarray(size, np.int64)
        live_bytes = int(size[al].sum())
        cls_bytes = np.bincount(self.local_class[~al], weights=size[~al], minlength=nc)
        adj = self.class_adj
        nbr_bytes = np.zeros(nc)
        if adj.nnz:
            np.add.at(nbr_bytes, adj.row_ids(), cls_bytes[adj.indices])
        out = live_bytes + cls_bytes[self.local_class] + nbr_bytes[self.local_class]
        return np.where(al, int(size.sum()), out).astype(np.int64)


@njit(cache=True, inline="always")
def conflict_row(a, matrix, class_ptr, class_idx, scratch):
    """Compiled: the local classes that conflict with class ``a`` (itself included), as a
    boolean row over the local classes: a row of the dense matrix, or past the dense limit
    ``scratch`` (all false on entry) marked from ``a``'s CSR row, to be cleared with
    ``clear_row``. ``matrix``, ``class_ptr``, ``class_idx``: the last three of
    ``TileConflicts.arrays``. One row per variable placed keeps the test in the packers' hot
    loops a single load (``conflicts_with``)."""
    if matrix.shape[0]:
        return matrix[a]
    scratch[a] = True
    for q in range(class_ptr[a], class_ptr[a + 1]):
        scratch[class_idx[q]] = True
    return scratch


@njit(cache=True, inline="always")
def clear_row(a, matrix, class_ptr, class_idx, scratch):
    """Compiled: undo what ``conflict_row(a, ...)`` marked in ``scratch``."""
    if not matrix.shape[0]:
        scratch[a] = False
        for q in range(class_ptr[a], class_ptr[a + 1]):
            scratch[class_idx[q]] = False


@njit(cache=True, inline="always")
def conflicts_with(always_a, row_a, always_b, class_b):
    """Compiled: the conflict rule for two distinct variables ``a`` and ``b``, from whether
    each is alwaysLive, ``a``'s ``conflict_row`` and ``b``'s local class: either is
    alwaysLive, or their classes are the same or interfere."""
    return always_a or always_b or row_a[class_b]


@njit(cache=True)
def conflict(i, j, local_class, always_live, matrix, class_ptr, class_idx):
    """Compiled: do local variables ``i`` and ``j`` conflict (``conflicts_with``)? The arrays
    are ``TileConflicts.arrays``. For one pair at a time; loops over many pairs take one
    ``conflict_row`` per variable instead."""
    if i == j:
        return False
    scratch = np.zeros(len(class_ptr) - 1, np.bool_)
    row = conflict_row(local_class[i], matrix, class_ptr, class_idx, scratch)
    return conflicts_with(always_live[i], row, always_live[j], local_class[j])


@njit(cache=True)
def _conflict_rows(sub, n, local_class, by_class, class_ptr, cadj_ptr, cadj_idx, always):
    """Conflict rows of the variables ``sub`` (positions in ``sub``), from the members of each
    class: an always-live variable conflicts with every other one; any other with the members
    of its class and of the classes it interferes with, and with the always-live ones.

    Why per class: the members of a class that are not always-live share one row but for
    themselves, so each class's row is built once (``_class_rows``) and copied to its
    members without the member, instead of a deduplicating pass over every variable's row
    (a Mk2 tile of ~1,700 variables in ~1,500 classes has ~1.7 M entries).
    """
    m = len(sub)
    pos = np.full(n, -1, np.int64)
    for t in range(m):
        pos[sub[t]] = t
    nlive = 0
    live = np.zeros(m, np.int64)   # the always-live variables of ``sub``
    for t in range(m):
        if always[sub[t]]:
            live[nlive] = sub[t]
            nlive += 1
    used = np.zeros(len(class_ptr) - 1, np.bool_)
    for t in range(m):
        if not always[sub[t]]:
            used[local_class[sub[t]]] = True
    rptr, rows = _class_rows(used, pos, by_class, class_ptr, cadj_ptr, cadj_idx, always,
                             live[:nlive])
    ptr = np.zeros(m + 1, np.int64)
    for ii in range(m):
        i = sub[ii]
        c = local_class[i]
        ptr[ii + 1] = ptr[ii] + (m - 1 if always[i] else rptr[c + 1] - rptr[c] - 1)
    idx = np.empty(ptr[m], np.int64)
    for ii in range(m):
        i = sub[ii]
        base = ptr[ii]
        cnt = 0
        if always[i]:
            for jj in range(m):
                if jj != ii:
                    idx[base + cnt] = jj
                    cnt += 1
        else:
            c = local_class[i]
            for t in range(rptr[c], rptr[c + 1]):
                if rows[t] != ii:
                    idx[base + cnt] = rows[t]
                    cnt += 1
    return ptr, idx


@njit(cache=True)
def _class_rows(used, pos, by_class, class_ptr, cadj_ptr, cadj_idx, always, live):
    """For each ``used`` class: the positions (``pos``, -1: not wanted) of its members, of
    its neighbour classes' members, then of the always-live variables ``live`` not met yet,
    as CSR over classes. Self entries and repeats in a class's adjacency are skipped."""
    nc = len(class_ptr) - 1
    rptr = np.zeros(nc + 1, np.int64)
    seen = np.full(len(pos), -1, np.int64)   # always-live variables met in class c's lists
    rows = np.zeros(0, np.int64)
    for phase in range(2):
        if phase == 1:
            rows = np.empty(rptr[nc], np.int64)
            seen[:] = -1
        for c in range(nc):
            cnt = 0
            if used[c]:
                base = rptr[c]
                prev = -1
                for q in range(-1, cadj_ptr[c + 1] - cadj_ptr[c]):
                    cl = c if q < 0 else cadj_idx[cadj_ptr[c] + q]
                    if q >= 0:
                        if cl == c or cl == prev:
                            continue
                        prev = cl
                    for t in range(class_ptr[cl], class_ptr[cl + 1]):
                        v = by_class[t]
                        if pos[v] >= 0:
                            if phase == 1:
                                rows[base + cnt] = pos[v]
                            cnt += 1
                            if always[v]:
                                seen[v] = c
                for t in range(len(live)):
                    if seen[live[t]] != c:
                        if phase == 1:
                            rows[base + cnt] = pos[live[t]]
                        cnt += 1
            if phase == 0:
                rptr[c + 1] = rptr[c] + cnt
    return rptr, rows


def tile_conflicts(r: Report, tile: int) -> TileConflicts:
    """The conflict structure of the allocated variables of ``tile``."""
    rows = r.tile_rows(tile)
    classes, local = np.unique(r.eq_class[rows], return_inverse=True)
    k = len(classes)
    inter = sorted_interference(r)
    # one compiled pass over the tile's rows of the global graph; the numpy version (a
    # dense block or a gather, then nonzero and a sort) cost 60 ms a Mk2 tile, as much as
    # the heuristic that follows it
    indptr, indices = _local_graph(inter.indptr, inter.indices, classes.astype(np.int64),
                                   np.full(max(inter.num_rows, 1), -1, np.int64))
    adj = Csr(indptr, indices)
    matrix = None
    if k <= DENSE_MAX:
        matrix = _class_matrix(k, indptr, indices)
    return TileConflicts(tile=int(tile), rows=rows, local_class=local.astype(np.int64),
                         classes=classes, class_adj=adj, always_live=r.always_live[rows].copy(),
                         class_matrix=matrix)


@njit(cache=True)
def _class_matrix(k, ptr, idx):
    """The dense boolean form of a local class CSR, with a true diagonal (a class conflicts
    with itself)."""
    matrix = np.zeros((k, k), np.bool_)
    for a in range(k):
        matrix[a, a] = True
        for q in range(ptr[a], ptr[a + 1]):
            matrix[a, idx[q]] = True
    return matrix


# ---- maximum live bytes ------------------------------------------------------------------------

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


def sorted_interference(r: Report) -> Csr:
    """The interference CSR with every row sorted and unique, symmetric, without self entries.

    tilemem's readers already give that; a ``Csr`` passed to ``Report.from_columns`` may not
    be. Cached per report (the check sorts once), so per-tile calls stay cheap.
    """
    return r.cached("sorted_interference", lambda: _normalise(r.interference))


def _normalise(inter: Csr) -> Csr:
    c = max(inter.num_rows, 1)
    src, dst = inter.row_ids(), inter.indices
    keys = src * c + dst
    if (bool(np.all(keys[1:] > keys[:-1])) and not bool(np.any(src == dst))
            and np.array_equal(np.sort(dst * c + src), keys)):
        return inter
    keep = src != dst
    keys = np.unique(np.concatenate([keys[keep], (dst * c + src)[keep]]))
    return Csr.from_lengths(np.bincount(keys // c, minlength=inter.num_rows), keys % c)


def _tile_nodes(r: Report, tiles: np.ndarray | None):
    """The vertices of every tile's class graph: ``(tile_ptr, node_class, node_weight)``, nodes
    grouped by tile (in the order of ``tiles``) and sorted by class within a tile."""
    if tiles is None:
        m = np.flatnonzero(r.allocated & ~r.always_live)
    else:  # only the rows of those tiles (cheap for one tile of a large report)
        m = np.unique(np.concatenate([r.tile_rows(t) for t in np.unique(tiles)]))
        m = m[~r.always_live[m]]
    c = max(r.num_classes, 1)
    key = r.tile[m] * c + r.eq_class[m]
    ukey, inv = np.unique(key, return_inverse=True)
    weight = np.bincount(inv, weights=r.size[m], minlength=len(ukey)).astype(np.int64)
    node_tile, node_class = ukey // c, ukey % c
    if tiles is None:
        tiles = np.arange(r.num_tiles)
    # nodes are sorted by tile id; reorder the tile groups into the order of ``tiles``
    counts = np.bincount(node_tile, minlength=r.num_tiles)
    starts = np.zeros(r.num_tiles + 1, np.int64)
    np.cumsum(counts, out=starts[1:])
    lengths = counts[tiles]
    tile_ptr = np.zeros(len(tiles) + 1, np.int64)
    np.cumsum(lengths, out=tile_ptr[1:])
    take = (np.repeat(starts[tiles] - tile_ptr[:-1], lengths)
            + np.arange(tile_ptr[-1], dtype=np.int64))
    return tile_ptr, node_class[take], weight[take]


@njit(cache=True)
def _local_graph(g_indptr, g_indices, classes, mark):
    """Induced subgraph on ``classes`` (sorted) as local CSR; ``mark`` is a scratch array of
    length num_classes holding -1 (restored on return). Rows come out sorted because local ids
    follow the sorted class ids."""
    k = len(classes)
    for i in range(k):
        mark[classes[i]] = i
    indptr = np.zeros(k + 1, np.int64)
    total = 0
    for i in range(k):
        c = classes[i]
        total += g_indptr[c + 1] - g_indptr[c]
    buf = np.empty(total, np.int64)
    m = 0
    for i in range(k):
        c = classes[i]
        for j in range(g_indptr[c], g_indptr[c + 1]):
            x = mark[g_indices[j]]
            if x >= 0:
                buf[m] = x
                m += 1
        indptr[i + 1] = m
    for i in range(k):
        mark[classes[i]] = -1
    return indptr, buf[:m]


@njit(cache=True)
def _all_tiles_chordal(g_indptr, g_indices, tile_ptr, node_class, node_w, num_classes):
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
                members[out:out + len(mem)] = mem + a
                out += len(mem)
        mptr[t + 1] = out
    return best, chordal, members[:out], mptr


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


def _steps_sweep(r: Report, tile_ptr, node_class, node_w):
    """Per tile: the heaviest set of classes live at one program step, as ``(best, members)``
    with members local node indices (offset into the tile's nodes)."""
    s = r.class_steps[node_class]
    nt = len(tile_ptr) - 1
    node_t = np.repeat(np.arange(nt), np.diff(tile_ptr))
    nonempty = s[:, 1] > s[:, 0]
    idx = np.flatnonzero(nonempty)
    # events: +w at start, -w at end; at equal times ends come first (half-open intervals)
    ev_t = np.concatenate([node_t[idx], node_t[idx]])
    ev_time = np.concatenate([s[idx, 0], s[idx, 1]])
    ev_w = np.concatenate([node_w[idx], -node_w[idx]])
    ev_kind = np.concatenate([np.ones(len(idx), np.int8), np.zeros(len(idx), np.int8)])
    order = np.lexsort((ev_kind, ev_time, ev_t))
    ev_t, ev_time, ev_w = ev_t[order], ev_time[order], ev_w[order]
    live = np.cumsum(ev_w)
    best = np.zeros(nt, np.int64)
    at = np.full(nt, -1, np.int64)
    if len(live):
        # cumsum restarts per tile: subtract the running total before each tile's first event
        first = np.flatnonzero(np.r_[True, ev_t[1:] != ev_t[:-1]])
        base = np.r_[0, live][first]
        live = live - np.repeat(base, np.diff(np.r_[first, len(live)]))
        # per tile, the event index of the maximum (first occurrence)
        o = np.lexsort((np.arange(len(live)), -live, ev_t))
        head = o[np.r_[True, ev_t[o][1:] != ev_t[o][:-1]]]
        best[ev_t[head]] = live[head]
        at[ev_t[head]] = ev_time[head]
    # a class with an empty step interval is alone in its clique
    empty_w = np.where(nonempty, -1, node_w)
    members = []
    for t in range(nt):
        a, b = tile_ptr[t], tile_ptr[t + 1]
        if b == a:
            members.append(np.zeros(0, np.int64))
            continue
        ew = empty_w[a:b]
        j = int(np.argmax(ew))
        if ew[j] > best[t]:
            best[t] = ew[j]
            members.append(np.array([a + j], np.int64))
            continue
        st = s[a:b]
        members.append(a + np.flatnonzero((st[:, 0] <= at[t]) & (at[t] < st[:, 1])))
    return best, members


def max_live_all(r: Report, tiles=None, time_limit: float = 10.0,
                 progress: bool = False) -> list[MaxLive]:
    """``MaxLive`` of every tile in ``tiles`` (default: all tiles), in that order.

    All tiles' class graphs go through one compiled pass (MCS + perfect elimination check);
    with program steps consistent with the interference, one vectorised sweep instead. Tiles
    whose graph is not chordal get a greedy clique, upper bounds and, if those differ, a branch
    and bound. ``time_limit`` (seconds) is the budget of those searches for ALL tiles together,
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
        steps_superset, steps_equal = _steps_consistent(r, inter)
    if steps_equal:  # the steps are the interference: the sweep is exact
        sweep, sweep_members = _steps_sweep(r, tile_ptr, node_class, node_w)
        best[:] = upper[:] = sweep
        exact[:] = True
        method[:] = "steps"
        members = sweep_members
    else:
        cand, chordal, flat, mptr = _all_tiles_chordal(
            inter.indptr, inter.indices, tile_ptr, node_class, node_w, max(r.num_classes, 1))
        for t in np.flatnonzero(chordal):
            best[t] = upper[t] = cand[t]
            exact[t] = True
            method[t] = "chordal"
            members[t] = flat[mptr[t]:mptr[t + 1]]
        todo = np.flatnonzero(~chordal)
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
    t = np.concatenate([steps[ne, 0], steps[ne, 1]])
    d = np.concatenate([w[ne], -w[ne]])
    kind = np.concatenate([np.ones(ne.sum(), np.int8), np.zeros(ne.sum(), np.int8)])
    o = np.lexsort((kind, t))
    live = int(np.cumsum(d[o]).max()) if len(o) else 0
    return max(live, int(w[~ne].max()) if (~ne).any() else 0)


def max_live(r: Report, tile: int, time_limit: float = 5.0) -> MaxLive:
    """``MaxLive`` of one tile (see ``max_live_all``)."""
    if not 0 <= int(tile) < r.num_tiles:
        raise ValueError(f"tile {tile} is outside [0, {r.num_tiles})")
    return max_live_all(r, [int(tile)], time_limit=time_limit)[0]


# ---- graphs and timelines ----------------------------------------------------------------------

def class_graph(r: Report, tile: int | None = None):
    """The class interference graph as a ``networkx.Graph`` (built on demand: networkx costs
    ~230 bytes per edge, so prefer the CSR ``report.interference`` for large reports).

    Whole report: nodes are all class ids. With ``tile``: the classes of the tile's allocated
    variables, each with attribute ``bytes`` (its non-always-live bytes on that tile) and
    ``always_live`` (bytes of its always-live variables there).

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0, 0, 0], size=[8, 4, 2],
    ...     alignment=[4] * 3, offset=[0] * 3, category=["variable"] * 3, eq_class=[0, 1, 2],
    ...     interference=[[1], [], [0]])
    >>> g = class_graph(r, 0)
    >>> sorted(g.edges()), g.nodes[0]["bytes"]
    ([(0, 1), (0, 2)], 8)
    """
    import networkx as nx

    inter = r.interference
    src, dst = inter.row_ids(), inter.indices
    g = nx.Graph()
    if tile is None:
        g.add_nodes_from(range(r.num_classes))
        keep = src < dst
        g.add_edges_from(zip(src[keep].tolist(), dst[keep].tolist()))
        return g
    rows = r.tile_rows(tile)
    classes = np.unique(r.eq_class[rows])
    al = r.always_live[rows]
    cls = r.eq_class[rows]
    for c in classes.tolist():
        on = cls == c
        g.add_node(c, bytes=int(r.size[rows[on & ~al]].sum()),
                   always_live=int(r.size[rows[on & al]].sum()))
    ip, ix = _local_graph(sorted_interference(r).indptr, sorted_interference(r).indices,
                          classes, np.full(max(r.num_classes, 1), -1, np.int64))
    s = np.repeat(np.arange(len(classes)), np.diff(ip))
    keep = s < ix
    g.add_edges_from(zip(classes[s[keep]].tolist(), classes[ix[keep]].tolist()))
    return g


def timeline(r: Report, tile: int | None = None) -> np.ndarray | None:
    """Class lifetimes as ``(num_classes, 2)`` intervals ``[start, end)``, or ``None``.

    - With the ``equivalenceClassSteps`` extension: those program steps (whatever ``tile``).
    - Otherwise, when the class graph (restricted to the classes of ``tile``'s allocated
      variables if given) is an interval graph: an interval model of it found by LexBFS sweeps
      (``tilemem.liveness.graphalg.interval_order``; every model returned is verified) or, when
      they fail, by the exact test of ``tilemem.liveness.intervals.interval_model``, over
      positions; classes outside the tile get ``[-1, -1]``. The order of program points is
      recovered only up to what the graph determines (e.g. mirror images are equally valid).
    - ``None`` when no interval model was found (e.g. If/Else branches make the graph
      non-interval): a time x address map cannot be drawn.

    Always-live variables are live throughout; draw them over the whole time axis.
    """
    if r.class_steps is not None:
        return r.class_steps.copy()
    inter = sorted_interference(r)
    if tile is None:
        classes = np.arange(r.num_classes, dtype=np.int64)
        ip, ix = inter.indptr, inter.indices
    else:
        classes = np.unique(r.eq_class[r.tile_rows(tile)])
        ip, ix = _local_graph(inter.indptr, inter.indices, classes,
                              np.full(max(r.num_classes, 1), -1, np.int64))
    model = interval_order(ip, ix)
    if model is None:  # no LexBFS sweep found one: the exact test decides
        from .intervals import interval_model

        model = interval_model(ip, ix)
    if model is None:
        return None
    out = np.full((r.num_classes, 2), -1, np.int64)
    out[classes] = model
    return out


def class_intervals(r: Report) -> np.ndarray | None:
    """An interval model of the whole report's class graph, ``(num_classes, 2)`` intervals
    ``[start, end)`` over clique positions (two classes interfere exactly when their
    intervals overlap: ``tilemem.liveness.intervals.interval_model``, verified), recovered from
    the interference alone and cached per report; ``None`` when the graph is not an interval
    graph (e.g. If/Else branches).

    Restricted to the classes of one tile it is an interval model of that tile's class graph
    (an induced subgraph of an interval graph), so the packers read each tile's ordered
    maximal cliques off it with a sweep instead of recognising every tile's graph again
    (0.15-0.3 s a tile on the generated Mk2 report; its whole class graph, 3,483 classes and
    1.5 M edges, takes ~0.5 s once). Classes are numbered canonically first (colour
    refinement from each class's bytes and variable count), so that renumbering the classes
    of a report does not change which model comes out.

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0, 1, 1], size=[4, 8, 4],
    ...     alignment=[4] * 3, offset=[0] * 3, category=["variable"] * 3, eq_class=[0, 1, 2],
    ...     interference=[[1], [0, 2], [1]])        # a path 0 - 1 - 2: intervals
    >>> iv = class_intervals(r)
    >>> def meet(a, b):
    ...     return bool(iv[a, 0] < iv[b, 1] and iv[b, 0] < iv[a, 1])
    >>> meet(0, 1), meet(1, 2), meet(0, 2)
    (True, True, False)
    """
    return r.cached("class_intervals", lambda: _class_intervals(r))


def _class_intervals(r: Report) -> np.ndarray | None:
    from .intervals import canonical_numbering, interval_model

    g = sorted_interference(r)
    k = g.num_rows
    if k == 0:
        return np.zeros((0, 2), np.int64)
    labels = np.stack([np.bincount(r.eq_class, weights=r.size, minlength=k),
                       np.bincount(r.eq_class, minlength=k)], axis=1)
    canon, indptr, indices = canonical_numbering(g.indptr, g.indices, labels)
    model = interval_model(indptr, indices)   # over the canonical numbers
    if model is None:
        return None
    out = np.empty_like(model)
    out[canon] = model
    return out


# ---- live bytes over program steps ---------------------------------------------------------------

@dataclass(frozen=True)
class StepProfile:
    """Live bytes of one tile over program steps (the Graph Analyser's liveness report).

    ``live_bytes[k]`` is live in the steps ``[start[k], start[k + 1])`` (the last entry, after
    every lifetime ended, holds the always-live bytes alone). Always-live bytes are included:
    they are the floor of the curve. ``kind`` says where the steps come from: ``"steps"`` (the
    report's ``equivalenceClassSteps``) or ``"points"`` (positions of an interval model
    reconstructed from the interference by ``timeline``: the order of program points is
    recovered only up to what the interference determines). ``unplaced_rows``: variables
    that are not always-live but whose class has an empty interval; they are on no step
    (``max_live`` counts such a class alone).

    A step's live set counts every variable whose lifetime covers it. When the steps overlap
    more than the interference says (If/Else branches share steps but not memory) the peak
    can exceed ``max_live``'s maximum live bytes, which follows the interference.
    """

    tile: int
    kind: str
    start: np.ndarray
    live_bytes: np.ndarray
    always_live_bytes: int
    unplaced_rows: np.ndarray

    @property
    def peak_index(self) -> int:
        return int(np.argmax(self.live_bytes)) if len(self.live_bytes) else 0

    @property
    def peak_step(self) -> int | None:
        """First step of the highest live bytes (``None`` for a tile with nothing on steps)."""
        return int(self.start[self.peak_index]) if len(self.start) else None

    @property
    def peak_steps(self) -> tuple[int, int] | None:
        """``[first, end)`` steps of the first segment with the highest live bytes."""
        if len(self.start) < 2:
            return None
        k = self.peak_index
        return int(self.start[k]), int(self.start[min(k + 1, len(self.start) - 1)])

    @property
    def peak_bytes(self) -> int:
        return int(self.live_bytes.max()) if len(self.live_bytes) else self.always_live_bytes

    def at(self, step) -> np.ndarray:
        """Live bytes at the given step(s) (always-live bytes before the first segment)."""
        k = np.searchsorted(self.start, np.asarray(step), side="right") - 1
        if not len(self.live_bytes):
            return np.full(np.shape(k), self.always_live_bytes, np.int64)
        return np.where(k >= 0, self.live_bytes[np.maximum(k, 0)], self.always_live_bytes)


def _row_lifetimes(r: Report, tile: int):
    """``(rows, life, kind)``: the tile's allocated rows and their class's ``[start, end)``
    (from ``timeline``), or ``None`` without a timeline."""
    rows = r.tile_rows(tile)
    if r.class_steps is not None:
        return rows, r.class_steps[r.eq_class[rows]], "steps"
    life = timeline(r, tile)
    if life is None:
        return None
    return rows, life[r.eq_class[rows]], "points"


def step_profile(r: Report, tile: int) -> StepProfile | None:
    """Live bytes over the program steps of ``tile``; ``None`` when there is no timeline
    (no ``equivalenceClassSteps`` and the interference has no interval model): no curve can
    be drawn then without inventing an order.

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0, 1, 2, 3], tile=[0] * 4, size=[100, 8, 16, 32],
    ...     alignment=[4] * 4, offset=[0] * 4, category=["stack"] + ["variable"] * 3,
    ...     eq_class=[0, 1, 2, 3], always_live=[1, 0, 0, 0], interference=[[], [2], [3], []],
    ...     class_steps=[[0, 0], [0, 4], [2, 6], [5, 9]])
    >>> p = step_profile(r, 0)
    >>> p.kind, p.start.tolist(), p.live_bytes.tolist()
    ('steps', [0, 2, 4, 5, 6, 9], [108, 124, 116, 148, 132, 100])
    >>> p.peak_step, p.peak_steps, p.peak_bytes, p.at([3, 100]).tolist()
    (5, (5, 6), 148, [124, 100])
    """
    found = _row_lifetimes(r, tile)
    if found is None:
        return None
    rows, life, kind = found
    always = r.always_live[rows]
    al = int(r.size[rows[always]].sum())
    on = ~always & (life[:, 1] > life[:, 0])
    s, e, w = life[on, 0], life[on, 1], r.size[rows[on]]
    times = np.unique(np.concatenate([s, e]))
    delta = (np.bincount(np.searchsorted(times, s), weights=w, minlength=len(times))
             - np.bincount(np.searchsorted(times, e), weights=w, minlength=len(times)))
    live = np.cumsum(delta).round().astype(np.int64) + al
    return StepProfile(tile=int(tile), kind=kind, start=times.astype(np.int64), live_bytes=live,
                       always_live_bytes=al, unplaced_rows=rows[~always & ~on])


def live_rows_at(r: Report, tile: int, step: int) -> np.ndarray:
    """Rows of ``tile`` live at ``step`` (always-live rows included), by the same timeline as
    ``step_profile``; sorted. Empty without a timeline."""
    found = _row_lifetimes(r, tile)
    if found is None:
        return np.zeros(0, np.int64)
    rows, life, _ = found
    live = r.always_live[rows] | ((life[:, 0] <= step) & (step < life[:, 1]))
    return np.sort(rows[live])


def max_over_tiles(r: Report, tiles=None, block: int = 64):
    """The maximum over tiles of the live bytes at every program step, and which tile holds
    it: ``(start, live_bytes, tile)`` as in ``StepProfile`` (segments of constant value).
    Only with the report's own ``equivalenceClassSteps`` (``None`` otherwise): orders
    reconstructed per tile from the interference are not one program's steps.

    >>> from tilemem.model import Report
    >>> from tilemem.model.target import MK1
    >>> r = Report.from_columns(target=MK1.with_tiles(2), var_id=[0, 1, 2], tile=[0, 1, 1],
    ...     size=[8, 4, 16], alignment=[4] * 3, offset=[0] * 3, category=["variable"] * 3,
    ...     eq_class=[0, 1, 2], interference=[[], [], []],
    ...     class_steps=[[0, 3], [0, 5], [4, 6]])
    >>> [a.tolist() for a in max_over_tiles(r)]
    [[0, 3, 4, 5, 6], [8, 4, 20, 16, 0], [0, 1, 1, 1, 0]]
    """
    if r.class_steps is None:
        return None
    tiles = r.tiles_in_use() if tiles is None else np.asarray(tiles, np.int64)
    indptr, order = r._tiles()
    al = always_live_bytes(r)
    steps = r.class_steps
    # one time axis for all tiles: every start and end of a class used by a live variable
    used = r.allocated & ~r.always_live
    life = steps[r.eq_class[used]]
    ok = life[:, 1] > life[:, 0]
    times = np.unique(life[ok].ravel())
    if len(times) == 0:
        return times, np.zeros(0, np.int64), np.zeros(0, np.int64)
    best = np.full(len(times), -1, np.int64)
    who = np.zeros(len(times), np.int64)
    for b in range(0, len(tiles), block):     # a dense (tiles x times) grid, a block at a time
        chunk = tiles[b:b + block]
        rows = np.concatenate([order[indptr[t]:indptr[t + 1]] for t in chunk.tolist()]
                              + [np.zeros(0, np.int64)])
        local = np.repeat(np.arange(len(chunk)), indptr[chunk + 1] - indptr[chunk])
        keep = ~r.always_live[rows]
        rows, local = rows[keep], local[keep]
        lf = steps[r.eq_class[rows]]
        on = lf[:, 1] > lf[:, 0]
        rows, local, lf = rows[on], local[on], lf[on]
        n = len(times)
        grid = (np.bincount(local * n + np.searchsorted(times, lf[:, 0]), weights=r.size[rows],
                            minlength=len(chunk) * n)
                - np.bincount(local * n + np.searchsorted(times, lf[:, 1]),
                              weights=r.size[rows], minlength=len(chunk) * n))
        grid = np.cumsum(grid.reshape(len(chunk), n), axis=1).round().astype(np.int64)
        grid += al[chunk][:, None]
        k = np.argmax(grid, axis=0)
        top = grid[k, np.arange(n)]
        better = top > best
        best[better] = top[better]
        who[better] = chunk[k[better]]
    return times.astype(np.int64), best, who
