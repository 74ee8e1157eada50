"""Partial reports: the dump of only the worst out-of-memory tiles.

Poplar's engine option ``debug.loweredVarDumpNumOOMTiles`` (FACTS.md, "Partial reports";
its meaning is inferred from its name) limits the lowered-variables dump to a number of
out-of-memory tiles: the report keeps ``numTiles`` and its geometry but holds the variables of
those tiles only. ``keep_worst_oom_tiles`` makes such a report from a whole one, so that every
command can be tried on one (``tilemem generate --partial K``).

>>> from tilemem.model import Report
>>> from tilemem.model.target import Target
>>> t = Target(3, 256, 128, np.array([0, 64, 128, 192]))
>>> r = Report.from_columns(target=t, var_id=[5, 6, 7, 8], tile=[0, 1, 2, 2],
...     size=[300, 64, 200, 100], alignment=[4] * 4, offset=[0, 0, 0, 200],
...     category=["variable"] * 4, eq_class=[0, 0, 1, 2], interference=[[], [2], [1]])
>>> p = keep_worst_oom_tiles(r, 1)       # tile 2 is 44 bytes over, tile 0 is 44 over too
>>> p.num_tiles, p.var_id.tolist(), p.tiles_in_use().tolist()
(3, [5], [0])
>>> keep_worst_oom_tiles(r, 5).var_id.tolist()      # only out-of-memory tiles are dumped
[5, 7, 8]
"""
from __future__ import annotations

import numpy as np

from ..model import Report


def worst_oom_tiles(r: Report, k: int) -> np.ndarray:
    """Up to ``k`` tiles whose report offsets pass tileMemory, most over first (ties: lower
    tile first)."""
    a = r.allocated
    high = np.zeros(r.num_tiles, np.int64)
    np.maximum.at(high, r.tile[a], r.offset[a] + r.size[a])
    over = np.flatnonzero(high > r.target.tile_memory)
    return over[np.argsort(-high[over], kind="stable")][:k]


def keep_worst_oom_tiles(r: Report, k: int) -> Report:
    """The report as Poplar would dump it limited to its ``k`` worst out-of-memory tiles:
    same target, classes and interference; the variables of those tiles only (their
    constraints and allocation order kept)."""
    keep_tiles = worst_oom_tiles(r, k)
    rows = np.flatnonzero(np.isin(r.tile, keep_tiles) & (r.tile >= 0))
    ids = r.var_id

    def lists(csr):
        return [ids[csr.row(int(i))].tolist() for i in rows.tolist()]

    kept = np.zeros(r.num_tiles, bool)
    kept[keep_tiles] = True
    order = [ids[r.allocation_order.row(t)].tolist() if kept[t] else []
             for t in range(r.allocation_order.num_rows)]
    return Report.from_columns(
        target=r.target, var_id=ids[rows], tile=r.tile[rows], size=r.size[rows],
        alignment=r.alignment[rows], offset=r.offset[rows],
        category=[r.categories[c] for c in r.category[rows].tolist()],
        eq_class=r.eq_class[rows], interference=r.interference,
        names=[r.name(int(i)) for i in rows.tolist()], allocated=r.allocated[rows],
        is_constant=r.is_constant[rows], always_live=r.always_live[rows],
        executable=r.executable[rows], vertex_code=r.vertex_code[rows],
        lowest_256kb=r.lowest_256kb[rows], in_interleaved_mem=r.in_interleaved_mem[rows],
        element_constraints=lists(r.element_constraints),
        region_constraints=lists(r.region_constraints),
        allocation_order=order if r.allocation_order.num_rows else None,
        class_steps=r.class_steps)
