"""The allocation problem of one tile, as every packer sees it (local indices 0..n-1).

Built from the model and the liveness stage. The placement rules and their inferred parts come
from ``tilemem.rules``; the checker (``tilemem.check``) shares none of this code.

Addresses at or beyond ``capacity`` (= tileMemory) are the overflow zone: a variable placed
there is overflowed; only alignment and no-overlap apply there (``tilemem.rules``).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..liveness import TileConflicts, tile_conflicts
from ..model import Report
from ..rules import DEFAULT_RULES, Rules, effective_alignment
from ..model.target import Target


@dataclass(frozen=True)
class TileProblem:
    """One tile's variables, their rules and conflicts.

    - ``size``, ``align`` (effective: at least 4), per variable.
    - ``lo``/``hi``: the window a variable placed *in memory* must lie in: ``lo <= offset`` and
      ``offset + size <= hi`` (interleaved -> ``[ils, tileMemory)``; executable/vertexCode ->
      ``[0, ils)``; lowest256KB caps ``hi`` at 262144). Both interleaved and code: empty window
      (``lo > hi - size``), so the variable can only overflow.
    - With ``rules.no_region_span`` a variable in memory lies wholly in one region.
    - ``element_pairs`` / ``region_pairs``: ``(k, 2)`` local index pairs ``i < j`` whose sets of
      touched elements (regions) must be disjoint.
    - ``conflicts``: who may not share bytes (``TileConflicts``, local indices).
    - ``lifetimes``: ``(n, 2)`` program-step intervals ``[start, end)`` when the report carries
      class steps, else ``None``.
    - ``intervals``: ``(n, 2)`` positions of the classes along an interval model of the whole
      report's class graph (``tilemem.liveness.class_intervals``), when the caller passed one:
      not times, but two variables' intervals overlap exactly when their classes interfere.

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0, 1], tile=[0, 0], size=[8, 100], alignment=[2, 16],
    ...     offset=[0, 0], category=["variable"] * 2, eq_class=[0, 1], interference=[[], []],
    ...     in_interleaved_mem=[False, True])
    >>> p = TileProblem.from_report(r, 0)
    >>> p.align.tolist(), p.lo.tolist(), p.hi.tolist()
    ([4, 16], [0, 131072], [262144, 262144])
    """

    tile: int
    rows: np.ndarray
    size: np.ndarray
    align: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    conflicts: TileConflicts
    element_pairs: np.ndarray
    region_pairs: np.ndarray
    target: Target
    rules: Rules = DEFAULT_RULES
    lifetimes: np.ndarray | None = None
    intervals: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.size)

    @property
    def capacity(self) -> int:
        return self.target.tile_memory

    @cached_property
    def element_adj(self) -> tuple[np.ndarray, np.ndarray]:
        """``element_pairs`` as a symmetric adjacency over variables, CSR ``(indptr, indices)``."""
        return _pair_adjacency(self.n, self.element_pairs)

    @cached_property
    def region_adj(self) -> tuple[np.ndarray, np.ndarray]:
        """``region_pairs`` as a symmetric adjacency over variables, CSR ``(indptr, indices)``."""
        return _pair_adjacency(self.n, self.region_pairs)

    @staticmethod
    def from_report(r: Report, tile: int, rules: Rules = DEFAULT_RULES,
                    class_intervals: np.ndarray | None = None) -> "TileProblem":
        tc = tile_conflicts(r, tile)
        rows = tc.rows
        t = r.target
        lo, hi = windows(r, rows, rules)
        lifetimes = None
        if r.class_steps is not None:
            lifetimes = r.class_steps[r.eq_class[rows]]
        return TileProblem(
            tile=int(tile), rows=rows, size=r.size[rows].copy(),
            align=effective_alignment(r.alignment[rows]).astype(np.int64), lo=lo, hi=hi,
            conflicts=tc, element_pairs=_local_pairs(r.element_constraints, rows),
            region_pairs=_local_pairs(r.region_constraints, rows), target=t, rules=rules,
            lifetimes=lifetimes,
            intervals=None if class_intervals is None else class_intervals[r.eq_class[rows]])


def windows(r: Report, rows, rules: Rules = DEFAULT_RULES) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` (int64) of the variables ``rows`` (an index array or a slice): the window each must lie in when placed
    in memory (``TileProblem``)."""
    t = r.target
    ils, tm = t.interleaved_memory_start, t.tile_memory
    code = r.executable[rows] | r.vertex_code[rows]
    lo = np.where(r.in_interleaved_mem[rows], ils, 0).astype(np.int64)
    hi = np.where(code, ils, tm).astype(np.int64)
    return lo, np.where(r.lowest_256kb[rows], np.minimum(hi, rules.lowest_256kb_limit), hi)


def _local_pairs(csr, rows: np.ndarray) -> np.ndarray:
    """Constraint pairs among ``rows`` as unique local pairs ``i < j``."""
    if csr.nnz == 0 or len(rows) == 0:
        return np.zeros((0, 2), np.int64)
    lengths, idx = csr.gather(rows)
    if len(idx) == 0:
        return np.zeros((0, 2), np.int64)
    src_local = np.repeat(np.arange(len(rows)), lengths)
    order = np.argsort(rows)
    pos = np.searchsorted(rows[order], idx)
    pos_c = np.minimum(pos, len(rows) - 1)
    ok = rows[order][pos_c] == idx
    dst_local = order[pos_c]
    a, b = src_local[ok], dst_local[ok]
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    keep = lo != hi
    # one integer a pair, in (lo, hi) order: np.unique on rows sorts a structured view,
    # several times slower
    n = len(rows)
    key = np.unique(lo[keep].astype(np.int64) * n + hi[keep])
    return np.stack([key // n, key % n], axis=1).astype(np.int64)


def _pair_adjacency(n: int, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric adjacency of local pairs as ``(indptr, indices)``, each row in pair order."""
    pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
    src = np.concatenate([pairs[:, 0], pairs[:, 1]])
    dst = np.concatenate([pairs[:, 1], pairs[:, 0]])
    order = np.argsort(src, kind="stable")
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n)[:n], out=indptr[1:])
    return indptr, dst[order].astype(np.int64)
