"""What every command shares: the REPORT argument, ``--tiles`` parsing, JSON on stdout and the
rich console the text views (``tilemem.text``) print to. Part of the CLI: no stage imports
click."""
from __future__ import annotations

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
    rich reads it). With stdout piped or redirected, nothing wraps, whatever ``COLUMNS``
    says: rich would take that, the width of a terminal on stdin, or 80 columns, and break
    lines inside phrases and numbers, and a Python process that imported readline (pytest,
    IPython, a script that runs tilemem) exports ``COLUMNS=80`` to every child it starts. A
    file, a pager or ``grep`` gets each line whole, tables at their natural width. Asked of
    stdout itself, not of rich's ``is_terminal``, which ``FORCE_COLOR`` turns on for colours
    in a pipe."""
    from rich.console import Console

    from ..text.common import unwrapped_console

    isatty = getattr(sys.stdout, "isatty", None)
    if isatty is not None and isatty():
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


def packing_options(*, what: str | None = None, budget: float | None = None,
                    time_limit: float | None = None, time_limit_help: str | None = None,
                    budget_help: str | None = None,
                    run: bool = False):
    """The options of every command that runs the packer, defined once: ``--method``,
    ``--time-limit`` and (given a ``budget`` default) ``--budget``; with ``run`` also how
    the run runs (``--workers``, ``--scheduler``, ``--shared-report``, ``--seed``,
    ``--deterministic``: ``alloc``'s). ``what``: what the packer does in this command ("the
    re-pack"), for the help (None: ``alloc``, which says it in full). Each command states
    its own default budget and time limit here, from ``tilemem.pack.kinds.DEFAULTS``;
    ``*_help``: a command's own sentence where the packer's time means something else
    there."""
    from ..pack.kinds import DEFAULTS
    from .guards import BUDGET, METHOD, SECONDS

    see = " (see `tilemem alloc`)"
    options = [click.option(
        "--method", type=METHOD, default="auto", show_default=True,
        help=(
            f"Packing method of {what}{see}." if what else
            "replay: first fit in allocationOrderByTile order; heuristic: best of a few "
            "greedy orders; auto: heuristic, then a quick search and the exact portfolio "
            "where it overflows or misses the bound; exact: the exact portfolio on every "
            "tile (also lowers each region's high-water mark).")),
        click.option(
            "--time-limit", type=SECONDS,
            default=DEFAULTS.time_limit if time_limit is None else time_limit,
            show_default=True,
            help=time_limit_help or (
                f"Seconds of one slice of exact work on a tile in {what} (a cap)." if what
                else "Seconds of one slice of the exact portfolio on a tile (auto, exact): "
                     "a cap."))]
    if budget is not None:
        options.append(click.option(
            "--budget", type=BUDGET, default=budget, show_default=True,
            help=budget_help or (
                f"Seconds for the whole of {what}{see}." if what else
                "Seconds the run may take; it ends earlier once every tile is within 0.1% "
                "of its bound or proven optimal, and says so. Under auto every tile is "
                "visited first (the heuristic, then a quick search: an even share); then "
                "each next slice goes to the tiles that overflow although their bound fits, "
                "and among the rest to where it is expected to close the most gap per "
                "second, learned as the run goes. See docs/architecture.md. Not applied "
                "with --deterministic.")))
    if run:
        options += [
            click.option("--workers", type=click.IntRange(min=1), default=None,
                         help="Processes (default: all cores)."),
            click.option("--scheduler", default=None,
                         help="Run the tiles on Dask: 'local' starts a LocalCluster on this "
                              "machine (its dashboard address is printed), tcp://HOST:8786 "
                              "uses a running scheduler (pip install 'tilemem[cluster]'). "
                              "Default: this machine's process pool."),
            click.option("--shared-report", is_flag=True,
                         help="With --scheduler: the workers must see REPORT at this same "
                              "path (a shared file system; an error if one does not). "
                              "Without it a capnp REPORT is opened by the workers that all "
                              "see it (each builds only its IPUs' part of it), and sent to "
                              "every worker where one does not."),
            click.option("--seed", type=int, default=0, show_default=True,
                         help="Random seed."),
            click.option("--deterministic", is_flag=True,
                         help="Repeat exactly, on any machine and any number of workers: "
                              "every stage stops on work done instead of the clock (CP-SAT's "
                              "deterministic time with one worker, the compiled search's "
                              "nodes, the local search's moves, each from --time-limit at a "
                              "fixed rate); auto's quick search, which stops on the clock, "
                              "is skipped, and --budget is not applied.")]

    def decorate(f):
        for option in reversed(options):
            f = option(f)
        return f

    return decorate
