"""Whether rows are ordered by tile, read in blocks (``tilemem.model.ipuview`` says why).

Plain column functions: ``tilemem.model`` uses them for its tile index and ``ipuview`` for its
views, so neither imports the other to get them.
"""
from __future__ import annotations

import numpy as np

BLOCK = 1 << 22   # rows read at a time: bounded temporaries


def ordered(tile: np.ndarray, allocated: np.ndarray) -> bool:
    """True when the allocated rows come first, in non-decreasing tile order, then the rest."""
    n = len(tile)
    last, seen_unallocated = -1, False
    for a in range(0, n, BLOCK):
        al = allocated[a:a + BLOCK]
        t = tile[a:a + BLOCK]
        if seen_unallocated:
            if al.any():
                return False
            continue
        k = len(al) if al.all() else int(np.argmin(al))   # first row not allocated here
        head = t[:k]
        if k:
            if head[0] < last or (k > 1 and bool((head[1:] < head[:-1]).any())):
                return False
            last = int(head[-1])
        if k < len(al):
            seen_unallocated = True
            if al[k:].any():
                return False
    return True


def allocated_prefix(allocated: np.ndarray) -> int:
    """How many rows lead with ``allocated`` true (the first row not allocated)."""
    for a in range(0, len(allocated), BLOCK):
        al = allocated[a:a + BLOCK]
        if not al.all():
            return a + int(np.argmin(al))
    return len(allocated)


def tile_bounds(tile: np.ndarray, allocated: np.ndarray, num_tiles: int) -> np.ndarray | None:
    """``num_tiles + 1`` row bounds of the tiles of rows ordered by tile (tile ``t``'s
    allocated variables are rows ``bounds[t]:bounds[t + 1]``), ``None`` when not ordered."""
    if not ordered(tile, allocated):
        return None
    n_alloc = allocated_prefix(allocated)
    return np.searchsorted(tile[:n_alloc], np.arange(num_tiles + 1, dtype=np.int64),
                           side="left").astype(np.int64)
