"""Load and save reports by file extension; every write is atomic (temporary file, rename)."""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from ..errors import ReportError
from ..model import Report

FORMATS = (".json", ".capnp")


def report_format(path) -> str:
    """``"json"`` or ``"capnp"``: by extension, else by the first byte (``{`` is JSON)."""
    suffix = Path(path).suffix.lower()
    if suffix in FORMATS:
        return suffix[1:]
    try:
        with open(path, "rb") as f:
            head = f.read(64).lstrip()
    except OSError as e:
        raise ReportError(f"cannot read: {e.strerror}", path=path) from None
    return "json" if head.startswith(b"{") else "capnp"


def load_report(path) -> Report:
    """Read a lowered-variables report (JSON or tilemem capnp). Raises ``ReportError``.

    >>> import tempfile, os
    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0], tile=[0], size=[8], alignment=[4], offset=[0],
    ...                         category=["variable"], eq_class=[0], interference=[[]])
    >>> p = os.path.join(tempfile.mkdtemp(), "r.json")
    >>> save_report(r, p); load_report(p) == r
    True
    """
    from .capnpio import read_capnp_file
    from .jsonio import read_json_file

    try:
        fmt = report_format(path)
        return read_json_file(path) if fmt == "json" else read_capnp_file(path)
    except ReportError as e:
        raise e.with_path(str(path)) from None
    except OSError as e:
        raise ReportError(f"cannot read: {e.strerror}", path=str(path)) from None


@contextlib.contextmanager
def atomic_write(path, mode: str = "wb") -> Iterator[BinaryIO]:
    """Write to a temporary file beside ``path`` and rename it into place only on success."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
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


def save_report(report: Report, path) -> None:
    """Write a report as JSON or capnp by the extension of ``path`` (atomically)."""
    from .capnpio import write_capnp
    from .jsonio import write_json

    fmt = Path(path).suffix.lower()
    if fmt not in FORMATS:
        raise ReportError(f"unknown output format {fmt!r}: use .json or .capnp", path=str(path))
    writer: Callable = write_json if fmt == ".json" else write_capnp
    with atomic_write(path) as f:
        writer(report, f)
