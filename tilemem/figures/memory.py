"""Memory figures of an allocation, in the graph profile's ``memory`` format (000).

For a report and an allocation (its own offsets, or any offset column), per tile:

- ``byTile`` (000, "Memory per tile"), the 8 arrays. A *region* is non-interleaved
  ``[0, interleavedMemoryStart)``, interleaved ``[interleavedMemoryStart, tileMemory)`` or
  overflowed ``[tileMemory, ...)`` (``tilemem.rules``: the overflow zone). Definitions (000 states
  no formula; the first column of its example satisfies these):

  * ``<region>`` = bytes of the region covered by at least one variable (variables that share
    bytes count once);
  * ``<region>IncludingGaps`` = from the region's start to the highest end of a variable in it
    (0 for an empty region);
  * ``total`` = interleaved + nonInterleaved + overflowed;
  * ``totalIncludingGaps`` = the highest end address used on the tile (so it also counts the
    unused space between regions).

- ``byCategory`` (000, "Memory by category"): for every category and region, per tile,
  ``nonOverlapped`` = bytes of variables that share no byte with another variable, and
  ``overlapped`` = bytes of variables that do (summed per variable, as in the profile summary's
  "Overlapped" block, 002); ``total`` = the sum over regions of both. A variable's bytes are
  split between regions by address.
- ``afterOverlapping``: per region and tile, the bytes the overlapped variables really cover
  (the summary's "Total After Overlapping"). Invariant, per region and tile:
  ``sum of nonOverlapped over categories + afterOverlapping == byTile[region]``.
- ``gaps``: every free hole below the tile's highest end, cut at region boundaries, with its
  likely cause (``GAP_CAUSES``). Holes below a region's highest end are that region's gaps
  (``<region>IncludingGaps - <region>``); holes above it (the unused end of a region below a
  used one) are *boundary* gaps; all holes of a tile add up to ``totalIncludingGaps - total``.

All tiles at once: rows sorted by (tile, offset), one compiled sweep with a running maximum
of end addresses gives coverage, overlap and the per-tile sums (``_sweep_figures``), column
arithmetic the holes.

>>> from tilemem.model import Report
>>> from tilemem.model.target import MK1
>>> r = Report.from_columns(target=MK1.with_tiles(1), var_id=[0, 1, 2, 3],
...     tile=[0, 0, 0, 0], size=[100, 64, 32, 256], alignment=[4, 64, 4, 4],
...     offset=[0, 128, 160, 131072], category=["variable", "stack", "message", "variable"],
...     eq_class=[0, 1, 2, 3], interference=[[], [], [], []])
>>> f = memory_figures(r)
>>> {k: int(v[0]) for k, v in f.by_tile.items()}       # doctest: +NORMALIZE_WHITESPACE
{'interleaved': 256, 'interleavedIncludingGaps': 256, 'nonInterleaved': 164,
 'nonInterleavedIncludingGaps': 192, 'overflowed': 0, 'overflowedIncludingGaps': 0,
 'total': 420, 'totalIncludingGaps': 131328}
>>> int(f.overlapped_bytes().sum()), int(f.after_overlapping.sum())   # [128,192) and [160,192)
(96, 64)
>>> [(int(g.start), int(g.end), g.cause) for g in f.gap_list(0)]
[(100, 128, 'alignment'), (192, 131072, 'interleavedBoundary')]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import msgspec
import numpy as np
from ..jit import njit

from ..model import Report
from ..model.target import Target
from ..rules import effective_alignment

#: Regions in the order of the figures' arrays (the target's numbering, plus the overflow zone).
REGIONS = ("nonInterleaved", "interleaved", "overflowed")
NON_INTERLEAVED, INTERLEAVED, OVERFLOWED = 0, 1, 2

#: Likely causes of a gap, in the order of ``Gaps.cause`` codes.
GAP_CAUSES = (
    "alignment",            # the next variable could not start lower: its alignment
    "elementConstraint",    # moving the next variable down would share a memory element
                            # with a variable it has an element constraint with
    "regionConstraint",     # unused end of the non-interleaved region; a variable above is
                            # interleaved only because of a region constraint
    "interleavedBoundary",  # unused end of the non-interleaved region below data above it
    "memoryEnd",            # unused end of memory below overflowed data
    "fragmentation",        # none of the above: the hole was left by the packing order
)
(ALIGNMENT, ELEMENT_CONSTRAINT, REGION_CONSTRAINT, INTERLEAVED_BOUNDARY, MEMORY_END,
 FRAGMENTATION) = range(len(GAP_CAUSES))

#: The causes of boundary gaps (holes above their region's highest end).
BOUNDARY_CAUSES = (REGION_CONSTRAINT, INTERLEAVED_BOUNDARY, MEMORY_END)

class Gap(NamedTuple):
    tile: int
    region: str
    start: int
    end: int
    cause: str


@dataclass(frozen=True)
class Gaps:
    """Free holes below each tile's highest end, as columns (one entry per hole piece)."""

    tile: np.ndarray
    region: np.ndarray      # index into REGIONS
    start: np.ndarray
    end: np.ndarray
    cause: np.ndarray       # index into GAP_CAUSES

    @property
    def size(self) -> np.ndarray:
        return self.end - self.start

    def bytes_by_cause(self, num_tiles: int) -> np.ndarray:
        """``(len(GAP_CAUSES), num_tiles)`` gap bytes."""
        idx = self.cause.astype(np.int64) * num_tiles + self.tile
        return np.bincount(idx, weights=self.size, minlength=len(GAP_CAUSES) * num_tiles
                           ).astype(np.int64).reshape(len(GAP_CAUSES), num_tiles)

    def bytes_by_region(self, num_tiles: int, boundary: bool | None = None) -> np.ndarray:
        """``(3, num_tiles)`` gap bytes; ``boundary`` selects boundary (True) or in-region
        (False) gaps, ``None`` both."""
        keep = np.ones(len(self.tile), bool)
        if boundary is not None:
            keep = np.isin(self.cause, BOUNDARY_CAUSES) == boundary
        idx = self.region[keep].astype(np.int64) * num_tiles + self.tile[keep]
        return np.bincount(idx, weights=self.size[keep], minlength=3 * num_tiles
                           ).astype(np.int64).reshape(3, num_tiles)


