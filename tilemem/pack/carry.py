"""An allocation carried over from a similar tile (``carry_over``).

A program's tensors are spread over neighbouring tiles in equal slices (Poplar's
``calcLinearTileMapping`` and its kin), so two neighbouring tiles hold nearly the same
variables: the same tensors (names equal once Poplar's ``#tile`` suffix is removed), sizes and
equivalence classes, hence the same conflicts among them. On the generated Mk2 reports
99.5 % or more of a tile's variables have such a twin on the next tile. An allocation found for
one tile is then a good start for its neighbour, often better than anything the neighbour's
own first tenth of a second finds, and it costs one first fit.

How: every variable of the tile is matched to a variable of the donor tile, in three rounds,
each on the ones still unmatched: the same tensor, equivalence class, size and placement
flags; the same tensor, class and flags (a slice of another size); the same tensor and flags.
Within a round, equal keys are paired in the order of the variables. The tile is then placed
by first fit (``tilemem.pack.firstfit``) in the order of its twins' offsets, the variables
without a twin last, largest first (or, the better of the two, first). First fit in the order
of a valid allocation's offsets puts every variable at or below its offset there when the
conflicts are the same, so a tile identical to its donor gets an allocation that ends no
higher than the donor's; where they differ, first fit keeps every rule, and the result passes
the guard (``self_check``) or is not returned.

>>> from tilemem.model import Report
>>> from tilemem.pack.problem import TileProblem
>>> r = Report.from_columns(var_id=range(6), tile=[0, 0, 0, 1, 1, 1],
...     size=[8, 8, 4, 8, 8, 6], alignment=[4] * 6, offset=[0] * 6,
...     category=["variable"] * 6, eq_class=[0, 1, 2, 0, 1, 2],
...     interference=[[1], [0], []], names=["a#0", "b#0", "c#0", "a#1", "b#1", "c#1"])
>>> donor = np.array([8, 0, 0])       # b below a; c shares bytes with both
>>> carry_over(r, 0, donor, TileProblem.from_report(r, 1)).tolist()
[8, 0, 0]
"""
from __future__ import annotations

import numpy as np

from ..model import Report
from ..model.names import tensor_keys
from .firstfit import first_fit
from .guard import self_check
from .problem import TileProblem
from .result import objective


#: How a result whose allocation was carried over begins its note.
CARRIED = "carried over from tile"


def carry_over(report: Report, donor_tile: int, donor_offsets: np.ndarray,
               p: TileProblem) -> np.ndarray | None:
    """Local offsets for ``p``'s tile, carried over from ``donor_offsets`` (the local
    offsets of ``donor_tile`` in ``report``): first fit in the order of the matched
    variables' offsets there. ``None`` when nothing matches or the result fails the guard."""
    donor_rows = report.tile_rows(int(donor_tile))
    donor_offsets = np.asarray(donor_offsets, np.int64)
    if p.n == 0 or len(donor_rows) != len(donor_offsets) or len(donor_rows) == 0:
        return None
    twin = match_twins(report, donor_rows, p.rows)
    matched = twin >= 0
    if not matched.any():
        return None
    at = donor_offsets[twin[matched]]
    mine = np.flatnonzero(matched)
    mine = mine[np.argsort(at, kind="stable")]
    rest = np.flatnonzero(~matched)
    rest = rest[np.argsort(-p.size[rest], kind="stable")]
    # the variables without a twin last (they take what room is left), and first too when
    # one of them, placed last, ends highest: one whose element partners already sit in
    # every memory element below the top lands in a new element above it all. Otherwise
    # that second first fit rarely did better.
    last = _checked(p, first_fit(p, np.concatenate([mine, rest])))
    if not len(rest) or (last is not None and not _on_top(p, last, rest)):
        return last
    first = _checked(p, first_fit(p, np.concatenate([rest, mine])))
    if last is None or (first is not None and objective(p, first) < objective(p, last)):
        return first
    return last


def _checked(p: TileProblem, off: np.ndarray) -> np.ndarray | None:
    """``off`` when it passes the guard, else None."""
    return off if self_check(p, off) else None


