"""Read and write tilemem's Cap'n Proto report (``tilemem/vars.capnp``).

Reading maps the file and views every column in place (no copy of the data), with traversal
and nesting limits derived from the file's size, so a hostile file cannot make the reader
allocate more than the file holds. Every structural field (presence, dtype, chunk data, length,
CSR offsets) is checked before use, and the Cap'n Proto library's own errors are told in plain
words, naming the field being read.
"""
from __future__ import annotations

import os
from functools import lru_cache
from typing import BinaryIO, NamedTuple

import numpy as np

from ..errors import ReportError
from ..model import FLAG_FIELDS, Csr, Report
from ..model.interference import pruned
from ..model.target import Target

FORMAT_VERSION = 1
CHUNK_BYTES = 1 << 28  # below Cap'n Proto's 2^29-element list limit

# column name in the schema -> (Report attribute, dtype)
_COLUMNS = {
    "var": ("var_id", "<i8"), "allocated": ("allocated", "|b1"), "tile": ("tile", "<i8"),
    "sizeBytes": ("size", "<i8"), "alignment": ("alignment", "<i8"),
    "offset": ("offset", "<i8"), "category": ("category", "<i2"),
    "equivalenceClass": ("eq_class", "<i8"),
    **{v: (k, "|b1") for k, v in FLAG_FIELDS.items() if k != "allocated"},
}


#: The schema, the one copy (``schemas/vars.capnp`` in the source tree is a link to it): in
#: the package, so that an installed wheel carries it as a file.
SCHEMA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vars.capnp")


@lru_cache(maxsize=1)
def schema():
    import capnp

    return capnp.load(SCHEMA)


# ---- writing ------------------------------------------------------------------------------

