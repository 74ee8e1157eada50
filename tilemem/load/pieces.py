"""Writing a report that comes one IPU at a time (``tilemem.model.ipuview.IpuPieces``).

The Cap'n Proto file holds each column whole, so the pieces' columns are first appended to
one spool file a column (beside the output, removed after), then mapped and written by the
one writer, ``write_capnp_streaming``. Each piece's interference pairs (a class may be on
several IPUs) are spooled as sorted keys ``a * classes + b`` and merged block of classes by
block of classes: the union, deduplicated and symmetric, as the whole report's relation, in
memory that does not grow with the IPUs.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np

from ..model import Csr, Report
from ..model.ipuview import ROW_COLUMNS, IpuPieces

#: Interference keys merged at a time (int64s: 16 Mi keys, 128 MiB and their unique).
MERGE_KEYS = 1 << 24
#: The per-variable columns spooled from each piece; var ids are numbered afresh (var ``i`` is
#: row ``i``, as the generator numbers them).
_ROW_COLUMNS = tuple(c for c in ROW_COLUMNS if c != "var_id")


class _Spool:
    """Append-only column files in a directory, mapped back when done."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.files: dict = {}
        self.dtypes: dict = {}
        self.counts: dict = {}

    def append(self, name: str, array) -> None:
        array = np.ascontiguousarray(array)
        if name not in self.files:
            self.files[name] = open(self.dir / name, "wb")
            self.dtypes[name] = array.dtype
            self.counts[name] = 0
        assert array.dtype == self.dtypes[name], (name, array.dtype)
        self.files[name].write(memoryview(array.reshape(-1).view(np.uint8)))
        self.counts[name] += array.size

    def mapped(self, name: str, dtype=None) -> np.ndarray:
        if name not in self.files:
            return np.zeros(0, dtype)
        self.files.pop(name).close()
        if self.counts[name] == 0:
            return np.zeros(0, self.dtypes[name])
        return np.memmap(self.dir / name, self.dtypes[name], "r", shape=(self.counts[name],))

    def close(self) -> None:
        for fh in self.files.values():
            fh.close()
        self.files.clear()


def _indptr(lengths: np.ndarray) -> np.ndarray:
    """An indptr from row lengths."""
    ptr = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=ptr[1:])
    return ptr


def spooled_report(p: IpuPieces, directory: Path) -> Report:
    """The report of the pieces, its columns mapped from spool files in ``directory``."""
    spool = _Spool(directory)
    try:
        return _spooled(p, spool)
    finally:
        spool.close()


def _spooled(p: IpuPieces, spool: _Spool) -> Report:
    K, T = p.num_classes, p.target.num_tiles
    rows = blob = 0
    order_lengths = np.zeros(T, np.int64)
    keys: list[str] = []
    last_tile = -1
    dropped = None   # as the pieces say: None when one IPU's relation is whole, else pruned
    for k, piece in enumerate(p.pieces):
        if piece.interference_dropped is not None:
            dropped = -1
        n = piece.num_vars
        if piece.num_classes != K or piece.num_tiles != T:
            raise ValueError(f"piece {k}: {piece.num_classes} classes and {piece.num_tiles} "
                             f"tiles, expected {K} and {T}")
        if n:
            lo, hi = int(piece.tile.min()), int(piece.tile.max())
            if lo <= last_tile:
                raise ValueError(f"piece {k} has tiles from {lo}, not after the last "
                                 f"piece's (up to {last_tile}): pieces go IPU by IPU")
            last_tile = hi
        spool.append("var_id", np.arange(rows, rows + n, dtype=np.int64))
        for name in _ROW_COLUMNS:
            spool.append(name, getattr(piece, name))
        spool.append("name_blob", np.frombuffer(piece.name_blob, np.uint8))
        spool.append("name_offsets", np.asarray(piece.name_offsets[:-1], np.int64) + blob)
        for name in ("element_constraints", "region_constraints"):
            csr = getattr(piece, name)
            spool.append(name + ".len", csr.lengths().astype(np.int64, copy=False))
            spool.append(name + ".idx", np.asarray(csr.indices, np.int64) + rows)
        order_lengths += piece.allocation_order.lengths()
        spool.append("allocation_order.idx",
                     np.asarray(piece.allocation_order.indices, np.int64) + rows)
        inter = piece.interference
        key = f"inter.{k}"
        spool.append(key, inter.row_ids() * K + np.asarray(inter.indices, np.int64))
        keys.append(key)
        rows += n
        blob += len(piece.name_blob)
    spool.append("name_offsets", np.array([blob], np.int64))
    cols = {name: spool.mapped(name) for name in ("var_id", *_ROW_COLUMNS)}
    cols["category"] = cols["category"].astype(np.int16, copy=False)
    cons = {name: Csr(_indptr(spool.mapped(name + ".len", np.int64)),
                    spool.mapped(name + ".idx", np.int64))
            for name in ("element_constraints", "region_constraints")}
    blob_col = spool.mapped("name_blob", np.uint8)
    return Report(
        target=p.target, **cols, name_blob=blob_col if len(blob_col) else b"",
        name_offsets=spool.mapped("name_offsets"), categories=tuple(p.categories), **cons,
        interference=_merged_interference(spool, keys, K),
        allocation_order=Csr(_indptr(order_lengths),
                             spool.mapped("allocation_order.idx", np.int64)),
        class_steps=p.class_steps, interference_dropped=dropped)


def _merged_interference(spool: _Spool, keys: list[str], K: int) -> Csr:
    """The union of the pieces' sorted keys as a CSR over ``K`` classes, block by block."""
    runs = [spool.mapped(k, np.int64) for k in keys]
    total = sum(len(x) for x in runs)
    lengths = np.zeros(K, np.int64)
    edges = np.unique(np.linspace(0, K, max(1, -(-total // MERGE_KEYS)) + 1)
                      .round().astype(np.int64))
    for r0, r1 in zip(edges[:-1].tolist(), edges[1:].tolist()):
        got = [x[np.searchsorted(x, r0 * K):np.searchsorted(x, r1 * K)] for x in runs]
        u = np.unique(np.concatenate(got)) if got else np.zeros(0, np.int64)
        lengths[r0:r1] = np.bincount(u // K - r0, minlength=r1 - r0)
        spool.append("interference.idx", u % K)
    if "interference.idx" not in spool.files:
        spool.append("interference.idx", np.zeros(0, np.int64))
    return Csr(_indptr(lengths), spool.mapped("interference.idx"))


def write_capnp_pieces(p: IpuPieces, f, spool_dir) -> None:
    """Write the pieces to the binary file ``f`` as one capnp report, spooling in a fresh
    directory under ``spool_dir`` (removed after)."""
    from .capnpio import write_capnp_streaming

    directory = Path(tempfile.mkdtemp(prefix=".tilemem-spool-", dir=spool_dir))
    try:
        r = spooled_report(p, directory)
        write_capnp_streaming(r, f, ids_are_rows=True)
        del r
    finally:
        shutil.rmtree(directory, ignore_errors=True)
