"""Rows ordered by (IPU, tile), and one IPU of a report as a view.

A report's row order carries no meaning of its own (``rules.INFERRED_ROW_ORDER_FREE``): a variable is named by its ``var``
id, the allocation order is the separate ``allocationOrderByTile``, and constraints name var
ids. So the writers may order the rows as they like, and tilemem's order a report of several
IPUs by tile (stable: within a tile the order they had), the variables that are not allocated
last (``order_by_tile``; a one-IPU report is its own slice and is written as it is). Tiles are numbered IPU by IPU, so one IPU's variables are then one run of
rows in every column, and ``ipu_view`` gives that IPU as a ``Report`` whose columns are slices
of the whole report's (a mapped file's columns stay views of the file).

Whether a report is so ordered is told by reading its tile column once, in blocks
(``tile_ordered``): no flag in the file to trust or keep in step, and a report from elsewhere
(Poplar writes its variables in its own order) is simply not ordered. Commands that go IPU by
IPU (``ipu_parts``) then take views of an ordered report and a gathered copy of one IPU at a
time of any other.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterator

import numpy as np

from . import Csr, Report
from .target import Target
from ._tileorder import allocated_prefix as _allocated_prefix, ordered as _ordered


def tile_ordered(r: Report) -> bool:
    """True when the allocated rows come first, in non-decreasing tile order, and the rest
    (not allocated) after them. Read in blocks; the answer is kept with the report."""
    return r.cached("ipuview.ordered", lambda: _ordered(r.tile, r.allocated))


def tile_order(r: Report) -> np.ndarray:
    """The row permutation that orders ``r`` by tile (stable; rows not allocated last)."""
    key = np.where(r.allocated, r.tile, np.iinfo(np.int64).max)
    return np.argsort(key, kind="stable")


def order_by_tile(r: Report) -> Report:
    """``r`` with its rows ordered by (IPU, tile) (``tile_order``); ``r`` itself when it
    already is. Var ids go with their rows, so the report is the same report: the same
    variables, constraints (remapped to the new rows) and allocation order."""
    if tile_ordered(r):
        return r
    perm = tile_order(r)
    new_row = np.empty(len(perm), np.int64)
    new_row[perm] = np.arange(len(perm))

    def rows(csr: Csr) -> Csr:   # a CSR over rows, whose entries are rows
        lengths = csr.lengths()[perm]
        starts = csr.indptr[:-1][perm]
        idx = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
        idx += np.arange(int(lengths.sum()))
        return Csr.from_lengths(lengths, new_row[csr.indices[idx]])

    blob, offsets = gathered_names(r, perm)
    cols = {f: getattr(r, f)[perm] for f in ROW_COLUMNS}
    out = replace(r, **cols, name_blob=blob, name_offsets=offsets,
                  element_constraints=rows(r.element_constraints),
                  region_constraints=rows(r.region_constraints),
                  allocation_order=Csr(r.allocation_order.indptr,
                                       new_row[r.allocation_order.indices]),
                  _tile_index=None, _cache={})
    out._cache["ipuview.ordered"] = True
    return out


#: The per-variable columns (one row a variable), taken for the rows a view or shard keeps.
ROW_COLUMNS = ("var_id", "tile", "size", "alignment", "offset", "category", "eq_class",
                "allocated", "is_constant", "always_live", "executable", "vertex_code",
                "lowest_256kb", "in_interleaved_mem")


def gathered_names(r: Report, rows: np.ndarray, block: int = 1 << 18, prefix: bytes = b""):
    """The names of ``rows`` in that order, each after ``prefix``: one blob and its offsets.
    Gathered a block of rows at a time: the byte index of a block, not of every name (8
    bytes a name byte).

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0, 1], tile=[0, 0], size=[4, 4], alignment=[4, 4],
    ...     offset=[0, 4], category=["variable"] * 2, eq_class=[0, 1],
    ...     interference=[[], []], names=["a#0", "bb#0"])
    >>> gathered_names(r, np.array([1, 0]), prefix=b"p/")
    (b'p/bb#0p/a#0', array([ 0,  6, 11]))
    """
    offs = r.name_offsets
    blob = np.frombuffer(r.name_blob, np.uint8)
    pre = np.frombuffer(prefix, np.uint8)
    out_offsets = np.zeros(len(rows) + 1, np.int64)
    pieces = []
    for a in range(0, len(rows), block):
        rw = rows[a:a + block]
        starts = np.asarray(offs[rw], np.int64)
        lengths = np.asarray(offs[rw + 1], np.int64) - starts
        np.cumsum(lengths + len(pre), out=out_offsets[a + 1:a + 1 + len(rw)])
        out_offsets[a + 1:a + 1 + len(rw)] += out_offsets[a]
        before = np.cumsum(lengths) - lengths     # where each name starts among the names
        take = np.repeat(starts - before, lengths) + np.arange(int(lengths.sum()))
        if not len(pre):
            pieces.append(blob[take].tobytes())
            continue
        at = out_offsets[a:a + len(rw)] - out_offsets[a]   # where each starts in the piece
        piece = np.empty(int(lengths.sum()) + len(pre) * len(rw), np.uint8)
        piece[(at[:, None] + np.arange(len(pre))).reshape(-1)] = np.tile(pre, len(rw))
        piece[np.repeat(at + len(pre) - before, lengths)
              + np.arange(int(lengths.sum()))] = blob[take]
        pieces.append(piece.tobytes())
    return b"".join(pieces), out_offsets


def ipu_bounds(r: Report) -> np.ndarray:
    """``num_ipus + 1`` row bounds of an ordered report: IPU ``k``'s allocated variables are
    rows ``bounds[k]:bounds[k + 1]``; rows from ``bounds[-1]`` on are not allocated."""
    if not tile_ordered(r):
        raise ValueError("the report's rows are not ordered by tile (order_by_tile)")

    def make():
        n_alloc = _allocated_prefix(r.allocated)
        edges = np.arange(r.target.num_ipus + 1, dtype=np.int64) * r.target.ipu_tiles
        return np.searchsorted(r.tile[:n_alloc], edges, side="left").astype(np.int64)
    return r.cached("ipuview.bounds", make)


def ipu_view(r: Report, k: int) -> Report:
    """IPU ``k`` of an ordered report as a ``Report``: its allocated variables (the columns
    are slices, not copies), the whole report's target, tile numbers and class ids (its
    classes are the classes of those variables; the interference is the whole report's,
    shared, which a tile of this IPU reads only at its own classes), constraints and
    allocation order rebased to the view's rows (one IPU's entries).

    ``var_id`` keeps the report's ids, so results name the same variables."""
    b = ipu_bounds(r)
    if not 0 <= k < len(b) - 1:
        raise ValueError(f"IPU {k} of {len(b) - 1}")
    lo, hi = int(b[k]), int(b[k + 1])
    cols = {f: getattr(r, f)[lo:hi] for f in ROW_COLUMNS}
    T, tpi = r.num_tiles, r.target.ipu_tiles
    t0, t1 = min(k * tpi, T), min((k + 1) * tpi, T)
    order = r.allocation_order
    p0, p1 = int(order.indptr[t0]), int(order.indptr[t1])
    indptr = np.concatenate((np.zeros(t0, np.int64), order.indptr[t0:t1 + 1] - p0,
                             np.full(T - t1, p1 - p0, np.int64)))
    view = replace(r, **cols, name_offsets=r.name_offsets[lo:hi + 1],
                   element_constraints=_rebased(r.element_constraints, lo, hi),
                   region_constraints=_rebased(r.region_constraints, lo, hi),
                   allocation_order=Csr(indptr, order.indices[p0:p1] - lo),
                   _tile_index=None, _cache={})
    view._cache["ipuview.ordered"] = True
    for key in SHARED_CACHE:   # the relation is the whole report's: what was made of it holds
        if key in r._cache:
            view._cache[key] = r._cache[key]
    return view


