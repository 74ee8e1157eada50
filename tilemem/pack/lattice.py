"""The lattice of left-justified placements: the step their addresses are multiples of.

Shared by the exact search (which rounds capacities and window ends down to it) and CP-SAT
(which aligns variables to it, ``tilemem.pack.cpsat.lattice_alignment``).
"""
from __future__ import annotations

import numpy as np


def grain(size, lo, align, ils, elem_starts) -> int:
    """A step ``g`` such that if anything fits below a capacity ``C``, something fits below
    ``C // g * g``: a left-justified placement (what the search looks for) has offsets built
    from sizes, window starts, element / region boundaries and alignment only, so its end is
    a multiple of their gcd (an alignment that neither divides nor is a multiple of ``g``
    brings ``g`` down to their gcd). The search rounds capacities and window ends down to it.
    """
    if len(size) == 0:
        return 1
    vals = np.concatenate([size, lo, [ils], elem_starts[1:-1]]).astype(np.int64)
    return aligned_grain(int(np.gcd.reduce(vals)), align)


def aligned_grain(g: int, align) -> int:
    """``g`` brought down to its gcd with every alignment that neither divides nor is a
    multiple of it (see ``grain``); at least 1.

    >>> aligned_grain(32, np.array([4, 16])), aligned_grain(32, np.array([12]))
    (32, 4)
    """
    g = max(int(g), 1)
    for a in np.unique(align).tolist():
        if g % a and a % g:
            g = int(np.gcd(g, a))
    return g
