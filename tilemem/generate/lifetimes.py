"""Lifetimes of the program's tensors, equivalence classes and their interference.

A tensor is live on the program steps between its definition and each use, following the
control flow (steps are numbered in listing order, ranges are half-open):

- straight-line code: ``[define, use + 1)``;
- a use inside a Repeat body of a tensor defined before the loop: the value must survive every
  iteration, so it is live to the end of the body;
- a use inside the body *before* the definition (a loop-carried value, e.g. a recurrent
  state): live over the whole body;
- a use in the else-branch of an If/Else of a tensor defined before the If: the then-branch
  never runs on that path, so the value is *not* live there: ``[define, then_start)`` and
  ``[else_start, use + 1)``.

A lifetime is therefore a short list of segments. Equivalence classes are the distinct
lifetimes (004: "variables that have the same lifetime are grouped into sets called equivalence
classes"); two classes interfere when their lifetimes share a step. Because of the If/Else
rule the interference graph is not an interval graph: a class live around an If but not in its
then-branch does not interfere with the then-branch's temporaries although its hull
(``equivalenceClassSteps``) covers them.

>>> segments = live_segments(2, [9], loops=[], branches=[(4, 6, 6, 10)])
>>> segments                          # defined before the If, used only in the else-branch
[(2, 4), (6, 10)]
>>> live_segments(2, [5], loops=[(3, 8)], branches=[])   # extended to the end of the loop
[(2, 8)]
>>> live_segments(6, [4], loops=[(3, 8)], branches=[])   # loop-carried
[(3, 8)]
"""
from __future__ import annotations

import numpy as np

from ..model import Csr
from ..model.overlap import overlap_relation


def live_segments(define: int, uses, loops, branches) -> list[tuple[int, int]]:
    """Merged ``[start, end)`` step segments where a value is live."""
    segs = [(define, define + 1)]
    for u in uses:
        if u < define:  # read before written: carried over from the previous iteration
            inner = [(a, b) for a, b in loops if a <= u and define < b]
            if inner:
                a, b = min(inner, key=lambda ab: ab[1] - ab[0])
                segs.append((a, b))
            else:
                segs.append((u, define + 1))
            continue
        path = [(define, u + 1)]
        for ts, te, es, ee in branches:
            if es <= u < ee and define < ts:      # skips the then-branch
                path = [(define, ts), (es, u + 1)]
            elif ts <= define < te and u >= ee:   # leaves the then-branch, skips the else
                path = [(define, te), (ee, u + 1)]
        for a, b in loops:
            if define < a <= u < b:               # survives every iteration
                path = [(define, b)]
        segs.extend(path)
    return merge(segs)


def merge(segs) -> list[tuple[int, int]]:
    """Union of half-open segments, touching ones joined.

    >>> merge([(5, 7), (0, 2), (2, 3), (6, 9)])
    [(0, 3), (5, 9)]
    """
    out: list[list[int]] = []
    for a, b in sorted(segs):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out if b > a]


class Lifetimes:
    """Distinct lifetimes as classes: ``segments`` CSR-like (``seg_ptr``, ``seg_start``,
    ``seg_end``) over class ids, and the class of every keyed item.

    >>> lt = Lifetimes()
    >>> lt.class_of([(0, 3)]), lt.class_of([(2, 5)]), lt.class_of([(0, 3)]), lt.class_of([(4, 6)])
    (0, 1, 0, 2)
    >>> lt.interference().to_lists()
    [[1], [0, 2], [1]]
    >>> lt.hulls().tolist()
    [[0, 3], [2, 5], [4, 6]]
    """

    def __init__(self):
        self._ids: dict = {}
        self._segs: list = []

    def class_of(self, segments, key=None) -> int:
        """Class id of a lifetime (``key`` separates classes with equal segments)."""
        k = (tuple(segments), key)
        c = self._ids.get(k)
        if c is None:
            c = self._ids[k] = len(self._segs)
            self._segs.append(tuple(segments))
        return c

    @property
    def num_classes(self) -> int:
        return len(self._segs)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(seg_ptr, seg_start, seg_end)``: the segments of class ``c`` are
        ``seg_ptr[c]:seg_ptr[c + 1]``."""
        lengths = np.fromiter(map(len, self._segs), np.int64, count=len(self._segs))
        ptr = np.zeros(len(self._segs) + 1, np.int64)
        np.cumsum(lengths, out=ptr[1:])
        flat = np.array([ab for s in self._segs for ab in s], np.int64).reshape(-1, 2)
        return ptr, flat[:, 0].copy(), flat[:, 1].copy()

    def hulls(self) -> np.ndarray:
        """``(num_classes, 2)`` ``[first step, last step + 1)``: ``equivalenceClassSteps``."""
        ptr, start, end = self.arrays()
        if len(start) == 0:
            return np.zeros((0, 2), np.int64)
        return np.stack([np.minimum.reduceat(start, ptr[:-1]),
                         np.maximum.reduceat(end, ptr[:-1])], axis=1)

    def interference(self) -> Csr:
        """Classes sharing a step, from one sort of all segments (no loop over class pairs)."""
        ptr, start, end = self.arrays()
        cls = np.repeat(np.arange(self.num_classes), np.diff(ptr))
        return overlap_relation(self.num_classes, cls, start, end)
