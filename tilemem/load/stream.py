"""Convert a JSON report to capnp with bounded memory (``tilemem convert big.json big.capnp``).

``read_json`` decodes the top level in one msgspec call, which touches every page of the file
and holds one ``msgspec.Raw`` per variable, then keeps names and categories as Python strings:
its peak grows with the report. Here nothing per variable lives longer than one window:

1. The file is scanned in windows of ``WINDOW`` bytes (mapped, and the pages of a finished
   window dropped from this process with ``madvise``). A numpy pass over each window finds the
   structural bytes outside strings and their nesting level (``jsonio._levels``), hence where
   each top-level array starts and ends and where each of its elements ends.
2. The elements of ``vars`` (and of the list-of-lists fields) up to the last element ending in
   the window are decoded in one msgspec call (the typed Structs of ``jsonio``) and appended as
   fixed-width bytes to one file per column in a temporary folder beside the output.
3. The rest of the top level (numTiles, targetMemoryInfo, ...), with the big arrays cut out, is
   a few hundred bytes of JSON, decoded as ``jsonio`` decodes it.
4. The column files are mapped (``np.memmap``) into a ``Report``, checked by the same
   ``validate_report`` as every reader, and written by ``write_capnp_streaming`` chunk by chunk.

Peak memory is then a few windows plus what the whole-report checks need (the sort of var ids,
the symmetric closure of the interference lists): numpy columns, not Python objects. Errors
name the field and record as ``read_json`` does (a failing batch is decoded again element by
element by ``jsonio.decode_batch``).
"""
from __future__ import annotations

import contextlib
import mmap
import re
import shutil
import tempfile
import warnings
from itertools import chain
from pathlib import Path

import msgspec
import numpy as np

from ..errors import ReportError, ReportWarning
from ..model import CATEGORIES, FLAG_FIELDS, Csr, Report
from ..model.target import Target
from .jsonio import (INT_FIELDS, MISSING, Int, JsonTop, JsonVar, class_interference,
                     decode_batch, error_near, fields_getter, split_error, target_of)

#: Bytes scanned and decoded at a time. The scan's numpy arrays and the decoded Structs of one
#: window take a few times its size; 8 MiB keeps that near 50 MB while the calls stay long.
WINDOW = 1 << 23
#: Top-level arrays streamed element by element (the rest is decoded whole, it is small).
_BIG = {"vars": list[JsonVar], "equivalenceClassInterference": list[list[Int]],
        "allocationOrderByTile": list[list[Int]], "equivalenceClassSteps": list[list[Int]]}
_STRUCT = np.zeros(256, bool)
_STRUCT[list(b'"[]{}')] = True
_OPEN = np.zeros(256, np.int8)
_OPEN[[ord("["), ord("{")]] = 1
_OPEN[[ord("]"), ord("}")]] = -1
_ESCAPED = re.compile(rb'\\[\\"]')
_KEY = re.compile(rb'"((?:[^"\\]|\\.)*)"\s*:\s*$')