def _set_column(col, array: np.ndarray) -> None:
    array = np.ascontiguousarray(array)
    dt = array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype
    col.dtype = dt.str
    col.length = len(array)
    raw = array.astype(dt, copy=False).view(np.uint8)
    n_chunks = max(1, -(-len(raw) // CHUNK_BYTES))
    chunks = col.init("chunks", n_chunks)
    for i in range(n_chunks):
        chunks[i].data = raw[i * CHUNK_BYTES:(i + 1) * CHUNK_BYTES].tobytes()


def _set_csr(msg, csr: Csr, values: np.ndarray | None = None) -> None:
    _set_column(msg.init("indptr"), csr.indptr)
    _set_column(msg.init("indices"), csr.indices if values is None else values[csr.indices])


def write_capnp(r: Report, f: BinaryIO) -> None:
    r = pruned(r)   # a report over several IPUs: the pairs that share a tile
    s = schema()
    m = s.Report.new_message()
    m.formatVersion = FORMAT_VERSION
    m.numTiles = r.target.num_tiles
    t = m.init("targetMemoryInfo")
    t.tileMemory = r.target.tile_memory
    t.interleavedMemoryStart = r.target.interleaved_memory_start
    t.memoryElementOffsets = r.target.memory_element_offsets.tolist()
    if r.target.supervisor_instr_fetch_delay is not None:
        t.supervisorInstrFetchDelay = r.target.supervisor_instr_fetch_delay
        t.hasSupervisorInstrFetchDelay = True
    if r.target.tiles_per_ipu is not None:
        m.tilesPerIPU = r.target.tiles_per_ipu
    if r.interference_dropped is not None:
        m.interferencePruned = True
        m.interferenceDropped = r.interference_dropped
    for field, (attr, _) in _COLUMNS.items():
        _set_column(m.init(field), getattr(r, attr))
    m.categoryNames = list(r.categories)
    _set_column(m.init("nameBlob"), np.frombuffer(r.name_blob, np.uint8))
    _set_column(m.init("nameOffsets"), r.name_offsets)
    _set_csr(m.init("elementConstraints"), r.element_constraints, r.var_id)
    _set_csr(m.init("regionConstraints"), r.region_constraints, r.var_id)
    _set_csr(m.init("equivalenceClassInterference"), r.interference)
    _set_csr(m.init("allocationOrderByTile"), r.allocation_order, r.var_id)
    if r.class_steps is not None:
        m.hasEquivalenceClassSteps = True
        _set_column(m.init("equivalenceClassSteps"), r.class_steps.reshape(-1))
    m.write(f)


# ---- reading ------------------------------------------------------------------------------

#: The root struct's size (data words, pointers) in the first release of the schema: a file
#: of ours is never smaller (the schema only grows; fields added since read as absent).
_FIRST_ROOT = (2, 23)
#: Cap'n Proto readers refuse messages of more segments than this (capnp's own limit).
_MAX_SEGMENTS = 512
#: Said when a Cap'n Proto message is not in our schema (most likely Poplar's own dump).
NOT_OURS = ("a Cap'n Proto file, but not in tilemem's schema: Poplar's own vars.capnp (for the "
            "Graph Analyser) uses another, unpublished one; ask Poplar for JSON "
            "(debug.loweredVarDumpFile ending in .json)")


class Header(NamedTuple):
    size: int                      # bytes the segment table announces
    header: int                    # bytes of the segment table
    root: tuple[int, int] | None   # the root struct's (data words, pointers), if present


def message_header(buf) -> Header | None:
    """The segment table of a Cap'n Proto message at the start of ``buf`` whose root is a
    struct, or ``None`` when ``buf`` does not start like one. Reads only the header.

    >>> message_header(b"\\0\\0\\0\\0\\3\\0\\0\\0" + bytes(4) + b"\\2\\0\\x17\\0")
    Header(size=32, header=8, root=(2, 23))
    """
    if len(buf) < 8:
        return None
    segments = int(np.frombuffer(buf, "<u4", 1)[0]) + 1
    if segments > _MAX_SEGMENTS:
        return None
    header = (4 + 4 * segments + 7) // 8 * 8
    if len(buf) < header:
        return None
    size = header + 8 * int(np.frombuffer(buf, "<u4", segments, 4).astype(np.int64).sum())
    if len(buf) < header + 8:
        return Header(size, header, None)
    root = int(np.frombuffer(buf, "<u8", 1, header)[0])
    if root & 3 != 0 or root >> 32 == 0:  # not a struct pointer, or an empty struct
        return None
    return Header(size, header, ((root >> 32) & 0xFFFF, root >> 48))

class _Reader:
    """Reads columns of the message, checking every structural field of the schema before use
    (presence, dtype, chunk data, length) and remembering which field it is on, so an error of
    the Cap'n Proto library can name it."""

    def __init__(self, buf):
        self.buf = buf
        self.base = np.frombuffer(buf, np.uint8).ctypes.data if len(buf) else 0
        self.field = "formatVersion"

    def column(self, parent, field: str, expect: str, name: str | None = None) -> np.ndarray:
        name = name or field
        self.field = name
        if not parent._has(field):
            raise ReportError("column is missing", field=name)
        col = getattr(parent, field)
        try:
            dtype = col.dtype
        except UnicodeDecodeError:
            raise ReportError("column dtype is not text", field=f"{name}.dtype") from None
        if dtype != expect:
            raise ReportError(f"column has dtype {dtype!r}, expected {expect!r}",
                              field=f"{name}.dtype")
        dt = np.dtype(dtype)
        parts = []
        at = []   # offsets in the file of the parts that are views of it
        for chunk in col.chunks:
            if not chunk._has("data"):  # a null chunk holds no bytes (the length check below)
                continue
            view = chunk.get_data_as_view("data")
            if len(view) == 0:
                continue
            addr = np.frombuffer(view, np.uint8).ctypes.data
            off = addr - self.base
            if not 0 <= off <= len(self.buf) - len(view):  # not inside our mapping: copy
                parts.append(np.frombuffer(bytes(view), np.uint8))
            else:  # a view of the mapped file that keeps the mapping alive
                parts.append(np.frombuffer(self.buf, np.uint8, len(view), off))
                at.append(off)
        if len(parts) > 1 and len(at) == len(parts) and all(
                at[i] + len(parts[i]) == at[i + 1] for i in range(len(parts) - 1)):
            # chunks back to back in the file (``write_capnp_streaming``): one view, no copy
            parts = [np.frombuffer(self.buf, np.uint8, sum(map(len, parts)), at[0])]
        raw = parts[0] if len(parts) == 1 else (np.concatenate(parts) if parts
                                                else np.zeros(0, np.uint8))
        if len(raw) != col.length * dt.itemsize:
            raise ReportError(f"column holds {len(raw):,} bytes, but its length says "
                              f"{col.length:,} values of {dt.itemsize} byte"
                              + ("s" if dt.itemsize > 1 else ""), field=name)
        if raw.ctypes.data % dt.itemsize:
            raw = raw.copy()
        return raw.view(dt)

    def csr(self, parent, field: str, num_rows: int | None = None,
            checked: bool = True) -> Csr:
        self.field = field
        if not parent._has(field):
            raise ReportError("is missing", field=field)
        msg = getattr(parent, field)
        indptr = self.column(msg, "indptr", "<i8", f"{field}.indptr")
        indices = self.column(msg, "indices", "<i8", f"{field}.indices")
        if len(indptr) == 0 or (num_rows is not None and len(indptr) != num_rows + 1):
            raise ReportError(f"has {max(len(indptr) - 1, 0):,} rows, expected {num_rows:,}",
                              field=f"{field}.indptr")
        if checked and (indptr[0] != 0 or np.any(np.diff(indptr) < 0)
                        or indptr[-1] != len(indices)):
            raise ReportError("CSR offsets are not a valid partition of the entries",
                              field=f"{field}.indptr")
        return Csr(indptr, indices)


#: What the Cap'n Proto library's checks mean, in plain words (first match wins).
_KJ_PLAIN = (
    ("prematurely", "the file is truncated"),
    ("traversal limit", "it refers to more data than the file holds"),
    ("nest", "it is nested too deeply"),
    ("bounds", "a pointer points outside the file"),
    ("far pointer", "a pointer points outside the file"),
    ("segment", "its segment table is inconsistent"),
    ("cptr", "a text field is not terminated"),
)


def _plain(e) -> str:
    text = getattr(e, "description", "") or str(e)
    return next((plain for key, plain in _KJ_PLAIN if key in text),
                "a field holds the wrong kind of value")


def read_capnp(buf, *, trusted: bool = False) -> Report:
    """Decode a tilemem capnp report from a buffer (bytes or mmap). Raises ``ReportError``.

    ``trusted``: a report already validated whole by another process (a Dask worker opening
    the file its driver loaded, ``tilemem.pack.workers.cluster.ReportFile``): only the checks that
    read no column's values (the message, the target, each column's presence, dtype and
    length) are made, so that opening it reads none of its pages and makes no temporary of
    a whole column; the values a worker uses are checked in its shard."""
    import capnp

    from .validate import MAX_CATEGORIES, repair_names, validate_report, validate_target

    s = schema()
    found = message_header(buf)
    if found is not None and found.root is not None and (
            found.root[0] < _FIRST_ROOT[0] or found.root[1] < _FIRST_ROOT[1]):
        raise ReportError(NOT_OURS)  # our schema only ever grows: older files are not smaller
    words = max(len(buf) // 8, 1)
    rd = _Reader(buf)
    try:
        m = s.Report.from_bytes(buf, traversal_limit_in_words=2 * words + 1024,
                                nesting_limit=16).__enter__()
        version = m.formatVersion
    except (capnp.KjException, ValueError) as e:
        raise ReportError(f"not a tilemem Cap'n Proto report: {_plain(e)}") from None
    if version != FORMAT_VERSION:
        raise ReportError(f"format version {version} is not supported (expected "
                          f"{FORMAT_VERSION}); if this is Poplar's own dump: {NOT_OURS}",
                          field="formatVersion")
    try:
        rd.field = "targetMemoryInfo"
        if not m._has("targetMemoryInfo"):
            raise ReportError("is missing", field="targetMemoryInfo")
        ti = m.targetMemoryInfo
        offsets = list(ti.memoryElementOffsets)
        big = [i for i, x in enumerate(offsets) if x >= 1 << 63]
        if big:
            raise ReportError("integer outside the 64-bit range",
                              field=f"targetMemoryInfo.memoryElementOffsets[{big[0]}]")
        offsets = np.asarray(offsets, np.int64)
        tpi = m.tilesPerIPU or None
        validate_target(m.numTiles, ti.tileMemory, ti.interleavedMemoryStart, offsets, tpi)
        target = Target(m.numTiles, ti.tileMemory, ti.interleavedMemoryStart, offsets,
                        ti.supervisorInstrFetchDelay if ti.hasSupervisorInstrFetchDelay else None,
                        tpi)
        cols = {attr: rd.column(m, field, dt) for field, (attr, dt) in _COLUMNS.items()}
        n = len(cols["var_id"])
        for field, (attr, _) in _COLUMNS.items():
            if len(cols[attr]) != n:
                raise ReportError(f"column has {len(cols[attr]):,} rows, expected {n:,} (as "
                                  "var)", field=field)
        rd.field = "categoryNames"
        cats = tuple(_categories(m.categoryNames, MAX_CATEGORIES))
        if not trusted and n and (cols["category"].min() < 0
                                  or cols["category"].max() >= len(cats)):
            row = int(np.flatnonzero((cols["category"] < 0)
                                     | (cols["category"] >= len(cats)))[0])
            raise ReportError(f"category code {cols['category'][row]} is outside the "
                              f"{len(cats)} categoryNames", field=f"category[{row}]",
                              var=int(cols["var_id"][row]))
        blob = rd.column(m, "nameBlob", "|u1")
        name_offsets = rd.column(m, "nameOffsets", "<i8")
        if len(name_offsets) != n + 1 or not trusted and (name_offsets[0] != 0 or np.any(
                np.diff(name_offsets) < 0) or name_offsets[-1] != len(blob)):
            raise ReportError("name offsets do not partition nameBlob", field="nameOffsets")
        # names as a view of the file (bytes only if one had to be repaired)
        name_blob, name_offsets = ((blob, name_offsets) if trusted else
                                   repair_names(blob, name_offsets, cols["var_id"]))
        steps = None
        if m.hasEquivalenceClassSteps:
            flat = rd.column(m, "equivalenceClassSteps", "<i8")
            if len(flat) % 2:
                raise ReportError(f"holds {len(flat):,} numbers: not [start, end) pairs",
                                  field="equivalenceClassSteps")
            steps = flat.reshape(-1, 2)
        report = Report(
            target=target, **cols, name_blob=name_blob, name_offsets=name_offsets,
            categories=cats, element_constraints=Csr.empty(n), region_constraints=Csr.empty(n),
            interference=rd.csr(m, "equivalenceClassInterference", checked=not trusted),
            allocation_order=Csr.empty(target.num_tiles), class_steps=steps,
            interference_dropped=m.interferenceDropped if m.interferencePruned else None)
        lookup = report.rows_of_vars
        for attr, field in (("element_constraints", "elementConstraints"),
                            ("region_constraints", "regionConstraints"),
                            ("allocation_order", "allocationOrderByTile")):
            c = rd.csr(m, field, n if attr != "allocation_order" else target.num_tiles,
                       checked=not trusted)
            if len(c.indices):   # (no index of the var ids for an empty relation)
                object.__setattr__(report, attr, Csr(c.indptr, lookup(c.indices)))
    except capnp.KjException as e:
        raise ReportError(f"damaged Cap'n Proto report: {_plain(e)}", field=rd.field) from None
    if not trusted:
        validate_report(report)
    return pruned(report)   # a file written before the pairs were pruned: pruned now


def _categories(names, limit: int) -> list[str]:
    """categoryNames, each checked: Cap'n Proto text is UTF-8, so anything else is damage."""
    if len(names) > limit:
        raise ReportError(f"{len(names):,} categories: more than {limit:,} (codes are "
                          "int16; Poplar has 25)", field="categoryNames")
    out = []
    for i in range(len(names)):
        try:
            out.append(names[i])
        except UnicodeDecodeError:
            raise ReportError("category name is not valid UTF-8 (the file is damaged)",
                              field=f"categoryNames[{i}]") from None
    return out


# ---- streaming writer ---------------------------------------------------------------------
# ``write_capnp`` builds the whole message in the Cap'n Proto library's memory before writing
# it: peak memory is the report plus the file. ``write_capnp_streaming`` writes the same schema
# by hand instead: segment 0 holds every struct, text and small list (kilobytes), and each
# chunk of column data is its own segment, reached by a far pointer (the wire format's way to
# point across segments), copied from the column (often a file mapping) to the file piece by
# piece. So a column of any length is written with a few MiB of buffer, and no pointer has to
# span more than one chunk (near pointers reach only 2^29 words).

_MAX_WRITE_SEGMENTS = _MAX_SEGMENTS - 1
_PIECE = 1 << 24  # bytes copied to the file per write


class _Segment0:
    """Segment 0 of a message under construction: words, allocated in order."""

    def __init__(self):
        self.buf = bytearray()

    def alloc(self, words: int) -> int:
        at = len(self.buf) // 8
        self.buf += bytes(8 * words)
        return at

    def word(self, at: int, value: int) -> None:
        self.buf[8 * at:8 * at + 8] = int(value).to_bytes(8, "little")

    def put(self, at_byte: int, value: int, size: int, signed: bool = False) -> None:
        self.buf[at_byte:at_byte + size] = int(value).to_bytes(size, "little", signed=signed)

    def struct(self, ptr: int, data_words: int, pointers: int) -> int:
        at = self.alloc(data_words + pointers)
        self.word(ptr, ((at - ptr - 1) & 0x3FFFFFFF) << 2 | data_words << 32 | pointers << 48)
        return at

    def list(self, ptr: int, elem_size: int, count: int, words: int) -> int:
        at = self.alloc(words)
        self.word(ptr, ((at - ptr - 1) & 0x3FFFFFFF) << 2 | 1 | elem_size << 32 | count << 35)
        return at

    def text(self, ptr: int, s: str) -> None:
        b = s.encode() + b"\0"
        at = self.list(ptr, 2, len(b), -(-len(b) // 8))
        self.buf[8 * at:8 * at + len(b)] = b


class _Layout:
    """Field positions of the schema (data byte/bit offsets, pointer indexes), read from the
    compiled schema so that this writer cannot drift from ``vars.capnp``."""

    def __init__(self, struct_schema):
        node = struct_schema.schema.node.struct
        self.data_words, self.pointers = node.dataWordCount, node.pointerCount
        self.slot = {f.name: (f.slot.type.which(), f.slot.offset) for f in node.fields}

    def ptr(self, at: int, name: str) -> int:
        kind, off = self.slot[name]
        return at + self.data_words + off

    def set(self, seg: _Segment0, at: int, name: str, value) -> None:
        kind, off = self.slot[name]
        if kind == "bool":
            if value:
                byte = 8 * at + off // 8
                seg.buf[byte] |= 1 << (off % 8)
            return
        size = {"uint32": 4, "uint64": 8, "int64": 8}[kind]
        seg.put(8 * at + off * size, value, size, signed=kind.startswith("int"))


def write_capnp_streaming(r: Report, f: BinaryIO, ids_are_rows: bool = False) -> None:
    """Write ``r`` in tilemem's capnp schema (as ``write_capnp``) with bounded memory: the
    columns may be file mappings (``np.memmap``), which are copied to ``f`` piece by piece.
    ``f`` must be a binary file (it is written in order, never sought). ``ids_are_rows``:
    the caller knows that var id ``i`` is row ``i``, so the row lists (constraints,
    allocation order) are written as they are, not through a gathered copy of var ids."""
    r = pruned(r)   # a report over several IPUs: the pairs that share a tile
    s = schema()
    L = {name: _Layout(getattr(s, name)) for name in ("Report", "TargetMemoryInfo", "Column",
                                                      "Csr", "Chunk")}
    seg = _Segment0()
    data: list[np.ndarray] = []  # the byte views of the data segments, in segment order
    root_ptr = seg.alloc(1)
    rl = L["Report"]
    root = seg.struct(root_ptr, rl.data_words, rl.pointers)
    rl.set(seg, root, "formatVersion", FORMAT_VERSION)
    rl.set(seg, root, "numTiles", r.target.num_tiles)
    if r.target.tiles_per_ipu is not None:
        rl.set(seg, root, "tilesPerIPU", r.target.tiles_per_ipu)
    if r.interference_dropped is not None:
        rl.set(seg, root, "interferencePruned", True)
        rl.set(seg, root, "interferenceDropped", r.interference_dropped)
    tl = L["TargetMemoryInfo"]
    tm = seg.struct(rl.ptr(root, "targetMemoryInfo"), tl.data_words, tl.pointers)
    tl.set(seg, tm, "tileMemory", r.target.tile_memory)
    tl.set(seg, tm, "interleavedMemoryStart", r.target.interleaved_memory_start)
    if r.target.supervisor_instr_fetch_delay is not None:
        tl.set(seg, tm, "supervisorInstrFetchDelay", r.target.supervisor_instr_fetch_delay)
        tl.set(seg, tm, "hasSupervisorInstrFetchDelay", True)
    offs = [int(x) for x in r.target.memory_element_offsets]
    at = seg.list(tl.ptr(tm, "memoryElementOffsets"), 5, len(offs), len(offs))
    for i, x in enumerate(offs):
        seg.word(at + i, x)

    cl, kl = L["Column"], L["Chunk"]

    def column(ptr: int, array) -> None:
        array = np.asarray(array)
        dt = array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype
        raw = np.ascontiguousarray(array.astype(dt, copy=False)).reshape(-1).view(np.uint8)
        col = seg.struct(ptr, cl.data_words, cl.pointers)
        cl.set(seg, col, "length", array.size)
        seg.text(cl.ptr(col, "dtype"), dt.str)
        n_chunks = max(1, -(-len(raw) // CHUNK_BYTES))
        words = kl.data_words + kl.pointers
        first = seg.list(cl.ptr(col, "chunks"), 7, n_chunks, 1 + n_chunks * words)
        seg.word(first, n_chunks << 2 | kl.data_words << 32 | kl.pointers << 48)  # the tag
        for i in range(n_chunks):
            piece = raw[i * CHUNK_BYTES:(i + 1) * CHUNK_BYTES]
            if not len(piece):
                continue  # a null Data: the reader counts no bytes
            data.append(piece)
            if len(data) > _MAX_WRITE_SEGMENTS:
                raise ReportError(f"too large for one Cap'n Proto message ({len(data)} chunks "
                                  f"of {CHUNK_BYTES >> 20} MiB; at most {_MAX_WRITE_SEGMENTS})")
            # a double-far pointer: its landing pad (in segment 0) points at word 0 of the
            # chunk's own segment, which holds the bytes alone, so that the chunks of a
            # column follow each other in the file: the reader views them as one array
            pad = seg.alloc(2)
            seg.word(pad, 2 | len(data) << 32)
            seg.word(pad + 1, 1 | 2 << 32 | len(piece) << 35)
            seg.word(kl.ptr(first + 1 + i * words, "data"), 2 | 1 << 2 | pad << 3)

    for field, (attr, _) in _COLUMNS.items():
        column(rl.ptr(root, field), getattr(r, attr))
    names = list(r.categories)
    at = seg.list(rl.ptr(root, "categoryNames"), 6, len(names), len(names))
    for i, name in enumerate(names):
        seg.text(at + i, name)
    blob = r.name_blob
    column(rl.ptr(root, "nameBlob"), np.frombuffer(blob, np.uint8) if isinstance(
        blob, (bytes, bytearray, memoryview)) else blob)
    column(rl.ptr(root, "nameOffsets"), r.name_offsets)
    csl = L["Csr"]
    for field, csr, values in (("elementConstraints", r.element_constraints, r.var_id),
                               ("regionConstraints", r.region_constraints, r.var_id),
                               ("equivalenceClassInterference", r.interference, None),
                               ("allocationOrderByTile", r.allocation_order, r.var_id)):
        c = seg.struct(rl.ptr(root, field), csl.data_words, csl.pointers)
        column(csl.ptr(c, "indptr"), csr.indptr)
        column(csl.ptr(c, "indices"), csr.indices if values is None or ids_are_rows
               else values[csr.indices])
    if r.class_steps is not None:
        rl.set(seg, root, "hasEquivalenceClassSteps", True)
        column(rl.ptr(root, "equivalenceClassSteps"), r.class_steps)

    sizes = [len(seg.buf) // 8] + [-(-len(d) // 8) for d in data]
    table = np.zeros(1 + len(sizes) + (len(sizes) + 1) % 2, "<u4")
    table[0] = len(sizes) - 1
    table[1:1 + len(sizes)] = sizes
    f.write(table.tobytes())
    f.write(seg.buf)
    for d in data:
        for start in range(0, len(d), _PIECE):
            f.write(memoryview(d[start:start + _PIECE]))
        f.write(bytes(-len(d) % 8))