@dataclass(frozen=True)
class MemoryFigures:
    """The memory figures of one allocation of a report (see the module docstring).

    ``region_bytes``, ``region_including_gaps``: ``(3, num_tiles)`` in ``REGIONS`` order.
    ``non_overlapped``, ``overlapped``: ``(len(categories), 3, num_tiles)``, only for the
    ``categories`` that have bytes (memory follows the data, not the report's category table);
    ``all_categories`` are every category of the report (the JSON lists each).
    ``after_overlapping``: ``(3, num_tiles)``.
    """

    target: Target
    categories: tuple[str, ...]
    region_bytes: np.ndarray
    region_including_gaps: np.ndarray
    highest_end: np.ndarray
    non_overlapped: np.ndarray
    overlapped: np.ndarray
    after_overlapping: np.ndarray
    gaps: Gaps
    all_categories: tuple[str, ...] = ()
    #: per tile: the report holds variables of it. A partial report (Poplar can limit its
    #: dump to the worst out-of-memory tiles, FACTS.md) lacks the others: they are "not in
    #: the dump", neither empty nor fitting (``tilemem.figures.summary.in_dump``)
    in_dump: np.ndarray | None = None

    @property
    def num_tiles(self) -> int:
        return self.target.num_tiles

    def dump_tiles(self) -> np.ndarray:
        """Tiles in the dump (all tiles with a variable of the report)."""
        if self.in_dump is None:
            return np.flatnonzero(self.highest_end > 0)
        return np.flatnonzero(self.in_dump)

    @property
    def partial(self) -> bool:
        """The report holds variables of only some of its tiles."""
        return len(self.dump_tiles()) < self.num_tiles

    @property
    def total(self) -> np.ndarray:
        return self.region_bytes.sum(axis=0)

    @property
    def total_including_gaps(self) -> np.ndarray:
        return self.highest_end

    @property
    def by_tile(self) -> dict[str, np.ndarray]:
        """The 8 arrays of 000's ``byTile``."""
        rb, ig = self.region_bytes, self.region_including_gaps
        return {
            "interleaved": rb[INTERLEAVED], "interleavedIncludingGaps": ig[INTERLEAVED],
            "nonInterleaved": rb[NON_INTERLEAVED],
            "nonInterleavedIncludingGaps": ig[NON_INTERLEAVED],
            "overflowed": rb[OVERFLOWED], "overflowedIncludingGaps": ig[OVERFLOWED],
            "total": self.total, "totalIncludingGaps": self.total_including_gaps,
        }

    def out_of_memory(self) -> np.ndarray:
        """Tiles whose highest end passes tileMemory, worst first."""
        excess = self.highest_end - self.target.tile_memory
        tiles = np.flatnonzero(excess > 0)
        return tiles[np.argsort(-excess[tiles], kind="stable")]

    def non_overlapped_bytes(self) -> np.ndarray:
        """``(3, num_tiles)``: bytes of variables that share no byte, all categories."""
        return self.non_overlapped.sum(axis=0)

    def overlapped_bytes(self) -> np.ndarray:
        """``(3, num_tiles)``: bytes of overlapped variables, summed per variable."""
        return self.overlapped.sum(axis=0)

    def category_totals(self) -> np.ndarray:
        """``(num_categories, num_tiles)``: the ``total`` of byCategory."""
        return (self.non_overlapped + self.overlapped).sum(axis=1)

    def gap_list(self, tile: int) -> list[Gap]:
        g = self.gaps
        idx = np.flatnonzero(g.tile == tile)
        return [Gap(int(tile), REGIONS[g.region[i]], int(g.start[i]), int(g.end[i]),
                    GAP_CAUSES[g.cause[i]]) for i in idx]

    # ---- output -----------------------------------------------------------------------------
    def to_json(self, holes: bool = True) -> "MemoryDocument":
        """``{"memory": {"byTile", "byCategory", "afterOverlapping", "gaps"}}``.

        ``byTile`` and ``byCategory`` have exactly the shape of the graph profile's (000);
        ``afterOverlapping`` and ``gaps`` are tilemem's additions.
        """
        zeros = [0] * self.num_tiles  # one list for every all-zero array

        def listed(a: np.ndarray) -> list:
            return a.tolist() if a.any() else zeros

        def pair(c, k):
            if c is None:
                return RegionPair(zeros, zeros)
            return RegionPair(listed(self.non_overlapped[c, k]), listed(self.overlapped[c, k]))

        totals = self.category_totals()
        index = {name: c for c, name in enumerate(self.categories)}
        # every category of the report is listed; only those with bytes have arrays
        by_category = {name: CategoryJson(pair(c, INTERLEAVED), pair(c, NON_INTERLEAVED),
                                          pair(c, OVERFLOWED),
                                          zeros if c is None else listed(totals[c]))
                       for name in dict.fromkeys(self.all_categories + self.categories)
                       for c in (index.get(name),)}
        a = self.after_overlapping
        after = ByRegionJson(listed(a[INTERLEAVED]), listed(a[NON_INTERLEAVED]),
                             listed(a[OVERFLOWED]), listed(a.sum(axis=0)))
        by_cause = self.gaps.bytes_by_cause(self.num_tiles)
        gaps = GapsJson({name: listed(by_cause[i]) for i, name in enumerate(GAP_CAUSES)})
        if holes:
            g = self.gaps
            gaps.holes = HolesJson(g.tile.tolist(), [REGIONS[k] for k in g.region.tolist()],
                                   g.start.tolist(), g.end.tolist(),
                                   [GAP_CAUSES[k] for k in g.cause.tolist()])
        by_tile = msgspec.convert({k: listed(v) for k, v in self.by_tile.items()}, ByTileJson)
        dump = self.dump_tiles().tolist() if self.partial else None
        return MemoryDocument(MemoryJson(by_tile, by_category, after, gaps, dump))


