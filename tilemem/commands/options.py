"""What every command shares: the REPORT argument, ``--tiles`` parsing, JSON on stdout and the
rich console the text views (``tilemem.text``) print to. Part of the CLI: no stage imports
click."""
from __future__ import annotations

import os
import sys
from typing import Any

import click


def _json_text(obj: Any) -> bytes:
    from ..api.files import json_text

    return json_text(obj)


def echo_json(obj: Any) -> None:
    sys.stdout.write(_json_text(obj).decode())


def write_json(path, obj: Any) -> None:
    """What ``echo_json`` prints, written to ``path`` atomically."""
    from ..load import atomic_write

    with atomic_write(path) as f:
        f.write(_json_text(obj))


def console():
    """The console every command prints its text views on (made here only).

    On a terminal, lines wrap at the terminal's width (or at ``COLUMNS`` when it is set, as
    rich reads it). With stdout piped or redirected and no ``COLUMNS``, nothing wraps: rich
    would take the width of a terminal on stdin, or 80 columns, and break lines inside
    phrases and numbers; a file, a pager or ``grep`` gets each line whole, tables at their
    natural width. Asked of stdout itself, not of rich's ``is_terminal``, which
    ``FORCE_COLOR`` turns on for colours in a pipe."""
    from rich.console import Console

    from ..text.common import unwrapped_console

    isatty = getattr(sys.stdout, "isatty", None)
    if (isatty is not None and isatty()) or os.environ.get("COLUMNS"):
        return Console(highlight=False)
    return unwrapped_console()


def report_path_argument(f):
    # no checks here: the loader says in one line what is wrong with the path
    return click.argument("report", type=click.Path())(f)


def parse_tiles(spec: str | None, num_tiles: int, option: str = "--tiles"):
    """``"0,5,100-200"`` -> sorted unique tile numbers; ``None`` -> ``None`` (all tiles).
    ``option``: the option's name, for the error.

    >>> parse_tiles("3,0-2,3", 10).tolist()
    [0, 1, 2, 3]
    """
    import numpy as np

    from ..errors import ReportError

    if spec is None:
        return None
    tiles = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                tiles.extend(range(lo, hi + 1))
            else:
                tiles.append(int(part))
        except ValueError:
            raise ReportError(f"{option}: {part!r} is not a tile or a range like 100-200",
                              field=option) from None
    arr = np.unique(np.asarray(tiles, np.int64))
    bad = arr[(arr < 0) | (arr >= num_tiles)]
    if len(bad):
        raise ReportError(f"{option}: tile {bad[0]} is outside [0, {num_tiles})", field=option,
                          tile=int(bad[0]))
    return arr
