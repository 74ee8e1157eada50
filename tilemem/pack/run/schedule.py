"""What the passes of a packing run share besides the plan (``tilemem.pack.run.plan``): the
order of exact work (``_exact_priority``), runs of neighbouring tiles (``_runs``), where a
capacity question may stop (``_fit_end``) and how well a tile did (``_standing``).
"""
from __future__ import annotations

from ..bounds import TileBound
from .scoreboard import may_fit as _may_fit


def _exact_priority(res, tile_memory: int) -> tuple:
    """Sort key of the exact stage: where exact effort matters most comes first.

    First the tiles that overflow although their bound fits in memory (an exact allocation may
    make them fit: the question a user with an out-of-memory tile asks), fewest overflowed bytes
    first (the likeliest to be closed); then every other tile by its gap to the bound, largest
    first (on a tile whose live data alone exceeds memory, lowering the end lowers the overflow
    by as much).

    >>> from tilemem.pack.result import TileResult
    >>> def r(over, gap, bound=90):
    ...     return TileResult(tile=0, method="heuristic", status="heuristic",
    ...                       overflow_bytes=over, total_including_gaps=0, bound=bound,
    ...                       bound_exact=True, gap=gap, seconds=0.0)
    >>> keys = [_exact_priority(x, 100) for x in (r(0, 0.05), r(8, 0.2), r(4, 0.1),
    ...                                            r(50, 0.3, bound=140))]
    >>> sorted(range(4), key=keys.__getitem__)
    [2, 1, 3, 0]
    """
    if _may_fit(res, tile_memory):
        return (0, res.overflow_bytes, 0.0)
    return (1, 0, -res.gap)


def _runs(tiles: list[int], place: dict[int, int], reach: int, chain: int) -> list[list[int]]:
    """``tiles`` cut into runs of neighbours, in tile order: each tile at most ``reach``
    places after the one before it in ``place`` (the tiles' order), at most ``chain`` a run.

    >>> _runs([15, 1, 3, 9, 2, 16], {t: t for t in range(20)}, reach=2, chain=16)
    [[1, 2, 3], [9], [15, 16]]
    """
    runs: list[list[int]] = []
    for t in sorted(tiles, key=place.__getitem__):
        if runs and 0 < place[t] - place[runs[-1][-1]] <= reach and len(runs[-1]) < chain:
            runs[-1].append(t)
        else:
            runs.append([t])
    return runs



def _fit_end(bound: TileBound, tile_memory: int) -> int | None:
    """Under ``Goal.FIT``, the end address at which a tile's search may stop: tileMemory,
    where its bound fits (an allocation ending there fits); None where it cannot fit."""
    return tile_memory if bound[0] <= tile_memory else None


def _standing(res) -> tuple[bool, float]:
    """How well a tile did, lower is better: overflowed or not, then its gap."""
    return (res.overflow_bytes > 0, res.gap)
