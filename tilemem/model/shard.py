"""A report kept to some of its tiles (one IPU's, say): what a worker that solves only those
tiles has to build, and nothing more.

``restrict(report, tiles)`` keeps the allocated variables of ``tiles`` (in report order, so a
tile's rows keep their order and its local offsets mean the same in both), the classes they
use (renumbered by rank: the order of class ids, which packers break ties by, is kept), the
interference pairs among those classes, their constraint lists, allocation orders and names.
The target and the tile numbering are the whole report's: tile ``t`` is tile ``t`` in both.
Every per-tile question (its problem, bound, conflicts) has the same answer on the shard.
``ipu_shard(report, k)`` is the shard of IPU ``k`` (its tiles: ``tile // tilesPerIPU == k``).

>>> from tilemem.model import MK1, Report
>>> r = Report.from_columns(target=MK1.with_tiles(4, tiles_per_ipu=2), var_id=range(5),
...     tile=[0, 2, 1, 3, 2], size=[4, 8, 4, 8, 16], alignment=[4] * 5, offset=[0] * 5,
...     category=["variable"] * 5, eq_class=[0, 5, 0, 7, 9],
...     interference=[[]] * 5 + [[9]] + [[]] * 3 + [[5]],
...     allocation_order=[[0], [2], [4, 1], [3]])
>>> s = ipu_shard(r, 1)
>>> s.var_id.tolist(), s.eq_class.tolist(), s.num_classes
([1, 3, 4], [0, 1, 2], 3)
>>> s.interference.to_lists(), s.tile_rows(2).tolist(), s.allocation_order.row(2).tolist()
([[2], [], [0]], [0, 2], [2, 0])
>>> ipu_shard(r, 0).names(), restrict(r, [0, 1, 2, 3]) is r
(['v0', 'v2'], True)
"""
from __future__ import annotations

import numpy as np

from . import Csr, Report
from ._tileorder import BLOCK as _BLOCK
from .ipuview import ROW_COLUMNS, gathered_names, tile_ordered


def ipu_tiles(report: Report, ipu: int) -> np.ndarray:
    """The tiles in use of IPU ``ipu``."""
    used = report.tiles_in_use()
    return used[report.target.ipu_of(used) == int(ipu)]


def ipu_shard(report: Report, ipu: int) -> Report:
    """The shard of IPU ``ipu``: its tiles ``[ipu * tilesPerIPU, (ipu + 1) * tilesPerIPU)``;
    a one-IPU report is its own."""
    if report.target.num_ipus <= 1:
        return report
    per = report.target.ipu_tiles
    return restrict(report, np.arange(int(ipu) * per, min((int(ipu) + 1) * per,
                                                          report.num_tiles)))


def rows_of_tiles(report: Report, tiles) -> np.ndarray:
    """The allocated rows of ``tiles``, in report order. A report whose rows are ordered by
    (IPU, tile) (``tilemem.model.ipuview.tile_ordered``: what tilemem writes for several IPUs)
    has each tile's rows as a range; otherwise one pass over the tile column in blocks (no
    index of the whole report is built or kept, and a mapped column stays file pages)."""
    tiles = np.asarray(tiles, np.int64)
    if tile_ordered(report):
        kept = np.unique(tiles[(tiles >= 0) & (tiles < report.num_tiles)])
        parts = [report.tile_rows(int(t)) for t in kept]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)
    return _scanned_rows(report, tiles)


def _scanned_rows(report: Report, tiles: np.ndarray) -> np.ndarray:
    """``rows_of_tiles`` by a pass over the tile column in blocks (any row order)."""
    want = np.zeros(report.num_tiles + 1, bool)   # the last slot: tile -1 (unallocated)
    want[tiles[(tiles >= 0) & (tiles < report.num_tiles)]] = True
    tile, allocated = report.tile, report.allocated
    parts = []
    for s in range(0, len(tile), _BLOCK):
        t = np.asarray(tile[s:s + _BLOCK])
        hit = want[np.where((t >= 0) & (t < report.num_tiles), t, -1)]
        hit &= np.asarray(allocated[s:s + _BLOCK])
        parts.append(np.flatnonzero(hit) + s)
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def restrict(report: Report, tiles) -> Report:
    """The report kept to the allocated variables of ``tiles`` (see the module); the report
    itself when that is every allocated variable (nothing to build)."""
    tiles = np.unique(np.asarray(tiles, np.int64))
    rows = rows_of_tiles(report, tiles)
    if len(rows) == int(np.count_nonzero(report.allocated)):
        return report
    cols = {c: np.asarray(getattr(report, c))[rows] for c in ROW_COLUMNS}

    cls = cols["eq_class"]
    classes = np.unique(cls[cls >= 0])
    cols["eq_class"] = np.where(cls >= 0, np.searchsorted(classes, cls), -1).astype(np.int64)

    # a block of rows at a time: no byte index of every name of the shard
    name_bytes, name_offsets = gathered_names(report, rows)

    order_lengths = np.zeros(report.num_tiles, np.int64)
    kept_order = _kept(report.allocation_order, tiles, rows)
    order_lengths[tiles] = kept_order.lengths()
    steps = None if report.class_steps is None else np.asarray(report.class_steps)[classes]
    return Report(
        target=report.target, **cols, name_blob=name_bytes,
        name_offsets=name_offsets, categories=report.categories,
        element_constraints=_kept(report.element_constraints, rows, rows),
        region_constraints=_kept(report.region_constraints, rows, rows),
        interference=_kept(report.interference, classes, classes),
        allocation_order=Csr.from_lengths(order_lengths, kept_order.indices),
        class_steps=steps, interference_dropped=report.interference_dropped)


def _kept(csr: Csr, keep_rows: np.ndarray, keep_entries: np.ndarray) -> Csr:
    """Rows ``keep_rows`` of ``csr`` (in that order) with only the entries found in the sorted
    ``keep_entries``, each renumbered to its place there."""
    valid = keep_rows < csr.num_rows     # a row the relation does not reach: empty
    lengths, entries = csr.gather(keep_rows[valid])
    pos = np.searchsorted(keep_entries, entries)
    pos_c = np.minimum(pos, max(len(keep_entries) - 1, 0))
    found = ((pos < len(keep_entries)) & (keep_entries[pos_c] == entries)
             if len(keep_entries) else np.zeros(len(entries), bool))
    owner = np.repeat(np.flatnonzero(valid), lengths)
    return Csr.from_lengths(np.bincount(owner[found], minlength=len(keep_rows)),
                            pos_c[found])


def report_nbytes(report: Report) -> int:
    """Bytes of a report's columns and relations (what a shard holds; a mapped column counts
    its length though the kernel may drop its pages)."""
    total = len(report.name_blob)
    for v in vars(report).values():
        if isinstance(v, np.ndarray):
            total += v.nbytes
        elif isinstance(v, Csr):
            total += v.indptr.nbytes + v.indices.nbytes
    return total
