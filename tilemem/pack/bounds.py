"""Lower bounds on the highest end address of a tile's allocation with nothing overflowed.

No allocation that fits ends below any of them, so a result that meets their maximum is
optimal (``tilemem.pack.portfolio``), and the exact methods start their bisection there.

- ``tile_bounds``: the maximum live bytes of each tile (``tilemem.liveness.max_live_all``:
  always-live bytes plus the heaviest clique of interfering classes), from the report;
- ``window_bound``: the highest window start plus size (an interleaved variable cannot end
  below interleavedMemoryStart plus its size);
- ``region_bound``: interleavedMemoryStart plus the heaviest clique of the variables confined
  to the interleaved region (``region_clique``: with the clique's size);
- ``simple_bound``: a greedy clique of the problem alone, for callers without a report.
"""
from __future__ import annotations

import numpy as np

from ..liveness.graphalg import max_weight_clique
from ..liveness import max_live_all
from ..model import Report
from .problem import TileProblem


def tile_bounds(report: Report, tiles, time_limit: float = 10.0) -> dict[int, tuple[int, bool]]:
    """Maximum live bytes of each tile, ``tile -> (bytes, exact)``, from
    ``tilemem.liveness.max_live_all`` (one compiled pass over all tiles; ``time_limit`` is the
    budget of its searches for all tiles together)."""
    tiles = np.asarray(list(tiles), np.int64)
    if len(tiles) == 0:
        return {}
    return {m.tile: (int(m.max_live_bytes), bool(m.exact))
            for m in max_live_all(report, tiles, time_limit=time_limit)}


def window_bound(p: TileProblem) -> int:
    """The highest window start plus size: no allocation with nothing overflowed ends lower."""
    fits = p.lo + p.size <= p.hi
    return int((p.lo + p.size)[fits].max()) if fits.any() else 0


def region_bound(p: TileProblem, node_limit: int = 20_000) -> int:
    """``interleavedMemoryStart`` + the heaviest clique of the variables that must lie in the
    interleaved region: pairwise conflicting, they fit only in ``[ils, end)`` side by side.

    The maximum live bytes ignore where variables may go; on tiles with interleaved data this
    bound is often the higher one (0 when no variable is confined to the interleaved region).

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0, 0, 0], size=[100, 100, 8],
    ...     alignment=[16, 16, 4], offset=[0, 0, 0], category=["variable"] * 3,
    ...     eq_class=[0, 1, 2], interference=[[1], [0], []],
    ...     in_interleaved_mem=[True, True, False])
    >>> region_bound(TileProblem.from_report(r, 0))
    131272
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
    return ils + int(clique.weight), len(clique.members)


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
