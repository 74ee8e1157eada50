"""The load stage: read and write reports, JSON or tilemem capnp; every write is atomic.

Reading decides the format by the file's content, never its name: JSON starts with ``{`` (after
optional whitespace or a UTF-8 byte order mark), tilemem's Cap'n Proto report with a message
header whose root is a struct. Anything else gets one plain sentence, as does a path that is not a
regular file (a folder, a pipe: it is never opened, so nothing can hang). Writing goes to a
temporary file beside the target (``.NAME.HOST.PID.*.tmp``), renamed into place only on success;
``check_output`` validates an output path before any work and removes the temporaries of our own
runs that died.
"""
from __future__ import annotations

import contextlib
import glob
import mmap
import re
import os
import socket
import stat
import tempfile
import warnings
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from ..errors import ReportError, ReportWarning
from ..model import Report, ReportSource

FORMATS = (".json", ".capnp")
_BOM = b"\xef\xbb\xbf"
#: UTF-16 JSON without a byte order mark: a brace and a zero byte (little or big endian). A
#: Cap'n Proto header cannot start so (it would announce over 30,000 segments).
_UTF16_STARTS = (b"{\0", b"\0{")


def check_input(path) -> None:
    """Raise ``ReportError`` (naming ``path``) unless it is a regular file we may read; it is
    not opened, so a FIFO with no writer cannot make this hang."""
    try:
        st = os.stat(path)
        _require_regular(st)
        if not os.access(path, os.R_OK):
            raise ReportError("cannot read: permission denied")
    except FileNotFoundError:
        raise ReportError("no such file", path=str(path)) from None
    except OSError as e:
        raise ReportError(f"cannot read: {e.strerror}", path=str(path)) from None
    except ReportError as e:
        raise e.with_path(str(path)) from None


def open_report(path) -> tuple[mmap.mmap | bytes, ReportSource]:
    """The file's bytes (mapped read-only) and what it is (``ReportSource``: its format told
    by content, its size and modification time): the one place a report's format is
    decided. A plain-words ``ReportError`` for anything else (the caller adds the path)."""
    buf, st = _map_stat(path)
    return buf, ReportSource(str(path), report_format(buf), st.st_size, st.st_mtime_ns)


def map_file(path) -> mmap.mmap | bytes:
    """The file's bytes, mapped read-only; a plain-words ``ReportError`` for anything else."""
    return _map_stat(path)[0]