# ---- the JSON document: typed, keys in camel case ---------------------------------------------
class RegionPair(msgspec.Struct, rename="camel"):
    non_overlapped: list[int]
    overlapped: list[int]


class CategoryJson(msgspec.Struct, rename="camel"):
    interleaved: RegionPair
    non_interleaved: RegionPair
    overflowed: RegionPair
    total: list[int]


class ByRegionJson(msgspec.Struct, rename="camel"):
    interleaved: list[int]
    non_interleaved: list[int]
    overflowed: list[int]
    total: list[int]


class ByTileJson(msgspec.Struct, rename="camel"):
    """000's ``byTile``: the 8 arrays of ``MemoryFigures.by_tile``."""

    interleaved: list[int]
    interleaved_including_gaps: list[int]
    non_interleaved: list[int]
    non_interleaved_including_gaps: list[int]
    overflowed: list[int]
    overflowed_including_gaps: list[int]
    total: list[int]
    total_including_gaps: list[int]


class HolesJson(msgspec.Struct):
    tile: list[int]
    region: list[str]
    start: list[int]
    end: list[int]
    cause: list[str]


class GapsJson(msgspec.Struct, rename="camel", omit_defaults=True):
    by_cause: dict[str, list[int]]
    holes: HolesJson | None = None     # left out of the JSON when not asked for


