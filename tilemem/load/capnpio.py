"""Read and write tilemem's Cap'n Proto report (``schemas/vars.capnp``).

Reading maps the file and views every column in place (no copy of the data), with traversal
and nesting limits derived from the file's size, so a hostile file cannot make the reader
allocate more than the file holds.
"""
from __future__ import annotations

import mmap
import os
from functools import lru_cache
from typing import BinaryIO

import numpy as np

from ..errors import ReportError
from ..model import FLAG_FIELDS, Csr, Report
from ..target import Target

FORMAT_VERSION = 1
CHUNK_BYTES = 1 << 28  # below Cap'n Proto's 2^29-element list limit
_DTYPES = {"<i8", "<i2", "|b1", "|u1", "<u8", "<i4"}

# column name in the schema -> (Report attribute, dtype)
_COLUMNS = {
    "var": ("var_id", "<i8"), "allocated": ("allocated", "|b1"), "tile": ("tile", "<i8"),
    "sizeBytes": ("size", "<i8"), "alignment": ("alignment", "<i8"),
    "offset": ("offset", "<i8"), "category": ("category", "<i2"),
    "equivalenceClass": ("eq_class", "<i8"),
    **{v: (k, "|b1") for k, v in FLAG_FIELDS.items() if k != "allocated"},
}


@lru_cache(maxsize=1)
def schema():
    import capnp

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tilemem/
    path = os.path.join(package, "vars.capnp")
    if not os.path.exists(path):  # running from a source tree without the link
        path = os.path.join(package, os.pardir, "schemas", "vars.capnp")
    return capnp.load(path)


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

class _Reader:
    def __init__(self, buf):
        self.buf = buf
        self.base = np.frombuffer(buf, np.uint8).ctypes.data if len(buf) else 0

    def column(self, col, name: str, expect: str | None = None) -> np.ndarray:
        dtype = col.dtype
        if dtype not in _DTYPES or (expect is not None and dtype != expect):
            raise ReportError(f"column has dtype {dtype!r}, expected {expect or sorted(_DTYPES)}",
                              field=name)
        dt = np.dtype(dtype)
        parts = []
        for chunk in col.chunks:
            view = chunk.get_data_as_view("data")
            if len(view) == 0:
                continue
            addr = np.frombuffer(view, np.uint8).ctypes.data
            off = addr - self.base
            if not 0 <= off <= len(self.buf) - len(view):  # not inside our mapping: copy
                parts.append(np.frombuffer(bytes(view), np.uint8))
            else:  # a view of the mapped file that keeps the mapping alive
                parts.append(np.frombuffer(self.buf, np.uint8, len(view), off))
        raw = parts[0] if len(parts) == 1 else (np.concatenate(parts) if parts
                                                else np.zeros(0, np.uint8))
        if len(raw) != col.length * dt.itemsize:
            raise ReportError(f"column holds {len(raw)} bytes, expected {col.length} x "
                              f"{dt.itemsize}", field=name)
        if raw.ctypes.data % dt.itemsize:
            raw = raw.copy()
        return raw.view(dt)

    def csr(self, msg, name: str) -> Csr:
        indptr = self.column(msg.indptr, f"{name}.indptr", "<i8")
        indices = self.column(msg.indices, f"{name}.indices", "<i8")
        if len(indptr) == 0 or indptr[0] != 0 or np.any(np.diff(indptr) < 0) \
                or indptr[-1] != len(indices):
            raise ReportError("CSR offsets are not a valid partition of the entries",
                              field=f"{name}.indptr")
        return Csr(indptr, indices)


def read_capnp(buf) -> Report:
    """Decode a tilemem capnp report from a buffer (bytes or mmap). Raises ``ReportError``."""
    import capnp

    from .validate import validate_report, validate_target

    s = schema()
    words = max(len(buf) // 8, 1)
    try:
        m = s.Report.from_bytes(buf, traversal_limit_in_words=2 * words + 1024,
                                nesting_limit=16).__enter__()
        version = m.formatVersion
    except (capnp.KjException, ValueError) as e:
        raise ReportError(f"not a tilemem Cap'n Proto report: {str(e).splitlines()[0]}") from None
    if version != FORMAT_VERSION:
        raise ReportError(f"format version {version} is not supported (expected "
                          f"{FORMAT_VERSION})", field="formatVersion")
    try:
        ti = m.targetMemoryInfo
        offsets = np.asarray(list(ti.memoryElementOffsets), np.int64)
        validate_target(m.numTiles, ti.tileMemory, ti.interleavedMemoryStart, offsets)
        target = Target(m.numTiles, ti.tileMemory, ti.interleavedMemoryStart, offsets,
                        ti.supervisorInstrFetchDelay if ti.hasSupervisorInstrFetchDelay else None)
        rd = _Reader(buf)
        cols = {attr: rd.column(getattr(m, field), field, dt)
                for field, (attr, dt) in _COLUMNS.items()}
        n = len(cols["var_id"])
        for field, (attr, _) in _COLUMNS.items():
            if len(cols[attr]) != n:
                raise ReportError(f"column has {len(cols[attr])} rows, expected {n}", field=field)
        cats = tuple(str(c) for c in m.categoryNames)
        if n and (cols["category"].min() < 0 or cols["category"].max() >= len(cats)):
            raise ReportError("category code outside categoryNames", field="category")
        blob = rd.column(m.nameBlob, "nameBlob", "|u1")
        name_offsets = rd.column(m.nameOffsets, "nameOffsets", "<i8")
        if len(name_offsets) != n + 1 or (n and (name_offsets[0] != 0 or np.any(
                np.diff(name_offsets) < 0) or name_offsets[-1] != len(blob))):
            raise ReportError("name offsets do not partition nameBlob", field="nameOffsets")
        report = Report(
            target=target, **cols, name_blob=blob.tobytes(), name_offsets=name_offsets,
            categories=cats, element_constraints=Csr.empty(n), region_constraints=Csr.empty(n),
            interference=rd.csr(m.equivalenceClassInterference, "equivalenceClassInterference"),
            allocation_order=Csr.empty(target.num_tiles),
            class_steps=(rd.column(m.equivalenceClassSteps, "equivalenceClassSteps", "<i8")
                         .reshape(-1, 2) if m.hasEquivalenceClassSteps else None))
        lookup = report.rows_of_vars
        for attr, field in (("element_constraints", "elementConstraints"),
                            ("region_constraints", "regionConstraints"),
                            ("allocation_order", "allocationOrderByTile")):
            c = rd.csr(getattr(m, field), field)
            want = n if attr != "allocation_order" else target.num_tiles
            if c.num_rows != want:
                raise ReportError(f"has {c.num_rows} rows, expected {want}", field=field)
            object.__setattr__(report, attr, Csr(c.indptr, lookup(c.indices)))
    except capnp.KjException as e:
        raise ReportError(f"damaged Cap'n Proto report: {str(e).splitlines()[0]}") from None
    validate_report(report)
    return report


def read_capnp_file(path) -> Report:
    with open(path, "rb") as f:
        try:
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:
            raise ReportError("empty file") from None
    return read_capnp(buf)  # columns keep the mapping alive; it closes when they go
