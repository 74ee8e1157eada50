"""The packers' one guard of the placement rules, compiled with numba.

The rules (``tilemem.rules``; FACTS.md) on the local offsets of one tile, a zero-size variable
counting as one byte (the strictest reading):

- every offset is aligned; a variable *in memory* (offset below ``tileMemory``) lies in its
  window ``[lo, hi)`` and, under ``rules.no_region_span``, wholly in one region; past
  ``tileMemory`` (overflowed) only alignment and no-overlap apply;
- conflicting variables share no byte (``tilemem.liveness.conflicts_with``, the liveness
  stage's one conflict test), overflowed or not;
- element (region) partners, both in memory, touch no common memory element (region).

Every packer reads them from here, in two forms: as lower bounds for the constructive packers
(``lowest_legal``: the rules of one variable; ``bound_after``: the lowest offset of a variable
placed above a partner ending at ``top``; ``element_of``) and as the check every solver's
result passes before it is accepted (``self_check``). ``tilemem.check`` is the independent
rulebook: it shares none of this code.

>>> from tilemem.model import Report
>>> from tilemem.pack.problem import TileProblem
>>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0] * 3, size=[8, 8, 4],
...     alignment=[4] * 3, offset=[0] * 3, category=["variable"] * 3,
...     eq_class=[0, 0, 1], interference=[[], []], element_constraints=[[2], [], []])
>>> p = TileProblem.from_report(r, 0)
>>> self_check(p, np.array([0, 4, 16384]))   # vars 0 and 1: one class, overlapping
False
>>> self_check(p, np.array([0, 8, 0]))       # var 2 in the element of its partner var 0
False
>>> self_check(p, np.array([0, 8, 16384]))   # var 2 one element higher
True
>>> self_check(p, np.array([0, 8, 16384]), capacity=16384)   # var 2 ends past 16384
False
"""
from __future__ import annotations

import numpy as np
from ..jit import njit

from ..liveness import clear_row, conflict_row, conflicts_with
from ..liveness.sorting import argsort
from .problem import TileProblem

#: "No such offset" in the search's arrays (above any address).
INF = np.int64(1) << np.int64(60)

#: Kinds of interaction between two variables, as bits: conflict (no shared byte), element
#: partners, region partners.
K_CONFLICT, K_ELEMENT, K_REGION = 1, 2, 4


@njit(cache=True, inline="always")
def align_up(x, a):
    if a & (a - 1) == 0:  # a power of two (every alignment in practice): no division
        return (x + a - 1) & -a
    return (x + a - 1) // a * a


@njit(cache=True, inline="always")
def lowest_legal(x, size, align, lo, hi, ils, no_span):
    """Lowest offset at or above ``x`` that keeps the rules of one variable in memory (window
    ``[lo, hi)``, alignment, no region span), or -1 when there is none."""
    if x < lo:
        x = lo
    x = align_up(x, align)
    if no_span and x < ils < x + size:
        x = align_up(ils, align)
    if x + size > hi:
        return -1
    return x


@njit(cache=True, inline="always")
def element_of(bounds, addr):
    """The memory element holding byte ``addr`` (``bounds``: element starts, then
    ``tileMemory``, as from ``element_bounds``)."""
    # a binary search by hand: np.searchsorted here costs a reference count on ``bounds``
    # at every call, in the search's innermost loops (a quarter of its time on Mk2 tiles)
    lo = 0
    hi = len(bounds)
    while lo < hi:  # the first bound above addr
        mid = (lo + hi) >> 1
        if bounds[mid] <= addr:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


@njit(cache=True, inline="always")
def bound_after(kind, top, bounds, ils):
    """Lowest offset of a variable placed at or above the start of one ending at ``top`` that
    it interacts with (``kind`` bits): above it (conflict), past its last element (element
    partners), past its last region (region partners; ``INF`` when that is the interleaved
    one). Contiguous ranges that share no element, the later starting no lower, are ordered
    so: this is the whole pair rule."""
    b = top if kind & K_CONFLICT else 0
    if kind & K_ELEMENT:
        x = bounds[element_of(bounds, top - 1) + 1]
        if x > b:
            b = x
    if kind & K_REGION:
        x = ils if top - 1 < ils else INF
        if x > b:
            b = x
    return b


def element_bounds(p: TileProblem) -> np.ndarray:
    """The element starts of ``p``'s target followed by ``tileMemory`` (int64)."""
    return element_bounds_of(p.target)


def element_bounds_of(t) -> np.ndarray:
    """The element starts of target ``t`` followed by ``tileMemory`` (int64)."""
    return np.append(t.memory_element_offsets.astype(np.int64), t.tile_memory)


def self_check(p: TileProblem, offsets: np.ndarray, capacity: int | None = None) -> bool:
    """True when local ``offsets`` keep every rule of ``p`` (the packers' own guard against a
    solver bug; ``tilemem.check`` is the independent checker). With ``capacity``, also every
    variable in memory, ending at or below ``capacity``."""
    off = np.asarray(offsets, np.int64)
    if off.shape != (p.n,) or p.n == 0:
        return off.shape == (p.n,)
    t = p.target
    hi = p.hi.astype(np.int64)
    if capacity is not None:
        hi = np.minimum(hi, int(capacity))
    e = np.asarray(p.element_pairs, np.int64).reshape(-1, 2)
    g = np.asarray(p.region_pairs, np.int64).reshape(-1, 2)
    kind = np.concatenate([np.full(len(e), K_ELEMENT, np.int64),
                           np.full(len(g), K_REGION, np.int64)])
    pairs = np.concatenate([e, g])
    return bool(_offsets_ok(off, np.maximum(p.size, 1).astype(np.int64),
                            p.align.astype(np.int64), p.lo.astype(np.int64), hi,
                            np.int64(t.tile_memory), np.int64(t.interleaved_memory_start),
                            bool(p.rules.no_region_span), capacity is not None,
                            p.conflicts.arrays, pairs[:, 0].copy(), pairs[:, 1].copy(), kind,
                            element_bounds(p)))


@njit(cache=True)
def _offsets_ok(off, size, align, lo, hi, tm, ils, no_span, in_memory, conflicts, pair_i,
                pair_j, pair_kind, bounds):
    n = len(off)
    for i in range(n):
        o = off[i]
        if o < 0 or o % align[i] != 0:
            return False
        if o >= tm:
            if in_memory:
                return False
            continue
        if lowest_legal(o, size[i], align[i], lo[i], hi[i], ils, no_span) != o:
            return False
    # no-overlap: sweep the variables by offset, each against the ones starting inside it
    lclass, always, matrix = conflicts.local_class, conflicts.always_live, conflicts.class_matrix
    cptr, cidx = conflicts.class_ptr, conflicts.class_idx
    scratch = np.zeros(len(cptr) - 1, np.bool_)
    order = argsort(off)
    for a in range(n):
        i = order[a]
        end = off[i] + size[i]
        row = conflict_row(lclass[i], matrix, cptr, cidx, scratch)
        for b in range(a + 1, n):
            j = order[b]
            if off[j] >= end:
                break
            if conflicts_with(always[i], row, always[j], lclass[j]):
                return False
        clear_row(lclass[i], matrix, cptr, cidx, scratch)
    for e in range(len(pair_i)):
        i = pair_i[e]
        j = pair_j[e]
        if off[i] >= tm or off[j] >= tm:
            continue
        if off[j] < off[i]:
            i, j = j, i
        if off[j] < bound_after(pair_kind[e], off[i] + size[i], bounds, ils):
            return False
    return True