class MemoryJson(msgspec.Struct, rename="camel", omit_defaults=True):
    by_tile: ByTileJson
    by_category: dict[str, CategoryJson]
    after_overlapping: ByRegionJson
    gaps: GapsJson
    #: tilemem's addition, on a partial report only: the tiles in the dump (the others'
    #: zeros mean "not in the dump", not "empty")
    tiles_in_dump: list[int] | None = None


class MemoryDocument(msgspec.Struct):
    memory: MemoryJson


# ---- computation ------------------------------------------------------------------------------
def memory_figures(r: Report, offsets: np.ndarray | None = None,
                   tiles=None) -> MemoryFigures:
    """The memory figures of ``offsets`` (default: the report's own allocation). ``tiles``
    limits the work to those tiles (the others read as empty).

    A report over several IPUs ordered by tile (``tilemem.model.ipuview``) is gone through
    IPU by IPU, each IPU's view with its slice of the offsets (every figure is a tile's, and
    a tile one IPU's): a Pod's temporaries are then one IPU's, not a dozen whole columns."""
    from ..model.ipuview import ipu_bounds, ipu_view, tile_ordered

    if tiles is None and r.target.num_ipus > 1 and tile_ordered(r):
        off = r.offset if offsets is None else np.asarray(offsets, np.int64)
        if off.shape == (r.num_vars,):
            b = ipu_bounds(r)
            parts = [_memory_figures(ipu_view(r, k), off[b[k]:b[k + 1]], None, True)
                     for k in range(r.target.num_ipus)]
            return _merged(r, parts)
    return _memory_figures(r, offsets, tiles, False)[0]


def _merged(r: Report, parts: list) -> MemoryFigures:
    """The figures of the IPUs' ``parts`` (``(figures with every category, the categories
    of its rows)``) as one report's: per tile arrays added (a tile is in one part), the
    categories of some part's rows kept, the holes in the order of the whole report's
    (tile, then address)."""
    nt = r.target.num_tiles
    add = {f: sum(getattr(p, f) for p, _ in parts) for f in
           ("region_bytes", "region_including_gaps", "highest_end", "non_overlapped",
            "overlapped", "after_overlapping")}
    used = np.unique(np.concatenate([found for _, found in parts]))
    for f in ("non_overlapped", "overlapped"):
        add[f] = add[f][used]
    g = [p.gaps for p, _ in parts]   # each by (tile, start): in IPU order, the whole's
    gaps = Gaps(**{f: np.concatenate([getattr(x, f) for x in g])
                   for f in ("tile", "region", "start", "end", "cause")})
    in_dump = np.zeros(nt, bool)
    in_dump[r.tiles_in_use()] = True
    return MemoryFigures(target=r.target, categories=tuple(r.categories[c] for c in used.tolist()),
                         all_categories=tuple(r.categories), **add, gaps=gaps, in_dump=in_dump)