#: What a report keeps made of its class relation and class steps alone (not of its rows),
#: which a view, sharing both, shares too instead of making again from the whole Pod's
#: (``steps_consistent``: a pass over the whole relation, once a report, not once an IPU).
SHARED_CACHE = ("sorted_interference", "tile_interference", "steps_consistent")


def _rebased(csr: Csr, lo: int, hi: int) -> Csr:
    """Rows ``lo:hi`` of a CSR over rows whose entries are rows, renumbered from ``lo``.
    Constraints join variables of one tile (a memory element is a tile's), so entries stay in
    the slice; any that leave it (another IPU's variable) are left out of the view."""
    a, z = int(csr.indptr[lo]), int(csr.indptr[hi])
    indptr, indices = csr.indptr[lo:hi + 1] - a, csr.indices[a:z] - lo
    inside = (indices >= 0) & (indices < hi - lo)
    if inside.all():
        return Csr(indptr, indices)
    row = np.repeat(np.arange(hi - lo), np.diff(indptr))
    return Csr.from_lengths(np.bincount(row[inside], minlength=hi - lo), indices[inside])


def ipu_parts(r: Report):
    """``(k, view)`` for every IPU ``k``: ``ipu_view`` of an ordered report, else a gathered
    copy of that IPU's rows (a report from elsewhere), one at a time."""
    if tile_ordered(r):
        for k in range(r.target.num_ipus):
            yield k, ipu_view(r, k)
        return
    tpi = r.target.ipu_tiles
    for k in range(r.target.num_ipus):
        yield k, _gathered(r, np.flatnonzero(r.allocated & (r.tile // tpi == k)))


def _gathered(r: Report, rows: np.ndarray) -> Report:
    """The report restricted to ``rows`` (ascending, all allocated, one IPU's), as a copy."""
    return order_by_tile(_take(r, rows))


def _take(r: Report, rows: np.ndarray) -> Report:
    n = r.num_vars
    new_row = np.full(n, -1, np.int64)
    new_row[rows] = np.arange(len(rows))

    def cons(csr: Csr) -> Csr:
        lengths = csr.lengths()[rows]
        starts = csr.indptr[:-1][rows]
        idx = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
        idx += np.arange(int(lengths.sum()))
        entries = new_row[csr.indices[idx]]
        inside = entries >= 0   # a constraint to another IPU's variable: not in this part
        row = np.repeat(np.arange(len(rows)), lengths)
        return Csr.from_lengths(np.bincount(row[inside], minlength=len(rows)), entries[inside])

    names, name_offsets = gathered_names(r, rows)
    order = r.allocation_order
    keep = new_row[order.indices] >= 0
    tile_of_entry = order.row_ids()[keep]
    out = replace(r, **{f: getattr(r, f)[rows] for f in ROW_COLUMNS}, name_blob=names,
                  name_offsets=name_offsets, element_constraints=cons(r.element_constraints),
                  region_constraints=cons(r.region_constraints),
                  allocation_order=Csr.from_lengths(
                      np.bincount(tile_of_entry, minlength=order.num_rows),
                      new_row[order.indices[keep]]),
                  _tile_index=None, _cache={})
    for key in SHARED_CACHE:   # the same relation
        if key in r._cache:
            out._cache[key] = r._cache[key]
    return out


def passes(r: Report):
    """The reports a per-tile pass goes over to cover ``r``: its IPUs' views when it spans
    several IPUs and is ordered (one IPU's temporaries at a time), else ``r`` itself (a
    gathered copy of each IPU would cost more than the whole-column pass it saves)."""
    if r.target.num_ipus > 1 and tile_ordered(r):
        for k in range(r.target.num_ipus):
            yield ipu_view(r, k)
    else:
        yield r


@dataclass(frozen=True)
class IpuPieces:
    """A report made one IPU at a time (``tilemem.generate``'s ``by_ipu``): ``pieces``
    iterates, in IPU order, one ``Report`` an IPU holding that IPU's rows (numbered from 0,
    in the order the whole report has them), their constraints and allocation order, and the
    interference pairs of classes that share one of its tiles (over all ``num_classes``
    classes); the report's relation is the union of the pieces'. ``save_report`` writes it
    so, holding one piece at a time."""

    target: Target
    num_classes: int
    class_steps: np.ndarray | None
    categories: tuple[str, ...]
    pieces: Iterator[Report]
