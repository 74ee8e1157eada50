"""Consistency checks of a report's columns, shared by every reader.

Each check raises ``ReportError`` naming the field and the first offending record. The checks
are numpy column operations, so a report with millions of variables validates in seconds.
A variable larger than a tile is *not* an error: that tile is out of memory.
"""
from __future__ import annotations

import codecs
import warnings

import numpy as np

from ..errors import ReportError, ReportWarning
from ..model import Report

#: Sizes, offsets and alignments above this are absurd for any IPU tile (4 GiB).
ABSURD_BYTES = 1 << 32
#: Most tiles a report may claim. Per-tile figures (the graph profile's ``byTile`` and
#: ``byCategory`` arrays, plots) are dense over ``numTiles``, so this bounds what a tiny report
#: can make tilemem allocate. An IPU-POD64 has 94,208 tiles (64 IPUs of 1,472); this allows
#: 178 such IPUs in one report.
MAX_TILES = 1 << 18
#: Category codes are int16 (``Report.category``, codes 0 to 32,767); Poplar has 25.
MAX_CATEGORIES = 1 << 15


def validate_target(num_tiles: int, tile_memory: int, ils: int, offsets,
                    tiles_per_ipu: int | None = None) -> None:
    f = "targetMemoryInfo"
    if num_tiles <= 0 or num_tiles > MAX_TILES:
        raise ReportError(f"numTiles must be a tile count from 1 to {MAX_TILES:,} (178 IPUs of "
                          f"1,472 tiles), got {num_tiles:,}", field="numTiles")
    # numTiles is "the product of numIPUs and tilesPerIPU" (000, 7.1.1)
    if tiles_per_ipu is not None and (tiles_per_ipu <= 0 or num_tiles % tiles_per_ipu):
        raise ReportError(f"tilesPerIPU {tiles_per_ipu} does not divide numTiles {num_tiles}",
                          field="tilesPerIPU")
    if tile_memory <= 0 or tile_memory > ABSURD_BYTES:
        raise ReportError(f"tileMemory must be positive and below 4 GiB, got {tile_memory}",
                          field=f"{f}.tileMemory")
    if not 0 <= ils <= tile_memory:
        raise ReportError(f"interleavedMemoryStart {ils} is outside the tile's memory "
                          f"[0, {tile_memory}]", field=f"{f}.interleavedMemoryStart")
    offs = np.asarray(offsets, dtype=np.int64)
    field = f"{f}.memoryElementOffsets"
    if len(offs) == 0 or offs[0] != 0:
        raise ReportError("memoryElementOffsets must start at 0", field=field)
    bad = np.flatnonzero(np.diff(offs) <= 0)
    if len(bad):
        i = int(bad[0]) + 1
        raise ReportError(f"memoryElementOffsets must increase, got {offs[i - 1]} then "
                          f"{offs[i]}", field=f"{field}[{i}]")
    if offs[-1] >= tile_memory:
        raise ReportError(f"memory element offset {offs[-1]} is not below tileMemory "
                          f"{tile_memory}", field=f"{field}[{len(offs) - 1}]")


#: Bytes of names decoded at a time to check them (a temporary string of about this size).
NAME_SLICE = 1 << 26


def _valid_utf8(blob) -> bool:
    """Whether ``blob`` (any buffer) decodes, slice by slice (a sequence cut by a slice's end
    is decoded with the next)."""
    mv = memoryview(blob).cast("B")
    start, total = 0, len(mv)
    while start < total:
        end = min(total, start + NAME_SLICE)
        try:
            _, used = codecs.utf_8_decode(mv[start:end], "strict", end == total)
        except UnicodeDecodeError:
            return False
        start += used
    return True


