"""Which variables of a tile conflict: the structure every packer reads (``TileConflicts``).

Two variables of one tile conflict (may not share a byte) when either is alwaysLive, or they
are in the same equivalence class, or their classes interfere (004; FACTS.md). The compiled
test (``conflicts_with`` on a row from ``conflict_row``) keeps the packers' hot loops in
numba; ``tilemem.check`` keeps its own, independent reading of the rule.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np
from ..jit import njit

from ..model import Csr, Report
from .classgraph import _local_graph, sorted_interference
from .graphalg import DENSE_MAX


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

    def conflicting_with(self, i: int) -> np.ndarray:
        """The variables that conflict with local variable ``i`` (sorted, ``i`` not among
        them): every other one when ``i`` is always live, else its class, the classes
        interfering with it and the always-live variables.

        >>> from tilemem.model import Report
        >>> r = Report.from_columns(var_id=range(4), tile=[0] * 4, size=[8] * 4,
        ...     alignment=[4] * 4, offset=[0] * 4, category=["variable"] * 4,
        ...     eq_class=[0, 1, 2, 0], interference=[[1], [0], []], always_live=[0, 0, 0, 0])
        >>> tile_conflicts(r, 0).conflicting_with(0).tolist()
        [1, 3]
        """
        al = self.always_live.astype(bool)
        if al[i]:
            return np.delete(np.arange(self.num_vars, dtype=np.int64), i)
        class_ptr, by_class = self.members
        c = int(self.local_class[i])
        classes = np.append(self.class_adj.row(c), c)
        parts = [by_class[class_ptr[k]:class_ptr[k + 1]] for k in classes.tolist()]
        out = np.unique(np.concatenate(parts + [np.flatnonzero(al)]).astype(np.int64))
        return out[out != i]

    def conflict_csr(self, sub: np.ndarray | None = None,
                     sort: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The conflict graph of the variables ``sub`` (sorted local indices; default all) as
        CSR ``(indptr, indices)`` over positions in ``sub``, symmetric, no self entries;
        ``sort``: each row ascending. O(conflicting pairs) memory."""
        if sub is None and not sort:
            return self._all_conflicts
        return self._conflict_csr(sub, sort)

    @cached_property
    def _all_conflicts(self) -> tuple[np.ndarray, np.ndarray]:
        # the whole graph is asked for by several packers of one tile (the heuristic's pairs,
        # the search's interactions): built once
        return self._conflict_csr(None, False)

    def _conflict_csr(self, sub, sort: bool) -> tuple[np.ndarray, np.ndarray]:
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
def class_row_into(c, by_class, class_ptr, cadj_ptr, cadj_idx, always, live, seen, pos, out):
    """Compiled: the conflict row of class ``c`` written into ``out`` (its length returned):
    the positions ``pos[v]`` (-1: not wanted) of its members, of the members of the classes
    it interferes with (self entries and repeats in its adjacency skipped), then of the
    always-live variables ``live`` not met yet. ``seen``: scratch over the variables, set to
    ``c`` for each always-live variable met here (a class is written once a pass, so a mark
    left by another class never reads as this one's). The one reading of a class's row that
    ``conflict_csr`` and the search's interaction rows (``tilemem.pack.search.builders``)
    share."""
    cnt = 0
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
                out[cnt] = pos[v]
                cnt += 1
                if always[v]:
                    seen[v] = c
    for t in range(len(live)):
        if seen[live[t]] != c:
            out[cnt] = pos[live[t]]
            cnt += 1
    return cnt


@njit(cache=True)
def _class_rows(used, pos, by_class, class_ptr, cadj_ptr, cadj_idx, always, live):
    """For each ``used`` class: its row (``class_row_into``) as CSR over classes."""
    nc = len(class_ptr) - 1
    rptr = np.zeros(nc + 1, np.int64)
    seen = np.full(len(pos), -1, np.int64)
    scratch = np.empty(len(pos), np.int64)
    rows = np.zeros(0, np.int64)
    for phase in range(2):
        if phase == 1:
            rows = np.empty(rptr[nc], np.int64)
            seen[:] = -1
        for c in range(nc):
            cnt = 0
            if used[c]:
                out = scratch if phase == 0 else rows[rptr[c]:]
                cnt = class_row_into(c, by_class, class_ptr, cadj_ptr, cadj_idx, always, live,
                                     seen, pos, out)
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
    matrix, indptr, indices = class_conflicts(
        classes.astype(np.int64), inter.indptr, inter.indices,
        np.full(max(inter.num_rows, 1), -1, np.int64))
    adj = Csr(indptr, indices)
    if k > DENSE_MAX:
        matrix = None
    return TileConflicts(tile=int(tile), rows=rows, local_class=local.astype(np.int64),
                         classes=classes, class_adj=adj, always_live=r.always_live[rows].copy(),
                         class_matrix=matrix)


@njit(cache=True)
def class_conflicts(classes, g_indptr, g_indices, mark):
    """Compiled: the class part of a tile's ``ConflictArrays`` for its classes ``classes``
    (global ids, sorted; local class ``i`` is ``classes[i]``): ``(class_matrix, class_ptr,
    class_idx)``, the interference among them from the global sorted CSR
    (``sorted_interference``), the matrix 0x0 past ``DENSE_MAX`` classes. ``mark``: scratch of
    length num_classes holding -1 (restored on return)."""
    indptr, indices = _local_graph(g_indptr, g_indices, classes, mark)
    k = len(classes)
    if k <= DENSE_MAX:
        return _class_matrix(k, indptr, indices), indptr, indices
    return np.zeros((0, 0), np.bool_), indptr, indices


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

