"""Overlap of step segments: which classes share a program step (the model's interference of
lifetimes, used by the generator and the MiniMalloc importer)."""
from __future__ import annotations

import numpy as np

from . import Csr, symmetric_closure


def overlap_relation(num_classes: int, cls: np.ndarray, start: np.ndarray,
                     end: np.ndarray) -> Csr:
    """Symmetric relation "some segment of a overlaps some segment of b", ``a != b``.

    Segments sorted by start: segment ``i`` overlaps exactly the later-sorted segments that
    start before it ends, a contiguous run found by one ``searchsorted``; the pairs are
    expanded with ``np.repeat`` (cost proportional to the number of overlapping pairs).

    >>> overlap_relation(3, np.array([0, 1, 2, 0]), np.array([0, 2, 5, 8]),
    ...                  np.array([3, 6, 7, 9])).to_lists()
    [[1], [0, 2], [1]]
    """
    order = np.argsort(start, kind="stable")
    s, e, c = start[order], end[order], cls[order]
    hi = np.searchsorted(s, e, side="left")
    count = np.maximum(hi - np.arange(len(s)) - 1, 0)
    src = np.repeat(np.arange(len(s)), count)
    first = np.zeros(len(s) + 1, np.int64)
    np.cumsum(count, out=first[1:])
    dst = src + 1 + (np.arange(len(src)) - first[src])
    return symmetric_closure(num_classes, c[src], c[dst])
