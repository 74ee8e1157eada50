"""A tile problem with its addresses reversed, so that a bottom-up packer fills memory from
the top down (``mirror``).

Why: the compiled search (``tilemem.pack.search``) places variables from the lowest address
up, so the part of memory it packs first is the part where it packs best. On a tile whose
interleaved region is as full as the tile (the heaviest interleaved clique nearly reaches the
bound), the tight part is at the top: bottom-up descents spend the slack on the
non-interleaved region first, and then strand a few interleaved variables. Reversed, the
interleaved region is the bottom, and the same descents pack it first. Neither direction is
better on every tile, so the quick search tries both
(``tilemem.pack.quick.quick_search``). It is the address-space counterpart of
reading a program's time backwards (``benchmarks/minimalloc.py``'s mirrored column).

The mirror of ``p``: with ``top`` = tileMemory rounded up to a multiple of every alignment, a
variable at mirrored offset ``o'`` lies at ``top - o' - size'`` in ``p``, where ``size'`` is
its size rounded up to its alignment (so that the reversed offset is aligned too; a zero-size
variable counts as one byte, as the search has it). Windows, element starts and the region
boundary are reversed the same way. A capacity ``C`` of ``p`` is a *floor* of the mirror:
nothing in ``p`` ends above ``C`` when every mirrored placement starts at or above
``top - C``. The mirrored problem is the same for every capacity (built once per problem,
with its search arrays; only the floor changes from probe to probe). Each mirrored placement
is a placement of ``p`` (the rounded sizes only cover more bytes), but not the other way
round: "nothing fits in the mirror" proves nothing about ``p``.

>>> from tilemem.model import Report
>>> from tilemem.model.target import Target
>>> t = Target(num_tiles=1, tile_memory=64, interleaved_memory_start=32,
...            memory_element_offsets=[0, 16, 32, 48])
>>> r = Report.from_columns(target=t, var_id=[0, 1], tile=[0, 0], size=[8, 6],
...     alignment=[8, 4], offset=[0, 0], category=["variable"] * 2, eq_class=[0, 1],
...     interference=[[1], [0]], in_interleaved_mem=[True, False])
>>> p = TileProblem.from_report(r, 0)
>>> m = mirror(p, 40)
>>> m.top, m.floor, m.problem.size.tolist(), m.problem.lo.tolist(), m.problem.hi.tolist()
(64, 24, [8, 8], [0, 0], [32, 64])
>>> m.problem.target.interleaved_memory_start, m.problem.target.memory_element_offsets.tolist()
(32, [0, 16, 32, 48])
>>> m.to_original(np.array([24, 32])).tolist()        # the interleaved one at the top
[32, 24]
>>> m.to_original(np.array([24, -1])).tolist()        # -1 (unplaced) stays -1
[32, -1]
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, replace

import numpy as np

from .problem import TileProblem


@dataclass(frozen=True)
class Mirror:
    """``problem``: the mirrored problem (its tileMemory is ``top``, its sizes rounded);
    ``floor``: where its placements must start for ``p``'s to end at or below the capacity
    asked for."""

    problem: TileProblem
    top: int
    floor: int = 0

    def to_original(self, offsets: np.ndarray) -> np.ndarray:
        """Mirrored offsets as offsets of the original problem (-1, unplaced, kept)."""
        off = np.asarray(offsets, np.int64)
        return np.where(off >= 0, self.top - off - self.problem.size, -1)

    def from_original(self, offsets: np.ndarray) -> np.ndarray:
        """Offsets of the original problem reversed (not necessarily legal in the mirror:
        for ordering, e.g. a hint)."""
        return self.top - np.asarray(offsets, np.int64) - self.problem.size


def mirror(p: TileProblem, cap: int) -> Mirror | None:
    """``p`` reversed, its placements to end at or below ``cap`` (see the module's
    docstring); None when ``cap`` reaches past tileMemory (the overflow zone has no mirror:
    it is open upwards). The same mirrored problem object for every ``cap`` of ``p`` (so its
    search arrays are built once)."""
    cap = int(cap)
    if cap > p.capacity:
        return None
    for ref, m in _CACHE:
        if ref() is p:
            break
    else:
        m = _reversed(p)
        _CACHE.insert(0, (weakref.ref(p), m))
        del _CACHE[8:]
    return replace(m, floor=max(m.top - cap, 0))


#: The last few problems' mirrors (weak references: a problem's mirror lives as long as it).
_CACHE: list = []


def _reversed(p: TileProblem) -> Mirror:
    align = np.asarray(p.align, np.int64)
    unit = int(np.lcm.reduce(np.unique(align))) if len(align) else 1
    top = -(-int(p.capacity) // unit) * unit
    size = -(-np.maximum(p.size.astype(np.int64), 1) // align) * align
    t = p.target
    starts = t.memory_element_offsets.astype(np.int64)
    starts = np.unique(np.concatenate([[0], top - starts[(starts > 0) & (starts < top)]]))
    ils = t.interleaved_memory_start
    target = replace(t, tile_memory=int(top), memory_element_offsets=starts,
                     interleaved_memory_start=int(top - min(ils, top)))
    lo = top - np.minimum(p.hi.astype(np.int64), top)
    hi = top - p.lo.astype(np.int64)
    return Mirror(replace(p, size=size, lo=lo, hi=hi, target=target), int(top))
