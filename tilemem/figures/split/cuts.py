"""Where a split's stages begin: the split of a program's units into ``n`` contiguous
stages whose largest upper bound (``SplitModel.proxy``: all of a stage's bytes live at once)
is smallest (``balanced_cuts``), and the boundaries a report compiled over several IPUs
already has (``source_cuts``), which every split of it keeps.

Why keep them: a report keeps interference only between classes that share a tile
(``rules.INFERRED_INTERFERENCE_WITHIN_TILE``), so a stage joining layers of two of its IPUs
would be estimated as if their classes never lived together, under the program compiled.

>>> class Units:   # a stand-in for ``SplitModel``: a stage's bound is its units' sum
...     L, w = 6, [3, 1, 1, 1, 1, 3]
...     def proxy(self, s, i, j, n): return sum(self.w[i:j])
>>> balanced_cuts(Units(), 2), balanced_cuts(Units(), 3, fixed=[1])
([3], [1, 5])
"""
from __future__ import annotations

import numpy as np

from .cross import cut_grid


def source_cuts(m) -> list[int]:
    """The units where the report's own IPUs begin (each unit on the IPU holding most of its
    bytes, ``unit_ipu_bytes``; a unit without bytes on its predecessor's): ``[]`` for
    a one-IPU report (``m``: a ``SplitModel``)."""
    if m.source_ipus <= 1:
        return []
    per = unit_ipu_bytes(m, m.r)
    held = per.sum(axis=1) > 0
    # each unit without bytes takes the IPU of the last unit before it that has some
    last = np.maximum.accumulate(np.where(held, np.arange(m.L), 0))
    ipu = per.argmax(axis=1)[last]
    return [int(k) for k in np.flatnonzero(np.diff(ipu) != 0) + 1]


def unit_ipu_bytes(m, r) -> np.ndarray:
    """Each unit's bytes on each of the report's IPUs (``(L, IPUs)``; ``m``: a ``SplitModel``;
    ``r``: the report ``m`` was made of, or its fold ``m.r``, whose rows are the same): where the report put each
    unit, the IPU holding most of it."""
    n, u = m.source_ipus, m.units.of_row
    have = (u >= 0) & r.allocated
    return np.bincount(u[have] * n + m.ipu_of_row[have], r.size[have],
                       minlength=m.L * n).reshape(m.L, n)


def balanced_cuts(m, n: int, fixed=()) -> list[int]:
    """The split of ``m``'s units into ``n`` contiguous stages whose largest upper bound
    (``SplitModel.proxy``: all of a stage's bytes live at once) is smallest: bisection on that
    bound, each stage filled greedily under it. No stage's bound is computed (a whole Mk2
    report's take seconds each, and the search asks for many splits); the levers then bring
    the chosen split's stages under tileMemory. Cuts fall on ``cut_grid``'s boundaries:
    every unit's of a model of a few hundred units, evenly spaced ones of a larger one.
    ``fixed``: boundaries that must be cuts (``_segmented_cuts``), when ``n`` stages can keep
    them all."""
    L = m.L
    fixed = sorted({int(x) for x in fixed if 0 < int(x) < L})
    if fixed and len(fixed) < n:
        return _segmented_cuts(m, n, fixed)
    g = [int(x) for x in cut_grid(L, n)]
    G = len(g) - 1

    def greedy(cap):
        cuts, a = [], 0
        for s in range(n - 1):
            b = a + 1
            while b < G - (n - 1 - s) and m.proxy(s, g[a], g[b + 1], n) <= cap:
                b += 1
            if m.proxy(s, g[a], g[b], n) > cap:
                return None
            cuts.append(g[b])
            a = b
        return cuts if m.proxy(n - 1, g[a], L, n) <= cap else None

    return _smallest_bound(greedy, 2 * m.proxy(0, 0, L, n) + 1,
                           [round(k * L / n) for k in range(1, n)])


def _smallest_bound(greedy, hi: float, fallback):
    """What ``greedy(cap)`` gives at the smallest ``cap`` in ``[0, hi]`` it succeeds at
    (bisection, 30 steps; ``fallback`` when it never does)."""
    lo, best = 0.0, fallback
    for _ in range(30):
        mid = (lo + hi) / 2
        got = greedy(mid)
        if got is None:
            lo = mid
        else:
            hi, best = mid, got
    return best


def _segmented_cuts(m, n: int, fixed: list[int]) -> list[int]:
    """``balanced_cuts`` keeping every boundary of ``fixed`` a cut (fewer than ``n - 1`` of
    them): the fewest stages under the bisection's bound filled greedily segment by
    segment, then the heaviest stage split in two until there are ``n`` (a stage's stash
    never grows when a later one is added: its depth counts the stages after it)."""
    L = m.L
    g = sorted({int(x) for x in cut_grid(L, n)} | set(fixed))
    ends = [g.index(x) for x in fixed + [L]]

    def greedy(cap):
        stages, a = [], 0
        for e in ends:
            while a < e:
                if len(stages) >= n:
                    return None
                b = a + 1
                s = len(stages)
                while b < e and m.proxy(s, g[a], g[b + 1], n) <= cap:
                    b += 1
                if m.proxy(s, g[a], g[b], n) > cap:
                    return None
                stages.append((a, b))
                a = b
        return stages

    stages = list(_smallest_bound(greedy, 2 * max(m.proxy(0, 0, L, n), 1.0),
                                  greedy(float("inf")) or [(0 if k == 0 else ends[k - 1], e)
                                                           for k, e in enumerate(ends)]))
    while len(stages) < n:
        # the heaviest stage of more than one grid step, split where the worse half is least
        k = max((k for k, (a, b) in enumerate(stages) if b - a > 1),
                key=lambda k: m.proxy(k, g[stages[k][0]], g[stages[k][1]], n), default=None)
        if k is None:
            break
        a, b = stages[k]
        c = min(range(a + 1, b), key=lambda c: max(m.proxy(k, g[a], g[c], n),
                                                   m.proxy(k + 1, g[c], g[b], n)))
        stages[k:k + 1] = [(a, c), (c, b)]
    return [g[b] for _, b in stages[:-1]]
