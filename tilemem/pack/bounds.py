"""Lower bounds on the highest end address of a tile's allocation with nothing overflowed.

No allocation that fits ends below any of them, so a result that meets their maximum is
optimal (``tilemem.pack.portfolio``), and the exact methods start their bisection there.

- ``tile_bounds``: the maximum live bytes of each tile (``tilemem.liveness.max_live_all``:
  always-live bytes plus the heaviest clique of interfering classes), from the report, and
  that clique's bytes plus the padding its alignments force (``alignment_padding``);
- ``window_bound``: the highest window start plus size (an interleaved variable cannot end
  below interleavedMemoryStart plus its size);
- ``region_bound``: interleavedMemoryStart plus the heaviest clique of the variables confined
  to the interleaved region and the padding their alignments force (``region_clique``: with
  the clique's size);
- ``simple_bound``: a greedy clique of the problem alone, for callers without a report.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..liveness.graphalg import max_weight_clique
from ..liveness import max_live_all
from ..model import Report
from ..rules import effective_alignment
from .kinds import DEFAULTS
from .problem import TileProblem


class TileBound(NamedTuple):
    """A tile's lower bounds from the report: ``bytes`` its maximum live bytes (``exact``:
    proven maximum; else the weight of a clique found, still a lower bound), ``padded``
    those bytes plus the padding their alignments force (``alignment_padding``): a bound on
    the end address proven on the ``padded_vars`` variables of that clique."""

    bytes: int
    exact: bool
    padded: int
    padded_vars: int

    @staticmethod
    def of(value) -> "TileBound":
        """``value`` as a ``TileBound``: a plain ``(bytes, exact)`` pair (a caller's own
        bound) carries no padding, so its padded bound is its bytes, proven on nothing.

        >>> TileBound.of((64, True))
        TileBound(bytes=64, exact=True, padded=64, padded_vars=0)
        """
        if isinstance(value, TileBound):
            return value
        b, exact = value[:2]
        return TileBound(int(b), bool(exact), int(b), 0)


def tile_bounds(report: Report, tiles, time_limit: float = DEFAULTS.time_limit) -> dict[int, TileBound]:
    """Lower bounds of each tile, ``tile -> TileBound``: its maximum live bytes from
    ``tilemem.liveness.max_live_all`` (one compiled pass over all tiles; ``time_limit`` is the
    budget of its searches for all tiles together), and the same clique's bytes with the
    padding its alignments force."""
    tiles = np.asarray(list(tiles), np.int64)
    if len(tiles) == 0:
        return {}
    return {m.tile: bound_of(report, m)
            for m in max_live_all(report, tiles, time_limit=time_limit)}


def bound_of(report: Report, m) -> TileBound:
    """The ``TileBound`` of a tile from its ``tilemem.liveness.MaxLive`` ``m``: the
    variables live at its peak (``m.peak_rows``) conflict pairwise, so their bytes plus
    the padding their alignments force are a bound on the end address."""
    rows = m.peak_rows
    pad = alignment_padding(report.size[rows], effective_alignment(report.alignment[rows]))
    return TileBound(int(m.max_live_bytes), bool(m.exact), int(m.max_live_bytes) + pad,
                     len(rows))


def alignment_padding(size, align) -> int:
    """Bytes that any placement of pairwise conflicting variables (``size``, effective
    ``align``, powers of two) must leave between them: they lie one above another, so the
    highest ends at least ``size.sum()`` plus this above the lowest start.

    Why it holds, for each modulus ``M`` (8, 16, ... up to the largest alignment): a variable
    aligned to ``M`` or more starts at 0 mod ``M``. One whose size is not a multiple of ``M``
    (a *breaker*) ends at ``size % M``, so before the next variable aligned to ``M`` above it
    there must be bytes totalling ``-size % M`` (mod ``M``): the gap, or variables of the set
    aligned to less than ``M`` whose sizes are not multiples of ``M`` (*restorers*, counted as
    if each set one breaker right for free; a zero-size one too, whatever the rule makes of
    it). Every breaker but the highest needs that, so with ``b`` breakers and ``r``
    restorers at least ``b - 1 - r`` of them pay in gap bytes, at least ``-size % M`` each:
    the bound adds the ``b - 1 - r`` smallest such amounts. The moduli are not added (one gap
    may serve several); the largest is the bound. Regions, elements and windows only add to
    it. (tests: brute force over every placement of small sets.)

    Where variables aligned to 16 have sizes of 8 mod 16 (interleaved data) and those aligned
    to 8 sizes of 4 mod 8, with few variables aligned to 4 to fill the gaps, the padding at
    the peak is tens of bytes.

    >>> alignment_padding([24, 24, 24], [16, 16, 16])    # at 0, 32, 64: ends at 88 = 72 + 16
    16
    >>> alignment_padding([24, 24, 24, 8], [16, 16, 16, 8])   # the 8 fills one gap
    8
    >>> alignment_padding([20, 20, 20], [8, 8, 8])   # at 0, 24, 48: ends at 68 = 60 + 8
    8
    >>> alignment_padding([20, 20, 20], [8, 8, 4])   # at 0, 20 (aligned to 4), 40: no gap
    0
    """
    size = np.asarray(size, np.int64)
    align = np.asarray(align, np.int64)
    if len(size) < 2:
        return 0
    best = 0
    m = 8
    top = int(align.max())
    while m <= top:
        broken = (align >= m) & (size % m != 0) & (size > 0)
        needs = np.sort(-size[broken] % m)
        restorers = int((((align < m) & (size % m != 0)) | (size == 0)).sum())
        k = len(needs) - 1 - restorers
        if k > 0:
            best = max(best, int(needs[:k].sum()))
        m *= 2
    return best


def window_bound(p: TileProblem) -> int:
    """The highest window start plus size: no allocation with nothing overflowed ends lower."""
    fits = p.lo + p.size <= p.hi
    return int((p.lo + p.size)[fits].max()) if fits.any() else 0


def region_bound(p: TileProblem, node_limit: int = 20_000) -> int:
    """``interleavedMemoryStart`` + the heaviest clique of the variables that must lie in the
    interleaved region + the padding their alignments force (``alignment_padding``; bytes of
    other variables between them count as much as a gap): pairwise conflicting, they fit only
    in ``[ils, end)`` one above another.

    The maximum live bytes ignore where variables may go; on tiles with interleaved data this
    bound is often the higher one (0 when no variable is confined to the interleaved region).

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0, 0, 0], size=[100, 100, 8],
    ...     alignment=[16, 16, 4], offset=[0, 0, 0], category=["variable"] * 3,
    ...     eq_class=[0, 1, 2], interference=[[1], [0], []],
    ...     in_interleaved_mem=[True, True, False])
    >>> region_bound(TileProblem.from_report(r, 0))   # 100 % 16 = 4: 12 bytes before the other
    131284
    """
    return region_clique(p, node_limit)[0]


def region_clique(p: TileProblem, node_limit: int = 20_000) -> tuple[int, int]:
    """``(region_bound(p), the number of variables in its clique)``: the bound is a proof on
    that many variables (a tile whose bound exceeds tileMemory cannot fit because of them)."""
    ils = p.target.interleaved_memory_start
    sub = np.flatnonzero((p.lo >= ils) & (p.lo + p.size <= p.hi))
    if len(sub) == 0:
        return 0, 0
    indptr, indices = p.conflicts.conflict_csr(sub, sort=True)
    clique = max_weight_clique(indptr, indices, p.size[sub], node_limit=node_limit)
    # a real clique's weight: valid even when not proven maximum
    members = sub[clique.members]
    pad = alignment_padding(p.size[members], p.align[members])
    return ils + int(clique.weight) + pad, len(clique.members)


def simple_bound(p: TileProblem) -> tuple[int, bool]:
    """A valid lower bound on the highest end address of any allocation with nothing
    overflowed: the heaviest clique found greedily in the conflict graph (always-live bytes
    plus mutually interfering classes). ``exact`` is False (a greedy clique is not proven
    maximum). The driver uses ``tile_bounds`` instead; this is for callers of ``solve_tile``
    without a report.

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=range(4), tile=[0] * 4, size=[10, 20, 30, 5],
    ...     alignment=[4] * 4, offset=[0] * 4, category=["variable"] * 4,
    ...     eq_class=[0, 1, 2, 3], interference=[[1], [0], [], []], always_live=[0, 0, 0, 1])
    >>> simple_bound(TileProblem.from_report(r, 0))
    (35, False)
    """
    if p.n == 0:
        return 0, True
    c = p.conflicts
    al = c.always_live.astype(bool)
    size = p.size.astype(np.int64)
    nc = len(c.classes)
    w = np.bincount(c.local_class[~al], weights=size[~al], minlength=nc).astype(np.int64)

    def interfering(a: int) -> np.ndarray:  # the classes interfering with a (not a itself)
        row = np.zeros(nc, bool)
        row[c.class_adj.row(a)] = True
        return row

    best = 0
    for seed in np.argsort(-w, kind="stable")[:64]:
        total = w[seed]
        cand = interfering(seed) & (w > 0)
        while cand.any():
            k = int(np.argmax(np.where(cand, w, -1)))
            total += w[k]
            cand &= interfering(k)
        best = max(best, int(total))
    return int(size[al].sum()) + best, False