def _map_stat(path) -> tuple[mmap.mmap | bytes, os.stat_result]:
    """The file's bytes, mapped read-only, and its ``fstat``.

    The path is checked before it is opened, and opened non-blocking, so a FIFO with no writer
    (or a device) is refused instead of blocking for ever.
    """
    check_input(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise ReportError(f"cannot read: {e.strerror}") from None
    try:
        st = os.fstat(fd)  # the path may have been swapped since the stat above
        _require_regular(st)
        if st.st_size == 0:
            raise ReportError("the file is empty")
        try:
            return mmap.mmap(fd, 0, access=mmap.ACCESS_READ), st
        except (OSError, ValueError):  # a file system that cannot map files: read it
            pass
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(), st
    finally:
        os.close(fd)


def _require_regular(st: os.stat_result) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise ReportError("is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(st.st_mode) else
                "a socket" if stat.S_ISSOCK(st.st_mode) else "a device")
        raise ReportError(f"is {kind}, not a regular file: save it to a file first")


def report_format(buf) -> str:
    """``"json"`` or ``"capnp"``, by content. Raises ``ReportError`` for anything else.

    >>> report_format(b'  {"numTiles": 2}'), report_format(b"\\xef\\xbb\\xbf{}")
    ('json', 'json')
    >>> report_format(b"numTiles,2")
    Traceback (most recent call last):
    ...
    tilemem.errors.ReportError: not a report: neither JSON (which starts with '{') nor tilemem's Cap'n Proto format
    """
    head = bytes(buf[:4])
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or head[:2] in _UTF16_STARTS:
        raise ReportError("the file is UTF-16 text: a JSON report must be UTF-8")
    start = len(_BOM) if head.startswith(_BOM) else 0
    first = re.compile(rb"[^ \t\r\n]").search(buf, start)
    if first is None:
        raise ReportError("the file holds only whitespace")
    if buf[first.start():first.start() + 1] in (b"{", b"["):
        return "json"
    from .capnpio import message_header

    found = message_header(buf)
    if found is not None:
        if found.size > len(buf) or found.root is None:
            raise ReportError(f"the Cap'n Proto report is truncated: its header announces "
                              f"{max(found.size, found.header + 8):,} bytes, the file has "
                              f"{len(buf):,}")
        return "capnp"
    raise ReportError("not a report: neither JSON (which starts with '{') nor tilemem's "
                      "Cap'n Proto format")


def file_format(path) -> str:
    """The format of the file at ``path`` (``open_report``'s, judged by content as
    ``load_report`` judges it; a ``ReportError`` when it cannot be read or is neither)."""
    try:
        buf, source = open_report(path)
    except ReportError as e:
        raise e.with_path(str(path)) from None
    if hasattr(buf, "close"):
        buf.close()
    return source.format


def load_report(path, *, trusted: bool = False) -> Report:
    """Read a lowered-variables report (JSON or tilemem capnp, by content). Raises
    ``ReportError`` (one line naming the file, the field and the record); warns
    (``ReportWarning``) about what it repaired, e.g. names that are not valid UTF-8.
    ``trusted``: a capnp report another process validated whole (``capnpio.read_capnp``'s
    ``trusted``: its values are not read); a JSON report is always checked.

    >>> import tempfile, os
    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0], tile=[0], size=[8], alignment=[4], offset=[0],
    ...                         category=["variable"], eq_class=[0], interference=[[]])
    >>> p = os.path.join(tempfile.mkdtemp(), "r.json")
    >>> save_report(r, p); load_report(p) == r
    True
    """
    from .capnpio import read_capnp
    from .jsonio import read_json

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ReportWarning)
        try:
            buf, source = open_report(path)
            if source.format == "json":
                _json_fits(len(buf), path)
                skip = len(_BOM) if bytes(buf[:3]) == _BOM else 0
                report = read_json(memoryview(buf)[skip:] if skip else buf)
            else:
                report = read_capnp(buf, trusted=trusted)
        except ReportError as e:
            raise e.with_path(str(path)) from None
        except OSError as e:
            raise ReportError(f"cannot read: {e.strerror}", path=str(path)) from None
    for w in caught:  # the readers do not know the path: add it
        if isinstance(w.message, ReportWarning):
            warnings.warn(w.message.with_path(str(path)), stacklevel=2)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    object.__setattr__(report, "file", source)   # this very report is that file's
    return report


#: Anonymous memory the JSON reader needs, per byte of the file: the columns and a batch
#: of decoded records beside the mapped file (``tests/test_load_memory.py`` holds the whole
#: peak, file pages included, under three times the file).
JSON_BYTES_PER_FILE_BYTE = 2.0


def available_memory() -> int | None:
    """Bytes this process may still use: ``TILEMEM_MEMORY_AVAILABLE`` when set (a cap the
    user gives), else the kernel's ``MemAvailable``; ``None`` when unknown."""
    cap = os.environ.get("TILEMEM_MEMORY_AVAILABLE")
    if cap:
        try:
            return int(float(cap))
        except ValueError:
            raise ReportError(f"TILEMEM_MEMORY_AVAILABLE must be a number of bytes, got "
                              f"{cap!r}") from None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _json_fits(size: int, path) -> None:
    """Refuse, before reading it, a JSON report too large for the memory left: reading it
    would end in the kernel's out-of-memory killer after minutes. ``convert`` to capnp
    streams it in bounded memory, and every command reads the capnp as views."""
    need = int(size * JSON_BYTES_PER_FILE_BYTE)
    have = available_memory()
    if have is not None and need > have:
        raise ReportError(
            f"a JSON report of {_amount(size)} needs about {_amount(need)} of memory to read "
            f"and {_amount(have)} is available: convert it first (streamed, in "
            f"bounded memory): tilemem convert {path} {Path(str(path)).with_suffix('.capnp')}")


def _amount(n: int) -> str:
    """Bytes in the unit that shows them (a small machine's cap is not "0.0 GB").

    >>> _amount(16_459_669_878), _amount(9_779_926), _amount(512)
    ('16.46 GB', '9.78 MB', '512 bytes')
    """
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} bytes"


# ---- writing ------------------------------------------------------------------------------

