"""Whole-report figures for ``tilemem info`` (column arithmetic only).

``Info`` is also the JSON of ``tilemem info --json`` (keys in camel case); its text view is
``tilemem.text.info.info_view``.
"""
from __future__ import annotations

import msgspec
import numpy as np

from ..model import Report
from ..model.ipuview import passes


def bytes_per_tile(r: Report) -> np.ndarray:
    """Sum of variable sizes on every tile, *before overlapping*: variables that share memory
    count once each, so it can pass tileMemory on a tile that fits (no gaps either)."""
    a = r.allocated
    return np.bincount(r.tile[a], weights=r.size[a], minlength=r.num_tiles).astype(np.int64)


def covered_bytes_per_tile(r: Report, offsets: np.ndarray | None = None) -> np.ndarray:
    """Bytes *after overlapping* on every tile: bytes covered by at least one variable under
    ``offsets`` (default: the report's own), bytes shared by variables counted once; no gaps.

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0, 0, 0], size=[100, 60, 8],
    ...     alignment=[4, 4, 4], offset=[0, 40, 200], category=["variable"] * 3,
    ...     eq_class=[0, 1, 2], interference=[[], [], []])
    >>> int(covered_bytes_per_tile(r)[0]), int(bytes_per_tile(r)[0])
    (108, 168)
    """
    off = r.offset if offsets is None else np.asarray(offsets, np.int64)
    rows = np.flatnonzero(r.allocated & (r.size > 0))
    out = np.zeros(r.num_tiles, np.int64)
    if not len(rows):
        return out
    rows = rows[np.lexsort((off[rows], r.tile[rows]))]
    tile, start = r.tile[rows], off[rows]
    end = start + r.size[rows]
    # running maximum of the ends within each tile: a row covers what lies past it
    big = int(end.max()) + 1
    run = np.maximum.accumulate(tile * big + end) - tile * big
    prev = np.r_[0, run[:-1]]
    prev[np.r_[True, tile[1:] != tile[:-1]]] = 0
    np.add.at(out, tile, np.maximum(0, end - np.maximum(start, prev)))
    return out


def in_dump(r: Report) -> np.ndarray:
    """Per tile: does the report hold variables of it? Poplar can limit the dump to its worst
    out-of-memory tiles (FACTS.md, "Partial reports"), so a tile without variables is *not in
    the dump*, not empty: it neither fits nor is empty, as far as the report can say."""
    out = np.zeros(r.num_tiles, bool)
    out[r.tiles_in_use()] = True
    return out


def dump_note(num_in_dump: int, num_tiles: int) -> str:
    """``""`` for a report of every tile; else what it covers.

    >>> dump_note(3, 1472)
    '3 of 1,472 tiles in the dump (a partial report: the other 1,469 are not counted as fitting or as empty)'
    """
    if num_in_dump >= num_tiles:
        return ""
    return (f"{num_in_dump:,} of {num_tiles:,} tiles in the dump (a partial report: the other "
            f"{num_tiles - num_in_dump:,} are not counted as fitting or as empty)")


def highest_end_per_tile(r: Report) -> np.ndarray:
    """Highest end address (offset + size) of the report's own allocation on every tile."""
    a = r.allocated
    out = np.zeros(r.num_tiles, np.int64)
    np.maximum.at(out, r.tile[a], r.offset[a] + r.size[a])
    return out


def tiles_fitting(r: Report, tiles, offsets: np.ndarray | None = None) -> int:
    """How many of ``tiles`` fit with ``offsets`` (default: the report's own): in the dump,
    nothing past tileMemory, and an allocation the checker (``tilemem.check``) accepts on that
    tile (offsets that overlap, all zero say, do not fit however little memory they use).

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0, 0, 1], size=[16, 16, 16],
    ...     alignment=[4, 4, 4], offset=[0, 0, 0], category=["variable"] * 3,
    ...     eq_class=[0, 1, 2], interference=[[1], [0], []])
    >>> tiles_fitting(r, [0, 1]), tiles_fitting(r, [0, 1], offsets=[0, 16, 0])
    (1, 2)
    """
    from ..check import check_allocation

    res = check_allocation(r, offsets, limit=0)
    ok = (res.overflow_bytes == 0) & res.valid_tiles() & in_dump(r)
    return int(ok[np.asarray(tiles, np.int64)].sum())


class TargetInfo(msgspec.Struct, rename="camel"):
    num_tiles: int
    tile_memory: int
    interleaved_memory_start: int
    memory_elements: int
    memory_element_offsets: list[int]
    supervisor_instr_fetch_delay: int
    tiles_per_ipu: int = msgspec.field(name="tilesPerIPU")
    num_ipus: int = msgspec.field(name="numIPUs")