def repair_names(blob, offsets: np.ndarray, var_id: np.ndarray):
    """``(blob, offsets)`` with every name valid UTF-8: a name that is not keeps its valid
    characters and gets U+FFFD for the rest (names are labels, not keys), with one
    ``ReportWarning`` saying how many. Cheap when all is well: one decode of the blob, in
    slices, and ``blob`` returned as given (a view of a mapped file stays one); ``bytes``
    when names were repaired.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     b, o = repair_names(b"ab\\xffcd", np.array([0, 2, 5]), np.array([7, 8]))
    >>> b.decode(), o.tolist(), str(w[0].message)
    ('ab\ufffdcd', [0, 2, 7], '1 var name(s) are not valid UTF-8: kept, with U+FFFD replacement characters (var 8)')
    """
    a = np.frombuffer(blob, np.uint8)
    lengths = np.diff(offsets)
    starts = offsets[:-1][lengths > 0]
    # A sequence may run from one name into the next: then a name starts with a continuation
    # byte (10xxxxxx) even though the whole blob decodes.
    bad_start = starts[(a[starts] & 0xC0) == 0x80]
    del starts
    if not len(bad_start) and _valid_utf8(blob):
        return blob, offsets
    blob = bytes(blob)   # the error path: a copy to repair
    errors: list[int] = []

    def record(e: UnicodeDecodeError):
        errors.append(e.start)
        return "", e.end

    try:
        blob.decode("utf-8")
    except UnicodeDecodeError:  # error path: where is every bad byte? (one more decode)
        codecs.register_error("tilemem.record_utf8", record)
        blob.decode("utf-8", "tilemem.record_utf8")
    if not errors and not len(bad_start):
        return blob, offsets
    at = np.concatenate([np.asarray(errors, np.int64), bad_start])
    rows = np.unique(np.searchsorted(offsets, at, side="right") - 1)
    rows = rows[(rows >= 0) & (rows < len(lengths))]
    pieces, prev = [], 0
    new_lengths = lengths.copy()
    for row in rows.tolist():
        s, e = int(offsets[row]), int(offsets[row + 1])
        fixed = blob[s:e].decode("utf-8", "replace").encode()
        pieces += [blob[prev:s], fixed]
        new_lengths[row] = len(fixed)
        prev = e
    pieces.append(blob[prev:])
    new_offsets = np.zeros(len(offsets), np.int64)
    np.cumsum(new_lengths, out=new_offsets[1:])
    warnings.warn(ReportWarning(f"{len(rows):,} var name(s) are not valid UTF-8: kept, with "
                                "U+FFFD replacement characters", var=int(var_id[rows[0]])),
                  stacklevel=2)
    return b"".join(pieces), new_offsets


def _first(mask) -> int | None:
    idx = np.flatnonzero(mask)
    return int(idx[0]) if len(idx) else None


#: Rows checked at a time: a check's temporaries are a slice's, not a whole column's.
ROW_SLICE = 1 << 22


def _first_in_slices(n: int, mask_of) -> int | None:
    """The first row where ``mask_of(slice)`` (the mask of those rows) holds."""
    for s in range(0, n, ROW_SLICE):
        got = _first(mask_of(slice(s, min(n, s + ROW_SLICE))))
        if got is not None:
            return s + got
    return None


def _increasing(a: np.ndarray) -> bool:
    """Whether ``a`` is strictly increasing (checked in slices)."""
    for s in range(0, len(a), ROW_SLICE):
        piece = a[max(s - 1, 0):s + ROW_SLICE]
        if len(piece) > 1 and not bool(np.all(piece[1:] > piece[:-1])):
            return False
    return True