def _on_top(p: TileProblem, off: np.ndarray, some: np.ndarray) -> bool:
    """Does one of the variables ``some`` end at the highest end address of ``off``?"""
    end = off + p.size
    return bool(end[some].max() >= end.max())


def match_twins(report: Report, donor_rows: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each of ``rows``, the index into ``donor_rows`` of its twin, or -1: the same
    tensor, class, size and flags first, then the same tensor, class and flags, then the
    same tensor and flags; each donor variable is the twin of at most one.

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=range(5), tile=[0, 0, 1, 1, 1], size=[4, 8, 8, 4, 4],
    ...     alignment=[4] * 5, offset=[0] * 5, category=["variable"] * 5,
    ...     eq_class=[0, 0, 0, 0, 0], interference=[[]],
    ...     names=["x#0", "y#0", "y#1", "x#1", "x#1"])
    >>> match_twins(r, r.tile_rows(0), r.tile_rows(1)).tolist()
    [1, 0, -1]
    """
    donor_rows = np.asarray(donor_rows, np.int64)
    rows = np.asarray(rows, np.int64)
    both = np.concatenate([donor_rows, rows])
    codes = tensor_keys(report)[both]   # cached on the report: comparable across tiles
    flags = (report.in_interleaved_mem[both].astype(np.int64)
             | report.executable[both].astype(np.int64) << 1
             | report.vertex_code[both].astype(np.int64) << 2
             | report.always_live[both].astype(np.int64) << 3
             | report.lowest_256kb[both].astype(np.int64) << 4)
    cls = report.eq_class[both].astype(np.int64)
    size = report.size[both].astype(np.int64)
    nd = len(donor_rows)
    twin = np.full(len(rows), -1, np.int64)
    taken = np.zeros(nd, bool)
    for key in ((codes, cls, size, flags), (codes, cls, flags), (codes, flags)):
        a = np.flatnonzero(~taken)           # donor variables still free
        b = np.flatnonzero(twin < 0)         # this tile's variables still unmatched
        if len(a) == 0 or len(b) == 0:
            break
        ia, ib = _pair_equal_keys([k[a] for k in key], [k[nd + b] for k in key])
        twin[b[ib]] = a[ia]
        taken[a[ia]] = True
    return twin


def _pair_equal_keys(ka: list[np.ndarray], kb: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Indices ``(ia, ib)`` pairing the items of two lists of keys (columns ``ka``, ``kb``):
    the k-th item of a key in ``a`` with the k-th item of the same key in ``b``.

    >>> ia, ib = _pair_equal_keys([np.array([5, 7, 5])], [np.array([5, 5, 5, 9])])
    >>> ia.tolist(), ib.tolist()
    ([0, 2], [0, 1])
    """
    na, nb = len(ka[0]), len(kb[0])
    cols = [np.concatenate([x, y]) for x, y in zip(ka, kb)]
    side = np.r_[np.zeros(na, np.int64), np.ones(nb, np.int64)]
    idx = np.arange(na + nb)
    # sorted by key, then side, then position: each key's items of ``a`` then of ``b``
    # (one lexsort; ``np.unique(axis=0)`` sorted a structured view, several times slower)
    order = np.lexsort([idx, side] + cols[::-1])
    diff = np.zeros(len(order), bool)
    diff[0] = True
    for c in cols:
        sc = c[order]
        diff[1:] |= sc[1:] != sc[:-1]
    group = np.cumsum(diff) - 1
    s = side[order]
    start = diff.copy()
    start[1:] |= s[1:] != s[:-1]
    first = np.maximum.accumulate(np.where(start, np.arange(len(order)), 0))
    rank = np.arange(len(order)) - first   # position among its key's items of its side
    # the k-th of ``a`` with the k-th of ``b`` of the same key
    pair_key = group * (len(order) + 1) + rank
    in_a = s == 0
    _, pa_, pb_ = np.intersect1d(pair_key[in_a], pair_key[~in_a], assume_unique=True,
                                 return_indices=True)
    return order[in_a][pa_], order[~in_a][pb_] - na