class _Columns:
    """Append-only column files in a temporary folder."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.files: dict[str, object] = {}
        self.dtypes: dict[str, np.dtype] = {}

    def append(self, name: str, values) -> None:
        a = np.ascontiguousarray(values)
        if name not in self.files:
            self.files[name] = open(self.folder / name, "wb")
            self.dtypes[name] = a.dtype
        self.files[name].write(memoryview(a.astype(self.dtypes[name], copy=False)).cast("B"))

    def map(self, name: str, dtype=None) -> np.ndarray:
        """The column as a read-only file mapping (an empty array if never written)."""
        dtype = np.dtype(dtype or self.dtypes.get(name, np.int64))
        f = self.files.pop(name, None)
        if f is not None:
            f.close()
        path = self.folder / name
        if not path.exists() or path.stat().st_size == 0:
            return np.zeros(0, dtype)
        return np.memmap(path, dtype=dtype, mode="r")

    def close(self) -> None:
        for f in self.files.values():
            f.close()
        self.files.clear()


def _scan(buf, start: int, depth: int, in_string: int, end: int):
    """Structural bytes outside strings in ``buf[start:end]``: (positions, byte, level after).

    ``end`` must not split an escape (``\\x``); returns the state at ``end`` too."""
    piece = bytes(buf[start:end])
    if b"\\" in piece:  # same length: positions still count from the piece's start
        piece = _ESCAPED.sub(b"__", piece)
    a = np.frombuffer(piece, np.uint8)
    pos = np.flatnonzero(_STRUCT[a])
    ch = a[pos]
    step = _OPEN[ch].astype(np.int64)
    quote = ch == 0x22
    if len(pos):
        inside = (np.cumsum(quote) + in_string) & 1
        keep = (inside == 0) & ~quote
        in_string = int(inside[-1])
    else:
        keep = np.zeros(0, bool)
    pos, ch, step = pos[keep], ch[keep], step[keep]
    level = np.cumsum(step) + depth
    if len(level):
        depth = int(level[-1])
    return pos + start, ch, level, depth, in_string


class _Array:
    """One top-level array being streamed: decodes its elements batch by batch."""

    def __init__(self, key: str, opener: int):
        self.key = key
        self.next = opener + 1     # first byte not yet decoded
        self.count = 0             # elements decoded
        self.dec = msgspec.json.Decoder(_BIG[key])

    def decode(self, buf, stop: int, repaired: list):
        """The elements in ``buf[self.next:stop]`` (``stop`` just after an element's end)."""
        data = bytearray(b"[")
        data += memoryview(buf)[self.next:stop]  # the one copy of the batch's text
        self.next = stop
        first = re.compile(rb"[^ \t\r\n]").search(data, 1)
        if first is None:
            return []
        if data[first.start()] == 0x2C:  # the comma after the previous batch's last element
            data[first.start()] = 0x20
        data += b"]"
        try:
            out = self.dec.decode(data)
        except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError):
            # the error path: element by element, so the error names the record
            try:
                raws = msgspec.json.decode(data, type=list[msgspec.Raw])
            except (msgspec.MsgspecError, RecursionError) as e:
                raise ReportError(f"not a valid JSON report: {e}", field=f"{self.key}"
                                  f"[{self.count}...]") from None
            out = decode_batch(self.dec, raws, self.count, self.key, repaired)
        self.count += len(out)
        return out