def _temporary_prefix(path: Path) -> str:
    """``.NAME.HOST.PID.``: ``remove_stale_temporaries`` tells a dead run's file by it."""
    host = socket.gethostname().split(".")[0].replace(os.sep, "_") or "host"
    return f".{path.name}.{host}.{os.getpid()}."


@contextlib.contextmanager
def atomic_write(path, mode: str = "wb") -> Iterator[BinaryIO]:
    """Write to a temporary file beside ``path`` and rename it into place only on success."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=_temporary_prefix(path), suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, mode) as f:
            yield f
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give what open() would
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def remove_stale_temporaries(path) -> list[Path]:
    """Delete the temporaries ``atomic_write`` left beside ``path`` in runs that were killed.

    Only files of our naming, ``.NAME.HOST.PID.*.tmp``, written on this host by a process that
    no longer runs (a live run's temporary is left alone). Returns the files removed.
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    host = _temporary_prefix(path).split(".")[-3]
    removed = []
    try:
        candidates = list(directory.glob(f".{glob.escape(path.name)}.*.tmp"))
    except OSError:
        return removed
    for p in candidates:
        parts = p.name[len(path.name) + 2:].split(".")
        if len(parts) < 4 or parts[0] != host or not parts[1].isdigit():
            continue
        if _alive(int(parts[1])):
            continue
        with contextlib.suppress(OSError):
            p.unlink()
            removed.append(p)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def check_output(path, formats: tuple[str, ...] = (), *, option: str = "--output") -> Path:
    """Check before any work that ``path`` can be written: a known extension (one of
    ``formats``, if given), an existing folder we may write in, not a folder itself. Removes
    stale temporaries of ours beside it. Raises ``ReportError`` naming ``option``.

    >>> check_output("/no/such/folder/out.json", (".json",))
    Traceback (most recent call last):
    ...
    tilemem.errors.ReportError: /no/such/folder/out.json: the folder /no/such/folder does not exist (field --output)
    """
    p = Path(path)
    if p.is_dir():
        raise ReportError("is a folder: give a file name", path=str(path), field=option)
    suffix = p.suffix.lower()
    if formats and suffix not in formats:
        known = ", ".join(formats[:-1]) + (" or " if len(formats) > 1 else "") + formats[-1]
        what = f"unknown output format {suffix!r}" if suffix else "no file extension"
        raise ReportError(f"{what}: use {known}", path=str(path), field=option)
    directory = p.parent if str(p.parent) else Path(".")
    if not directory.exists():
        raise ReportError(f"the folder {directory} does not exist", path=str(path),
                          field=option)
    if not directory.is_dir():
        raise ReportError(f"{directory} is not a folder", path=str(path), field=option)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ReportError(f"cannot write in the folder {directory} (permission denied)",
                          path=str(path), field=option)
    remove_stale_temporaries(p)
    return p


def save_report(report: Report, path) -> None:
    """Write a report as JSON or capnp by the extension of ``path`` (atomically); an
    ``IpuPieces`` (a report made IPU by IPU) as capnp, one IPU at a time."""
    from ..model.ipuview import order_by_tile
    from .capnpio import write_capnp_streaming
    from .jsonio import write_json

    fmt = Path(path).suffix.lower()
    if fmt not in FORMATS:
        raise ReportError(f"unknown output format {fmt!r}: use .json or .capnp", path=str(path))
    # the streaming writer: no second copy of the report in Cap'n Proto's memory, and every
    # column's chunks back to back in the file (read as one view)
    writer: Callable = write_json if fmt == ".json" else write_capnp_streaming
    from ..model.ipuview import IpuPieces

    if isinstance(report, IpuPieces):   # made IPU by IPU: written so (the Pod format)
        from .pieces import write_capnp_pieces

        if fmt != ".capnp":
            raise ReportError("a report made IPU by IPU is written as .capnp only",
                              path=str(path))
        with atomic_write(path) as f:
            write_capnp_pieces(report, f, Path(path).parent if str(Path(path).parent) else ".")
        return
    # over several IPUs, rows by (IPU, tile): one IPU's variables are then one slice of every
    # column when read back (``tilemem.model.ipuview``); the same report, its var ids travel
    # with their rows. One IPU's report is its own slice: its rows are written as they are
    if report.target.num_ipus > 1:
        report = order_by_tile(report)
    with atomic_write(path) as f:
        writer(report, f)