class TopTile(msgspec.Struct, rename="camel", omit_defaults=True):
    """A tile of ``tilemem info``'s list: ``bytes`` after overlapping (covered by at least
    one variable, shared bytes once), ``sumOfSizes`` before overlapping (each variable's
    size, shared bytes as often as they are shared: it can pass tileMemory on a tile that
    fits), the highest end address and whether that passes tileMemory."""

    tile: int
    bytes: int
    highest_end: int
    out_of_memory: bool
    sum_of_sizes: int = 0
    #: ``tile // tilesPerIPU``, on a multi-IPU report only
    ipu: int | None = None


class InterferencePruned(msgspec.Struct, rename="camel"):
    """How much of the interference was kept: entries (each direction counts)."""

    kept: int
    #: entries of the relation as written left out; ``None`` when they were never built
    #: (``tilemem generate --ipus N`` finds the pairs IPU by IPU)
    dropped: int | None


class Info(msgspec.Struct, rename="camel"):
    """Everything ``tilemem info`` shows."""

    target: TargetInfo
    tiles_in_use: int
    variables: int
    unallocated_variables: int
    equivalence_classes: int
    interference_edges: int
    element_constraints: int
    region_constraints: int
    interleaved_variables: int
    always_live_bytes: int
    #: sum of the sizes of every allocated variable (before overlapping)
    total_bytes: int
    class_steps: bool
    tiles_over_memory: int
    bytes_by_category: dict[str, int]
    top_tiles: list[TopTile]
    #: bytes covered on all tiles, variables sharing bytes counted once
    total_bytes_after_overlapping: int = 0
    #: the interference was kept to the pairs of classes that share a tile (a report over
    #: several IPUs, ``tilemem.model.interference``); absent (not in the JSON) otherwise
    interference_pruned: InterferencePruned | msgspec.UnsetType = msgspec.UNSET


def info(r: Report, top: int = 5) -> Info:
    """Everything ``tilemem info`` shows.

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0, 1], tile=[0, 0], size=[16, 300000],
    ...     alignment=[4, 4], offset=[0, 16], category=["variable", "stack"], eq_class=[0, 0],
    ...     interference=[[]])
    >>> d = info(r)
    >>> d.variables, d.tiles_over_memory, d.top_tiles[0].highest_end
    (2, 1, 300016)
    """
    t = r.target
    T = r.num_tiles
    sums, per_tile, ends = (np.zeros(T, np.int64) for _ in range(3))
    in_use = np.zeros(T, bool)
    by_cat = np.zeros(len(r.categories), np.int64)
    variables = interleaved = always_live = 0
    # per-tile sums over each IPU's variables in turn (``tilemem.model.ipuview``): one IPU's
    # temporaries at a time on a report of several
    for v in passes(r):
        a = v.allocated
        sums += bytes_per_tile(v)
        per_tile += covered_bytes_per_tile(v)
        np.maximum(ends, highest_end_per_tile(v), out=ends)
        in_use[v.tile[a]] = True
        by_cat += np.bincount(v.category[a], weights=v.size[a],
                              minlength=len(r.categories)).astype(np.int64)
        variables += int(a.sum())
        interleaved += int((a & v.in_interleaved_mem).sum())
        always_live += int(v.size[a & v.always_live].sum())
    k = min(top, r.num_tiles)
    top_tiles = np.argsort(-per_tile, kind="stable")[:k]
    categories = {r.categories[i]: int(x) for i, x in enumerate(by_cat) if x}
    return Info(
        target=TargetInfo(
            num_tiles=t.num_tiles, tile_memory=t.tile_memory,
            interleaved_memory_start=t.interleaved_memory_start, memory_elements=t.num_elements,
            memory_element_offsets=t.memory_element_offsets.tolist(),
            supervisor_instr_fetch_delay=t.supervisor_instr_fetch_delay,
            tiles_per_ipu=t.ipu_tiles, num_ipus=t.num_ipus),
        tiles_in_use=int(in_use.sum()),
        variables=variables,
        unallocated_variables=r.num_vars - variables,
        equivalence_classes=r.num_classes,
        interference_edges=r.num_interference_edges,
        element_constraints=int(r.element_constraints.nnz),
        region_constraints=int(r.region_constraints.nnz),
        interleaved_variables=interleaved,
        always_live_bytes=always_live,
        total_bytes=int(sums.sum()),
        class_steps=r.class_steps is not None,
        tiles_over_memory=int((ends > t.tile_memory).sum()),
        bytes_by_category=dict(sorted(categories.items(), key=lambda kv: -kv[1])),
        total_bytes_after_overlapping=int(per_tile.sum()),
        top_tiles=[TopTile(tile=int(i), bytes=int(per_tile[i]), highest_end=int(ends[i]),
                           sum_of_sizes=int(sums[i]),
                           out_of_memory=bool(ends[i] > t.tile_memory),
                           ipu=int(t.ipu_of(i)) if t.num_ipus > 1 else None)
                   for i in top_tiles],
        interference_pruned=msgspec.UNSET if r.interference_dropped is None else
        InterferencePruned(kept=r.interference.nnz, dropped=r.interference_dropped
                           if r.interference_dropped >= 0 else None),
    )
