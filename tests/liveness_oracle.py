"""Test helper for the liveness answers: the heaviest clique of a tile by brute force, written
from the definition (a set of pairwise interfering classes, plus the always-live bytes) and
sharing no code with ``tilemem.liveness``."""
from __future__ import annotations

import itertools

import numpy as np

from tilemem.model import Report


def brute_force(r: Report, size, allocated, tile: int, edges: set) -> int:
    """Heaviest set of pairwise interfering classes on ``tile`` (``edges``: class pairs, either
    order), counting the rows ``allocated`` with ``size``, plus its always-live bytes."""
    on = (r.tile == tile) & allocated
    al = int(size[on & r.always_live].sum())
    w = np.bincount(r.eq_class[on & ~r.always_live], size[on & ~r.always_live],
                    minlength=r.num_classes)
    present = [c for c in range(r.num_classes) if w[c] > 0]
    best = 0
    for k in range(1, len(present) + 1):
        for s in itertools.combinations(present, k):
            if all((a, b) in edges or (b, a) in edges for a, b in itertools.combinations(s, 2)):
                best = max(best, int(w[list(s)].sum()))
    return al + best
