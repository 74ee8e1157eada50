"""The journal of a packing run: finished tiles, appended as they complete, so a run that is
killed, crashes or meets a full disk can resume without solving them again.

The journal lives beside the output (``OUT.journal``). It is append-only: a header record
naming the report (a content digest, ``report_digest``) and the settings that decide the
results, then one record per finished tile. Every record is framed as

    uint32 little-endian payload length | uint32 little-endian CRC-32 of the payload | payload

with a msgpack payload (``msgspec``). A kill can leave the last record half-written: reading
stops at the first record whose frame is incomplete or whose checksum fails, drops it and
everything after it (an append-only file damaged in the middle cannot be trusted past the
damage), and cuts the file back to the last good record so that new records follow it.

Records are flushed to the operating system as they are appended (a killed process loses
nothing written), and synced to the disk at most once a second and on close (a power cut loses
at most the last second).

A journal written for another report or other settings is refused with one line
(``ReportError``), before any work starts; ``open_journal(..., resume=False)`` starts afresh.

>>> import tempfile, os
>>> from tilemem.pack.result import TileResult
>>> d = tempfile.mkdtemp()
>>> out = os.path.join(d, "alloc.json")
>>> done, j = open_journal(out, "abc", {"method": "auto"})
>>> done
{}
>>> res = TileResult(tile=3, method="heuristic", status="optimal", overflow_bytes=0,
...                  total_including_gaps=64, bound=64, bound_exact=True, gap=0.0, seconds=0.1)
>>> j.append(3, res, np.array([0, 16, 32]))
>>> j.close()
>>> done, j = open_journal(out, "abc", {"method": "auto"})
>>> done[3][0] == res, done[3][1].tolist()
(True, [0, 16, 32])
>>> j.close()
>>> open_journal(out, "other", {"method": "auto"})
Traceback (most recent call last):
...
tilemem.errors.ReportError: .../alloc.json.journal: was written for another report (...): ...
"""
from __future__ import annotations

import json
import os
import struct
import time
import zlib
from pathlib import Path
from typing import Any, Mapping

import msgspec
from msgspec.structs import asdict
import numpy as np

from ...errors import ReportError
from ..result import TileResult

MAGIC = b"tilemem-journal\n"
VERSION = 1
_FRAME = struct.Struct("<II")
#: A payload larger than this is not one of ours (a tile of a million variables is 8 MB).
MAX_PAYLOAD = 1 << 30
#: Seconds between fsyncs of the journal (a kill loses nothing; a power cut this much).
SYNC_INTERVAL = 1.0
#: The phase of a tile's final result; the driver may journal earlier passes under other names.
FINAL = "final"
#: The phase of a tile's first-pass result (heuristic or replay) that the exact pass may improve.
FIRST = "first"


def journal_path(out_path) -> Path:
    """Where the journal of output ``out_path`` lives: beside it, ``OUT.journal``."""
    p = Path(out_path)
    return p.with_name(p.name + ".journal")


def report_digest(report) -> str:
    """Hex digest of everything in a report that decides an allocation: target, every
    variable column but the names, constraints, interference and allocation order (the
    report's own offsets too: ``replay`` counts matches with them). Format-independent: the
    JSON and capnp files of one report have the same digest.

    >>> from tilemem.model import Report
    >>> kw = dict(var_id=[0, 1], tile=[0, 0], alignment=[4, 4], offset=[0, 8],
    ...           category=["variable"] * 2, eq_class=[0, 1], interference=[[1], [0]])
    >>> a = Report.from_columns(size=[8, 8], **kw)
    >>> report_digest(a) == report_digest(Report.from_columns(size=[8, 8], **kw))
    True
    >>> report_digest(a) == report_digest(Report.from_columns(size=[8, 12], **kw))
    False
    """
    import hashlib

    h = hashlib.blake2b(digest_size=20)
    t = report.target
    h.update(repr((t.num_tiles, t.tile_memory, t.interleaved_memory_start,
                   t.memory_element_offsets.tolist(), t.tiles_per_ipu)).encode())
    cols = [report.var_id, report.tile, report.size, report.alignment, report.offset,
            report.category, report.eq_class, report.allocated, report.always_live,
            report.executable, report.vertex_code, report.lowest_256kb,
            report.in_interleaved_mem, report.is_constant]
    for csr in (report.element_constraints, report.region_constraints, report.interference,
                report.allocation_order):
        cols += [csr.indptr, csr.indices]
    for a in cols:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(memoryview(a).cast("B"))
    h.update("\x00".join(report.categories).encode())
    return h.hexdigest()


class _Record(msgspec.Struct, array_like=True):
    phase: str
    tile: int
    result: dict
    offsets: bytes          # int64 little-endian, the tile's local offsets


class _Header(msgspec.Struct):
    version: int
    report: str
    settings: str           # canonical JSON of the settings


def _canonical(settings: Mapping[str, Any]) -> str:
    return json.dumps(dict(settings), sort_keys=True, default=str, separators=(",", ":"))


def _frame(payload: bytes) -> bytes:
    return _FRAME.pack(len(payload), zlib.crc32(payload)) + payload