def _memory_figures(r: Report, offsets, tiles, every_category: bool):
    """``(figures, the categories of their rows)``; ``every_category``: the figures' arrays
    for every category of the report (a part of a Pod's, merged by ``_merged``)."""
    t = r.target
    nt = t.num_tiles
    off = r.offset if offsets is None else np.asarray(offsets, np.int64)
    if tiles is None:
        rows = np.flatnonzero(r.allocated & (r.size > 0))
    else:
        rows = np.concatenate([r.tile_rows(int(k)) for k in tiles] + [np.zeros(0, np.int64)])
        rows = np.sort(rows[r.size[rows] > 0])
    unplaced = rows[off[rows] < 0]
    if len(unplaced):
        from ..errors import ReportError

        i = int(unplaced[0])
        raise ReportError(f"the allocation leaves {len(unplaced):,} variable(s) unplaced "
                          f"(negative offset)", field="offset", var=int(r.var_id[i]),
                          tile=int(r.tile[i]))
    align = effective_alignment(r.alignment[rows]).astype(np.int64)
    # (tile, start), largest alignment first among equal starts (for the alignment cause)
    order = _tile_start_order(r.tile[rows], off[rows], align)
    rows, align = rows[order], align[order]
    tile = r.tile[rows]
    start = off[rows]
    end = start + r.size[rows]
    bounds = np.array([0, t.interleaved_memory_start, t.tile_memory,
                       max(t.tile_memory, int(end.max()) if len(end) else 0) + 1], np.int64)

    # categories with bytes only (a count, not a sort: a handful of codes)
    present = np.bincount(r.category[rows], minlength=len(r.categories)) > 0
    found = np.flatnonzero(present)
    if every_category:   # a part of a report's figures: the merge keeps those with bytes
        present[:] = True
    used = np.flatnonzero(present)
    ncat = len(used)
    code = (np.cumsum(present) - 1)[r.category[rows]].astype(np.int64)
    (prev_end, region_bytes, highest_end, region_high, non_overlapped, overlapped,
     after) = _sweep_figures(tile, start, end, code, ncat, bounds, nt)

    gaps = _gaps(r, off, rows, tile, start, prev_end, align, bounds)
    in_dump = np.zeros(nt, bool)
    if not every_category:   # a part's tiles in use are its merge's to say
        in_dump[r.tiles_in_use()] = True
    return MemoryFigures(target=t, categories=tuple(r.categories[c] for c in used.tolist()),
                         all_categories=tuple(r.categories), region_bytes=region_bytes,
                         region_including_gaps=region_high, highest_end=highest_end,
                         non_overlapped=non_overlapped, overlapped=overlapped,
                         after_overlapping=after, gaps=gaps, in_dump=in_dump), found


