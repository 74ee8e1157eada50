"""Liveness: the conflict structure of each tile's variables (more analyses build on it).

Two variables of one tile conflict (may not share a byte) when either is alwaysLive, or they
are in the same equivalence class, or their classes interfere (004; FACTS.md).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import Csr, Report


@dataclass(frozen=True)
class TileConflicts:
    """The conflict structure of one tile, over *local* indices ``0..n-1``.

    ``rows[i]`` is the model row of local variable ``i``; ``local_class[i]`` indexes
    ``classes`` (the global class ids present on the tile, sorted); ``class_adj`` is the
    interference among those classes (symmetric CSR over local class indices, no self entries).

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0, 1, 2, 3], tile=[0, 0, 0, 1], size=[4, 4, 4, 4],
    ...     alignment=[4] * 4, offset=[0] * 4, category=["variable"] * 4,
    ...     eq_class=[0, 1, 2, 0], interference=[[1], [], []], always_live=[0, 0, 0, 0])
    >>> tc = tile_conflicts(r, 0)
    >>> tc.conflicts(0, 1), tc.conflicts(0, 2), tc.conflicts(1, 2)
    (True, False, False)
    >>> [p.tolist() for p in tc.conflict_pairs()]
    [[0], [1]]
    """

    tile: int
    rows: np.ndarray
    local_class: np.ndarray
    classes: np.ndarray
    class_adj: Csr
    always_live: np.ndarray

    @property
    def num_vars(self) -> int:
        return len(self.rows)

    def class_conflict(self, a: int, b: int) -> bool:
        return a == b or bool(np.any(self.class_adj.row(a) == b))

    def conflicts(self, i: int, j: int) -> bool:
        if i == j:
            return False
        if self.always_live[i] or self.always_live[j]:
            return True
        return self.class_conflict(int(self.local_class[i]), int(self.local_class[j]))

    def conflict_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Every conflicting pair ``(i, j)``, ``i < j``, explicitly (O(pairs) memory)."""
        n = self.num_vars
        lc = self.local_class
        # members of each local class
        order = np.argsort(lc, kind="stable")
        counts = np.bincount(lc, minlength=len(self.classes))
        start = np.zeros(len(self.classes) + 1, np.int64)
        np.cumsum(counts, out=start[1:])
        src, dst = [], []
        live = np.flatnonzero(self.always_live)
        if len(live):  # always-live variables conflict with every other variable
            ii, jj = np.meshgrid(live, np.arange(n), indexing="ij")
            src.append(ii.ravel())
            dst.append(jj.ravel())
        ca = self.class_adj
        for a in range(len(self.classes)):
            ma = order[start[a]:start[a + 1]]
            nb = ca.row(a)
            nb = nb[nb >= a]
            mb = np.concatenate([ma] + [order[start[b]:start[b + 1]] for b in nb])
            ii, jj = np.meshgrid(ma, mb, indexing="ij")
            src.append(ii.ravel())
            dst.append(jj.ravel())
        if not src:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        s = np.concatenate(src)
        d = np.concatenate(dst)
        lo, hi = np.minimum(s, d), np.maximum(s, d)
        keep = lo != hi
        key = np.unique(lo[keep] * n + hi[keep])
        return key // n, key % n


def tile_conflicts(r: Report, tile: int) -> TileConflicts:
    """The conflict structure of the allocated variables of ``tile``."""
    rows = r.tile_rows(tile)
    classes, local = np.unique(r.eq_class[rows], return_inverse=True)
    inter = r.interference
    lengths = inter.indptr[classes + 1] - inter.indptr[classes]
    nbrs = (np.concatenate([inter.row(c) for c in classes]) if len(classes)
            else np.zeros(0, np.int64))
    src = np.repeat(np.arange(len(classes)), lengths)
    pos = np.searchsorted(classes, nbrs)
    pos_c = np.minimum(pos, max(len(classes) - 1, 0))
    present = (pos < len(classes)) & (classes[pos_c] == nbrs) if len(classes) else pos < 0
    adj = Csr.from_pairs(len(classes), src[present], pos_c[present])
    return TileConflicts(tile=int(tile), rows=rows, local_class=local.astype(np.int64),
                         classes=classes, class_adj=adj, always_live=r.always_live[rows].copy())