def _read_frames(buf: bytes, start: int) -> list[tuple[bytes, int]]:
    """``(payload, end position)`` of every whole, checksummed record from ``start``, up to
    the first torn or damaged one."""
    out, pos = [], start
    while pos + _FRAME.size <= len(buf):
        n, crc = _FRAME.unpack_from(buf, pos)
        end = pos + _FRAME.size + n
        if n > MAX_PAYLOAD or end > len(buf):
            break
        payload = buf[pos + _FRAME.size:end]
        if zlib.crc32(payload) != crc:
            break
        out.append((payload, end))
        pos = end
    return out


class Journal:
    """Appender of finished tiles; ``records[phase][tile] = (TileResult, local offsets)``
    holds what the file held when opened (every phase), ``dropped`` the bytes of a torn
    tail that were cut off."""

    def __init__(self, path: Path, f, records: dict, dropped: int):
        self.path = path
        self._f = f
        self.records = records
        self.dropped = dropped
        self._enc = msgspec.msgpack.Encoder()
        self._synced = time.monotonic()

    def append(self, tile: int, result: TileResult, offsets, phase: str = FINAL) -> None:
        """Record a finished tile (one write; flushed now, synced at most once a second)."""
        off = np.ascontiguousarray(np.asarray(offsets, dtype="<i8"))
        payload = self._enc.encode(_Record(phase, int(tile), asdict(result), off.tobytes()))
        self._f.write(_frame(payload))
        self._f.flush()
        now = time.monotonic()
        if now - self._synced >= SYNC_INTERVAL:
            os.fsync(self._f.fileno())
            self._synced = now

    def close(self) -> None:
        if self._f is not None and not self._f.closed:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()

    def discard(self) -> None:
        """Close and delete the journal (once the output it protects is safely written)."""
        self.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_journal(out_path, report_hash: str, settings: Mapping[str, Any], *,
                 resume: bool = True) -> tuple[dict[int, tuple[TileResult, np.ndarray]],
                                               Journal]:
    """Open (or start) the journal of output ``out_path`` for a run on the report with
    digest ``report_hash`` with ``settings`` (anything that decides the results: method, time
    limit, seed, deterministic, rules, ...; compared as canonical JSON).

    Returns ``(finished, journal)``: the final results already recorded, tile ->
    ``(TileResult, local offsets)``, and the appender (``journal.records`` has every phase).
    With ``resume=False`` an existing journal is replaced by a new one. Raises
    ``ReportError`` (one line, naming the journal) when the journal belongs to another
    report or other settings, or is not a journal.
    """
    path = journal_path(out_path)
    canon = _canonical(settings)
    records: dict[str, dict[int, tuple[TileResult, np.ndarray]]] = {}
    dropped = 0
    if resume and path.exists():
        try:
            buf = path.read_bytes()
        except OSError as e:
            raise ReportError(f"cannot read: {e.strerror or e}", path=path) from None
        if not buf.startswith(MAGIC):
            raise ReportError("is not a tilemem journal: delete it or run without --resume",
                              path=path)
        frames = _read_frames(buf, len(MAGIC))
        header = None
        if frames:
            try:
                header = msgspec.msgpack.decode(frames[0][0], type=_Header)
            except msgspec.DecodeError:
                header = None
        if header is None or header.version != VERSION:
            raise ReportError("has no readable header (journal version "
                              f"{VERSION}): delete it or run without --resume", path=path)
        if header.report != report_hash:
            raise ReportError("was written for another report (content digest other than "
                              "this report's): delete it or run without --resume", path=path)
        if header.settings != canon:
            raise ReportError(f"was written with other settings ({_diff(header.settings, canon)})"
                              ": delete it or run without --resume", path=path)
        dec = msgspec.msgpack.Decoder(_Record)
        end = frames[0][1]
        for payload, stop in frames[1:]:
            try:
                rec = dec.decode(payload)
                # msgpack reads a tuple back as a list
                res = TileResult(**{k: tuple(v) if isinstance(v, list) else v
                                    for k, v in rec.result.items()})
            except (msgspec.DecodeError, TypeError):
                break  # a checksummed record we cannot read: treat as the torn end
            off = np.frombuffer(rec.offsets, dtype="<i8").astype(np.int64)
            records.setdefault(rec.phase, {})[rec.tile] = (res, off)
            end = stop
        dropped = len(buf) - end
        f = open(path, "r+b")
        f.truncate(end)
        f.seek(end)
    else:
        try:
            f = open(path, "wb")
        except OSError as e:
            raise ReportError(f"cannot write the journal: {e.strerror or e}", path=path) \
                from None
        header = _Header(VERSION, report_hash, canon)
        f.write(MAGIC + _frame(msgspec.msgpack.encode(header)))
        f.flush()
        os.fsync(f.fileno())
    return records.get(FINAL, {}), Journal(path, f, records, dropped)


def _diff(old: str, new: str) -> str:
    """The settings that differ, ``name: old -> new``, for the refusal message."""
    a, b = json.loads(old), json.loads(new)
    keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return ", ".join(f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in keys[:4])