@njit(cache=True)
def _sweep_figures(tile, start, end, code, ncat, bounds, nt):
    """One pass over rows sorted by (tile, start), all of positive size: ``(prev_end,
    region_bytes, highest_end, region_high, non_overlapped, overlapped, after)``.

    ``prev_end``: the highest end of the earlier rows of the row's tile (0 for its first);
    the bytes a row covers first are ``[max(start, prev_end), end)``, summed per region
    (``region_bytes``); a row is *overlapped* when it starts below ``prev_end`` or the next
    row of its tile starts below its end; its bytes per region go to ``overlapped`` or
    ``non_overlapped`` at ``[code, region, tile]``; ``after``: what the overlapped rows alone
    cover, per region (the same sweep over them). ``region_high``: per region the highest end
    of a row reaching into it, from the region's start. Compiled: at a Pod's tens of millions
    of rows, the column arithmetic's temporaries were most of the figures' time."""
    n = len(tile)
    prev_end = np.zeros(n, np.int64)
    region_bytes = np.zeros((3, nt), np.int64)
    highest_end = np.zeros(nt, np.int64)
    region_high = np.zeros((3, nt), np.int64)
    non_overlapped = np.zeros((ncat, 3, nt), np.int64)
    overlapped = np.zeros((ncat, 3, nt), np.int64)
    after = np.zeros((3, nt), np.int64)
    run = 0        # highest end so far on the tile
    run_over = 0   # the same over its overlapped rows
    for i in range(n):
        t = tile[i]
        if i == 0 or t != tile[i - 1]:
            run = 0
            run_over = 0
        s = start[i]
        e = end[i]
        prev_end[i] = run
        over = s < run or (i + 1 < n and tile[i + 1] == t and start[i + 1] < e)
        cover = max(s, run)
        cover_over = max(s, run_over)
        for k in range(3):
            lo = bounds[k]
            hi = bounds[k + 1]
            top = min(e, hi)
            part = top - max(cover, lo)
            if part > 0:
                region_bytes[k, t] += part
            part = top - max(s, lo)
            if part > 0:
                if over:
                    overlapped[code[i], k, t] += part
                else:
                    non_overlapped[code[i], k, t] += part
                if top - lo > region_high[k, t]:
                    region_high[k, t] = top - lo
            if over:
                part = top - max(cover_over, lo)
                if part > 0:
                    after[k, t] += part
        if e > run:
            run = e
        if over and e > run_over:
            run_over = e
        if e > highest_end[t]:
            highest_end[t] = e
    return prev_end, region_bytes, highest_end, region_high, non_overlapped, overlapped, after


def _tile_start_order(tile: np.ndarray, start: np.ndarray, align: np.ndarray) -> np.ndarray:
    """The stable order by (tile, start, largest alignment first): one sort of a combined key
    where the three fit in 63 bits (a Pod's tens of millions of rows: a lexsort of three
    keys took most of the figures' time), else ``np.lexsort``."""
    if not len(tile):
        return np.zeros(0, np.int64)
    bits = [int(x.max()).bit_length() for x in (tile, start, align)]
    if min(int(tile.min()), int(start.min()), int(align.min())) < 0 or sum(bits) > 63:
        return np.lexsort((-align, start, tile))
    bt, bs, ba = bits
    key = ((tile.astype(np.int64) << (bs + ba)) | (start.astype(np.int64) << ba)
           | (((1 << ba) - 1) - align.astype(np.int64)))
    return np.argsort(key, kind="stable")


