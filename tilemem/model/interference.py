"""Interference kept to what a tile can use: pairs of classes that share a tile.

Conflicts are only ever asked between two variables of one tile, so a pair of classes with no
tile in common never decides anything per tile. In a pipelined report such pairs are most of
the list (classes of different IPUs never share a tile, yet overlap in time): about 2.8 M
entries at one IPU, 45 M at four, 179 M at eight. Keeping only the pairs that share a tile
makes the list grow with the IPU count instead of its square.

A class's tiles are those of its allocated variables (always-live ones too, so that a reading
that takes a variable's always-live flag away still finds its class's pairs). Every induced
subgraph of one tile's classes is the same before and after, so every per-tile answer is.

>>> import numpy as np
>>> tile, cls = np.array([0, 0, 1, 1]), np.array([0, 1, 1, 2])
>>> shares = SharedTiles.of(tile, cls, np.ones(4, bool), 3)
>>> shares.mask(np.array([0, 1, 0, 2]), np.array([1, 2, 2, 0])).tolist()
[True, True, False, False]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .frozen import frozen

#: Entries tested a call: bounds the kernel's output (one byte an entry) while streaming.
BLOCK = 1 << 24


@dataclass(frozen=True)
class SharedTiles:
    """Which classes share a tile, from the variables' columns (one pass over the rows)."""

    lo: np.ndarray
    hi: np.ndarray
    ptr: np.ndarray
    bits: np.ndarray

    @staticmethod
    def of(tile, eq_class, allocated, num_classes: int) -> "SharedTiles":
        tile = np.asarray(tile, np.int64)
        eq_class = np.asarray(eq_class, np.int64)
        use = (np.asarray(allocated, bool) & (tile >= 0) & (eq_class >= 0)
               & (eq_class < num_classes))
        from ._sharedtiles import class_tile_bits   # numba, loaded when first needed

        return SharedTiles(*class_tile_bits(frozen(tile), frozen(eq_class), frozen(use),
                                            int(num_classes)))

    def mask(self, src, dst) -> np.ndarray:
        """True where the classes ``src[k]`` and ``dst[k]`` have a tile in common."""
        from ._sharedtiles import share_tile

        out = np.empty(len(src), np.bool_)
        for s in range(0, len(src), BLOCK):
            share_tile(frozen(src[s:s + BLOCK], np.int64),
                        frozen(dst[s:s + BLOCK], np.int64), self.lo, self.hi, self.ptr,
                        self.bits, out[s:s + BLOCK])
        return out


def tile_shared_pairs(num_classes: int, src, dst, tile, eq_class, allocated):
    """``(src, dst, dropped)``: the pairs whose classes share a tile, and how many entries
    did not (read in blocks, so ``src`` / ``dst`` may be file mappings larger than memory)."""
    shares = SharedTiles.of(tile, eq_class, allocated, num_classes)
    keep_src, keep_dst, dropped = [], [], 0
    for s in range(0, len(src), BLOCK):
        a = np.asarray(src[s:s + BLOCK], np.int64)
        b = np.asarray(dst[s:s + BLOCK], np.int64)
        m = shares.mask(a, b)
        dropped += int(len(m) - np.count_nonzero(m))
        keep_src.append(a[m])
        keep_dst.append(b[m])
    cat = (lambda parts: np.concatenate(parts) if parts else np.zeros(0, np.int64))
    return cat(keep_src), cat(keep_dst), dropped


def prunes(target) -> bool:
    """Whether a report on ``target`` is kept to pairs that share a tile: when it spans more
    than one IPU. At one IPU the list is small, and whole-program readings of it (a class's
    degree as a sign of persistent data, the report's interval model) stay as they were."""
    return target.num_ipus > 1


def prune_csr(inter, tile, eq_class, allocated):
    """``(Csr, dropped)``: ``inter`` (class rows) with only the entries whose two classes share
    a tile, and how many entries went. Reads ``inter.indices`` in blocks of rows, so a file
    mapping of it is never copied whole."""
    from . import Csr
    from ._sharedtiles import share_tile_rows

    k = inter.num_rows
    shares = SharedTiles.of(tile, eq_class, allocated, k)
    indptr = np.asarray(inter.indptr, np.int64)
    lengths = np.zeros(k, np.int64)
    kept = []
    r0 = 0
    while r0 < k:   # rows in blocks of about BLOCK entries (at least one row)
        r1 = int(np.searchsorted(indptr, indptr[r0] + BLOCK, side="right")) - 1
        r1 = min(max(r1, r0 + 1), k)
        a, b = int(indptr[r0]), int(indptr[r1])
        idx = np.asarray(inter.indices[a:b], np.int64)
        m = np.empty(len(idx), np.bool_)
        share_tile_rows(frozen(indptr[r0:r1 + 1] - a), frozen(idx), r0, shares.lo, shares.hi,
                        shares.ptr, shares.bits, m)
        rows = np.repeat(np.arange(r0, r1, dtype=np.int64), np.diff(indptr[r0:r1 + 1]))
        lengths += np.bincount(rows[m], minlength=k)
        kept.append(idx[m])
        r0 = r1
    out = Csr.from_lengths(lengths, np.concatenate(kept) if kept else np.zeros(0, np.int64))
    return out, inter.nnz - out.nnz


def pruned(r):
    """``r`` with its interference kept to the pairs of classes that share a tile, when
    ``prunes`` says so and it is not so already (``Report.interference_dropped``)."""
    from dataclasses import replace

    if r.interference_dropped is not None or not prunes(r.target):
        return r
    inter, dropped = prune_csr(r.interference, r.tile, r.eq_class, r.allocated)
    return replace(r, interference=inter, interference_dropped=dropped, _cache={})


def tile_interference(r):
    """The interference every per-tile reading uses: the pairs that share a tile when
    ``prunes`` says so (computed once a report when it was read unpruned), else as written.
    Pruned and unpruned readings of one report then give the same answers."""
    if r.interference_dropped is not None or not prunes(r.target):
        return r.interference
    return r.cached("tile_interference", lambda: pruned(r).interference)