def stream_json_columns(path, folder: Path) -> tuple[Report, list[int]]:
    """A ``Report`` of the JSON report at ``path`` whose columns map files in ``folder``
    (checked by ``validate_report``), and the rows whose text was repaired (not UTF-8)."""
    from .validate import MAX_CATEGORIES
    from . import map_file

    buf = map_file(path)
    bom = 3 if bytes(buf[:3]) == b"\xef\xbb\xbf" else 0
    cols = _Columns(folder)
    cats = {c: i for i, c in enumerate(CATEGORIES)}
    repaired: list[int] = []
    skeleton: list[bytes] = []
    keep_from = bom
    current: _Array | None = None
    skipped_from = None  # opener of a top-level value left out of the skeleton
    seen: dict[str, bool] = {}
    n_vars = 0
    depth = in_string = 0
    done_to = 0  # bytes already dropped from this process's memory
    pos = bom
    n = len(buf)
    while pos < n:
        end = min(pos + WINDOW, n)
        while end < n and buf[end - 1] == 0x5C:  # keep an escape within one window
            end += 1
        at, ch, level, depth, in_string = _scan(buf, pos, depth, in_string, end)
        # events: a value of the top object opens (level 2 after an opener), closes (level 1
        # after a closer), or one of its elements ends (level 2 after a closer)
        opens = np.flatnonzero((level == 2) & (_OPEN[ch] == 1))
        closes = np.flatnonzero((level == 1) & (_OPEN[ch] == -1))
        ends = np.flatnonzero((level == 2) & (_OPEN[ch] == -1))
        events = sorted([(int(at[i]), 0) for i in opens] + [(int(at[i]), 1) for i in closes])
        last_end = int(at[ends[-1]]) + 1 if len(ends) else None
        for p, kind in events:
            if kind == 0:
                m = _KEY.search(bytes(buf[max(0, p - 4096):p]))
                key = m.group(1).decode("utf-8", "replace") if m else ""
                skeleton.append(bytes(buf[keep_from:p]))
                if key in _BIG and key not in seen:
                    current = _Array(key, p)
                    seen[key] = True
                else:
                    skipped_from = (p, key)
                continue
            if current is not None:
                n_vars += _store(cols, current, current.decode(buf, p, repaired), cats, n_vars)
                skeleton.append(b"[]")
                current = None
            elif skipped_from is not None:
                kept = skipped_from[1] in ("targetMemoryInfo",)
                skeleton.append(bytes(buf[skipped_from[0]:p + 1]) if kept else b"null")
                skipped_from = None
            keep_from = p + 1
        if current is not None and last_end is not None and last_end > current.next:
            n_vars += _store(cols, current, current.decode(buf, last_end, repaired), cats,
                             n_vars)
        pos = end
        done = (min(pos, current.next if current else pos) // mmap.PAGESIZE) * mmap.PAGESIZE
        if isinstance(buf, mmap.mmap) and done > done_to and hasattr(buf, "madvise"):
            buf.madvise(mmap.MADV_DONTNEED, done_to, done - done_to)  # clean pages: re-read
            done_to = done
    if current is not None or depth != 0:
        raise error_near(buf, n - 1, "not a valid JSON report: the file ends inside "
                    + (f"{current.key}" if current else "an object or array"))
    skeleton.append(bytes(buf[keep_from:]))
    text = b"".join(skeleton)   # the top level with vars and the lists left out: small
    try:
        top = msgspec.json.decode(text, type=JsonTop)
    except msgspec.ValidationError as e:
        msg, where = split_error(e)
        raise ReportError(msg, field=where.lstrip(".") or None) from None
    except msgspec.DecodeError as e:
        raise ReportError(f"not a valid JSON report: {e}") from None
    target = target_of(top)
    for key in ("vars", "equivalenceClassInterference"):
        if key not in seen:
            raise ReportError(f"missing required key {key}" if b'"' + key.encode() + b'"'
                              not in text else "expected an array", field=key)
    if len(cats) > MAX_CATEGORIES:
        raise ReportError(f"more than {MAX_CATEGORIES:,} categories (codes are int16; Poplar "
                          f"has {len(CATEGORIES)}): not a lowered-variables report",
                          field="vars[...].info.category")
    cols.close()
    return _assemble(cols, target, tuple(cats), n_vars, seen), repaired


def _store(cols: _Columns, arr: _Array, decoded, cats: dict, first_row: int) -> int:
    """Append one decoded batch of ``arr`` to the column files; returns the vars added."""
    m = len(decoded)
    if not m:
        return 0
    if arr.key != "vars":
        lists = decoded
        cols.append(arr.key + ".len", np.fromiter(map(len, lists), np.int64, count=m))
        cols.append(arr.key + ".flat", np.fromiter(chain.from_iterable(lists), np.int64))
        return 0
    infos = list(map(fields_getter("info"), decoded))
    var = np.fromiter(map(fields_getter("var"), decoded), np.int64, count=m)
    ints = np.empty((len(INT_FIELDS), m), np.int64)
    for j, f in enumerate(INT_FIELDS):
        ints[j] = np.fromiter(map(fields_getter(f), infos), np.int64, count=m)
    flags = {k: np.fromiter(map(fields_getter(f), infos), bool, count=m)
             for k, f in FLAG_FIELDS.items()}
    allocated = flags["allocated"]
    missing = (ints == MISSING) & allocated
    if missing.any():
        j, row = np.argwhere(missing)[0]
        raise ReportError(f"missing required key {INT_FIELDS[j]}",
                          field=f"vars[{first_row + row}].info", var=int(var[row]))
    names = list(map(fields_getter("name"), infos))
    cat_names = list(map(fields_getter("category"), infos))
    no_cat = np.flatnonzero(allocated & (np.fromiter(map(len, cat_names), np.int64, count=m)
                                         == 0))
    if len(no_cat):
        row = int(no_cat[0])
        raise ReportError("missing required key category", field=f"vars[{first_row + row}]"
                          ".info", var=int(var[row]))
    for c in dict.fromkeys(cat_names):
        cats.setdefault(c, len(cats))
    ints[:, ~allocated] = -1
    cols.append("var", var)
    for j, f in enumerate(INT_FIELDS):
        cols.append(f, ints[j])
    for k, v in flags.items():
        cols.append(k, v)
    cols.append("category", np.fromiter(map(cats.__getitem__, cat_names), np.int64, count=m)
                .clip(-1, (1 << 15) - 1).astype(np.int16))
    blob = "".join(names).encode()
    cols.append("name_blob", np.frombuffer(blob, np.uint8))
    cols.append("name_len", np.fromiter(map(len, map(str.encode, names)), np.int64, count=m)
                if len(blob) != sum(map(len, names)) else
                np.fromiter(map(len, names), np.int64, count=m))
    for key, getter in (("ec", fields_getter("elementConstraints")),
                        ("rc", fields_getter("regionConstraints"))):
        lists = list(map(getter, infos))
        cols.append(key + ".len", np.fromiter(map(len, lists), np.int64, count=m))
        cols.append(key + ".flat", np.fromiter(chain.from_iterable(lists), np.int64))
    return m


def _cumsum(lengths: np.ndarray) -> np.ndarray:
    indptr = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=indptr[1:])
    return indptr