def _gaps(r: Report, off, rows, tile, start, prev_end, align, bounds) -> Gaps:
    """Holes ``[prev_end, start)`` before each sorted row, cut at region boundaries."""
    ils, tm = int(bounds[1]), int(bounds[2])
    h = np.flatnonzero(start > prev_end)          # sorted index of the variable above the hole
    hs, he = prev_end[h], start[h]
    pieces = []
    for k in range(3):
        s = np.maximum(hs, bounds[k])
        e = np.minimum(he, bounds[k + 1])
        keep = e > s
        pieces.append((np.full(keep.sum(), k, np.int8), h[keep], s[keep], e[keep]))
    region = np.concatenate([p[0] for p in pieces])
    above = np.concatenate([p[1] for p in pieces])
    ps = np.concatenate([p[2] for p in pieces])
    pe = np.concatenate([p[3] for p in pieces])
    cause = np.full(len(ps), FRAGMENTATION, np.int8)

    # boundary pieces end at the end of their region (non-interleaved or memory): they lie
    # above that region's highest end, below data in a higher region
    boundary = (region < OVERFLOWED) & (pe == bounds[region.astype(np.int64) + 1])
    vrow = rows[above]                              # model row of the variable above
    at_ils = boundary & (pe == ils)
    cause[at_ils] = INTERLEAVED_BOUNDARY
    region_forced = at_ils & ~r.in_interleaved_mem[vrow] & _has_partner_below(
        r, off, vrow, ils, r.region_constraints)
    cause[region_forced] = REGION_CONSTRAINT
    cause[boundary & (pe == tm)] = MEMORY_END

    # in-region pieces: why could the variable above not start lower?
    inner = ~boundary
    a = align[above]
    cand = -(-ps // a) * a                          # lowest aligned start in the hole
    cause[inner & (cand >= pe)] = ALIGNMENT
    todo = inner & (cand < pe) & (region < OVERFLOWED)
    if r.element_constraints.nnz and todo.any():
        idx = np.flatnonzero(todo)
        hit = _element_blocked(r, off, vrow[idx], cand[idx])
        cause[idx[hit]] = ELEMENT_CONSTRAINT
    order = np.lexsort((ps, tile[above]))
    return Gaps(tile=tile[above][order], region=region[order], start=ps[order], end=pe[order],
                cause=cause[order])


def _partners(csr, vrow):
    """Flattened constraint partners of ``vrow``: (index into vrow, partner row)."""
    lengths = csr.indptr[vrow + 1] - csr.indptr[vrow]
    which = np.repeat(np.arange(len(vrow)), lengths)
    pos = np.repeat(csr.indptr[vrow] - np.cumsum(lengths) + lengths, lengths) + np.arange(
        lengths.sum())
    return which, csr.indices[pos]


def _has_partner_below(r: Report, off, vrow, ils, csr) -> np.ndarray:
    """Whether each variable has a constraint partner on its tile below ``ils``."""
    out = np.zeros(len(vrow), bool)
    if csr.nnz == 0 or len(vrow) == 0:
        return out
    which, p = _partners(csr, vrow)
    ok = r.allocated[p] & (r.tile[p] == r.tile[vrow[which]]) & (off[p] < ils)
    out[which[ok]] = True
    return out


def _element_blocked(r: Report, off, vrow, cand) -> np.ndarray:
    """Whether variable ``vrow`` placed at ``cand`` would touch an element of a variable it
    has an element constraint with (so the hole below it is the constraint's cost)."""
    t = r.target
    which, p = _partners(r.element_constraints, vrow)
    v = vrow[which]
    ok = r.allocated[p] & (r.tile[p] == r.tile[v]) & (r.size[p] > 0)
    which, p, v = which[ok], p[ok], v[ok]
    c = cand[which]
    lo_v, hi_v = t.element_of(c), t.element_of(c + np.maximum(r.size[v], 1) - 1)
    lo_p, hi_p = t.element_of(off[p]), t.element_of(off[p] + r.size[p] - 1)
    clash = (lo_v <= hi_p) & (lo_p <= hi_v)
    out = np.zeros(len(vrow), bool)
    out[which[clash]] = True
    return out


def tile_histogram(values: np.ndarray, max_bins: int = 20,
                   span: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Bins of whole KiB (1, 2, 4, ... KiB wide, at most ``max_bins``) over ``values`` (bytes):
    ``(edges in bytes, counts)``, bins half-open ``[lo, hi)``. ``span`` (lowest, highest value
    in bytes) fixes the bins, e.g. to share them between two histograms.

    >>> edges, counts = tile_histogram(np.array([3500, 3600, 8000, 20294]))
    >>> (edges // 1024).tolist()[:3], counts.tolist()[:2], int(counts.sum())
    ([3, 4, 5], [2, 0], 4)
    """
    values = np.asarray(values, np.int64)
    if span is None:
        span = (int(values.min()), int(values.max())) if len(values) else (0, 0)
    lo, hi = span[0] // 1024, span[1] // 1024 + 1
    width = 1
    while -(-(hi - lo) // width) > max_bins:
        width *= 2
    lo = lo // width * width
    nbins = -(-(hi - lo) // width)
    edges = (lo + width * np.arange(nbins + 1)) * 1024
    counts = np.bincount((values - edges[0]) // (width * 1024), minlength=nbins)[:nbins]
    return edges, counts