def validate_report(r: Report) -> None:
    """Raise ``ReportError`` for the first inconsistency of the report's columns."""
    t = r.target
    validate_target(t.num_tiles, t.tile_memory, t.interleaved_memory_start,
                    t.memory_element_offsets, t.tiles_per_ipu)
    n = r.num_vars
    for name in ("tile", "size", "alignment", "offset", "category", "eq_class", "allocated"):
        if len(getattr(r, name)) != n:
            raise ReportError(f"column {name} has {len(getattr(r, name))} rows, expected {n}",
                              field=name)
    # duplicate var ids (no sort when they increase, as tilemem and Poplar write them)
    dup = None
    if not _increasing(r.var_id):
        order = np.argsort(r.var_id, kind="stable")
        dup = _first(np.diff(r.var_id[order]) == 0)
    if dup is not None:
        row = int(order[dup + 1])
        raise ReportError("duplicate var id", field=f"vars[{row}].var", var=int(r.var_id[row]))
    if n and r.var_id.min() < 0:
        row = _first(r.var_id < 0)
        raise ReportError("var id must not be negative", field=f"vars[{row}].var",
                          var=int(r.var_id[row]))

    a = r.allocated

    def fail(mask_of, field, message):
        row = _first_in_slices(n, lambda s: mask_of(s) & a[s])
        if row is not None:
            raise ReportError(message(row), field=f"vars[{row}].info.{field}",
                              var=int(r.var_id[row]),
                              tile=int(r.tile[row]) if 0 <= r.tile[row] < t.num_tiles else None)

    fail(lambda s: (r.tile[s] < 0) | (r.tile[s] >= t.num_tiles), "tile",
         lambda i: f"tile {r.tile[i]} is outside [0, {t.num_tiles}) (numTiles)")
    fail(lambda s: r.size[s] < 0, "sizeBytes",
         lambda i: f"sizeBytes must not be negative, got {r.size[i]}")
    fail(lambda s: r.size[s] > ABSURD_BYTES, "sizeBytes",
         lambda i: f"sizeBytes {r.size[i]} is absurd")
    al = r.alignment
    fail(lambda s: (al[s] <= 0) | (al[s] & (al[s] - 1) != 0), "alignment",
         lambda i: f"alignment must be a power of two, got {al[i]}")
    fail(lambda s: al[s] > ABSURD_BYTES, "alignment", lambda i: f"alignment {al[i]} is absurd")
    fail(lambda s: r.offset[s] < 0, "offset",
         lambda i: f"offset must not be negative, got {r.offset[i]}")
    fail(lambda s: r.offset[s] > ABSURD_BYTES, "offset",
         lambda i: f"offset {r.offset[i]} is absurd")
    fail(lambda s: (r.eq_class[s] < 0) | (r.eq_class[s] >= r.num_classes), "equivalenceClass",
         lambda i: f"equivalence class {r.eq_class[i]} is outside the "
                   f"{r.num_classes} lists of equivalenceClassInterference")

    # interference
    ix = r.interference.indices
    bad = _first_in_slices(len(ix), lambda s: (ix[s] < 0) | (ix[s] >= r.num_classes))
    if bad is not None:
        c = int(r.interference.row_ids()[bad])
        raise ReportError(f"names class {r.interference.indices[bad]}, but there are only "
                          f"{r.num_classes} classes", field=f"equivalenceClassInterference[{c}]",
                          eq_class=c)

    for field, csr in (("elementConstraints", r.element_constraints),
                       ("regionConstraints", r.region_constraints)):
        if csr.num_rows != n:
            raise ReportError(f"{field} has {csr.num_rows} rows, expected {n}", field=field)
        src = csr.row_ids()
        bad = _first(csr.indices < 0)
        if bad is not None:
            row = int(src[bad])
            raise ReportError(f"{field} names an unknown var", field=f"vars[{row}].info.{field}",
                              var=int(r.var_id[row]))
        dst = csr.indices
        bad = _first((r.tile[src] != r.tile[dst]) | ~a[src] | ~a[dst])
        if bad is not None:
            row, other = int(src[bad]), int(dst[bad])
            raise ReportError(f"{field} names var {r.var_id[other]} on tile {r.tile[other]}, "
                              f"but this var is on tile {r.tile[row]} (both must be allocated "
                              "on one tile)", field=f"vars[{row}].info.{field}",
                              var=int(r.var_id[row]), tile=int(r.tile[row]))

    order_csr = r.allocation_order
    if order_csr.num_rows > t.num_tiles:
        raise ReportError(f"has {order_csr.num_rows} lists but numTiles is {t.num_tiles}",
                          field="allocationOrderByTile")
    rows = order_csr.indices
    ip = order_csr.indptr

    def tile_of(k):   # the list (tile) of entries ``k``, without a whole column of them
        return np.searchsorted(ip, k, side="right") - 1

    bad = _first_in_slices(len(rows), lambda s: rows[s] < 0)
    if bad is not None:
        tile = int(tile_of(bad))
        raise ReportError("names an unknown var", field=f"allocationOrderByTile[{tile}]",
                          tile=tile)
    bad = _first_in_slices(len(rows), lambda s: (r.tile[rows[s]]
                                                 != tile_of(np.arange(s.start, s.stop)))
                           | ~a[rows[s]])
    if bad is not None:
        row, tile = int(rows[bad]), int(tile_of(bad))
        raise ReportError(f"lists var {r.var_id[row]}, which is "
                          + (f"on tile {r.tile[row]}" if a[row] else "not allocated"),
                          field=f"allocationOrderByTile[{tile}]", var=int(r.var_id[row]),
                          tile=tile)

    if r.class_steps is not None:
        s = r.class_steps
        if s.shape != (r.num_classes, 2):
            raise ReportError(f"has {len(s)} entries, expected one [start, end) per class "
                              f"({r.num_classes})", field="equivalenceClassSteps")
        bad = _first((s[:, 0] < 0) | (s[:, 1] < s[:, 0]))
        if bad is not None:
            raise ReportError(f"[{s[bad, 0]}, {s[bad, 1]}) is not an interval of steps",
                              field=f"equivalenceClassSteps[{bad}]", eq_class=bad)