def _assemble(cols: _Columns, target: Target, cats: tuple, n: int, seen: dict) -> Report:
    from .validate import validate_report

    c = {k: cols.map(k, np.int64) for k in ("var", *INT_FIELDS)}
    flags = {k: cols.map(k, bool) for k in FLAG_FIELDS}
    inter_len = cols.map("equivalenceClassInterference.len", np.int64)
    inter_flat = cols.map("equivalenceClassInterference.flat", np.int64)
    inter = Csr.from_lengths(inter_len, inter_flat)
    interference, dropped = class_interference(inter, target, c["tile"], c["equivalenceClass"],
                                               flags["allocated"])
    del inter, inter_len, inter_flat
    steps = None
    if "equivalenceClassSteps" in seen:
        lens = cols.map("equivalenceClassSteps.len", np.int64)
        bad = np.flatnonzero(lens != 2)
        if len(bad):
            raise ReportError("each entry must be [start, end)",
                              field=f"equivalenceClassSteps[{bad[0]}]", eq_class=int(bad[0]))
        steps = cols.map("equivalenceClassSteps.flat", np.int64).reshape(-1, 2)
    name_offsets = _cumsum(cols.map("name_len", np.int64))
    report = Report(
        target=target, var_id=c["var"], tile=c["tile"], size=c["sizeBytes"],
        alignment=c["alignment"], offset=c["offset"], category=cols.map("category", np.int16),
        eq_class=c["equivalenceClass"], **flags, name_blob=cols.map("name_blob", np.uint8),
        name_offsets=name_offsets, categories=cats, element_constraints=Csr.empty(n),
        region_constraints=Csr.empty(n), interference=interference,
        allocation_order=Csr.empty(target.num_tiles), class_steps=steps,
        interference_dropped=dropped)
    lookup = report.rows_of_vars
    for attr, key in (("element_constraints", "ec"), ("region_constraints", "rc")):
        object.__setattr__(report, attr, Csr.from_lengths(
            cols.map(key + ".len", np.int64) if n else np.zeros(0, np.int64),
            lookup(cols.map(key + ".flat", np.int64))))
    order_len = cols.map("allocationOrderByTile.len", np.int64)
    if len(order_len) > target.num_tiles:
        raise ReportError(f"has {len(order_len)} lists but numTiles is {target.num_tiles}",
                          field="allocationOrderByTile")
    lens = np.zeros(target.num_tiles, np.int64)
    lens[:len(order_len)] = order_len
    object.__setattr__(report, "allocation_order", Csr.from_lengths(
        lens, lookup(cols.map("allocationOrderByTile.flat", np.int64))))
    validate_report(report)
    return report


def convert_json_to_capnp(source, dest) -> Report:
    """Convert the JSON report ``source`` to tilemem capnp at ``dest`` (atomically) with
    bounded memory; see the module docstring. Raises ``ReportError`` naming ``source``; warns
    (``ReportWarning``) about repaired names. Returns the report (its columns are gone with
    the temporary folder: use only its sizes)."""
    from . import atomic_write
    from .capnpio import write_capnp_streaming

    dest = Path(dest)
    folder = Path(tempfile.mkdtemp(prefix=f".{dest.name}.columns.", dir=dest.parent or "."))
    try:
        try:
            report, repaired = stream_json_columns(source, folder)
        except ReportError as e:
            raise e.with_path(str(source)) from None
        if repaired:
            row = repaired[0]
            warnings.warn(ReportWarning(
                f"{len(repaired):,} var(s) have text that is not valid UTF-8: kept, with U+FFFD "
                "replacement characters in names", field=f"vars[{row}]",
                var=int(report.var_id[row])).with_path(str(source)), stacklevel=2)
        with atomic_write(dest) as f:
            write_capnp_streaming(report, f)
        return report
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(folder)
