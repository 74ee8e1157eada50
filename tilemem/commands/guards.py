"""What every command checks before any work: its options (one definition each, so every
command validates them the same way), its output paths, and whether the report has anything to
analyse."""
from __future__ import annotations

import click

from ..pack.kinds import METHODS

#: The packing methods (``tilemem.pack.kinds.Method``), for every ``--method``.
METHOD = click.Choice(METHODS)
#: Every ``--time-limit``: seconds, more than zero.
SECONDS = click.FloatRange(min=0, min_open=True)
PICTURES = (".png", ".svg", ".pdf")
CSV = (".csv",)


def output_path(path, formats: tuple[str, ...] = (), option: str = "--output") -> None:
    """Refuse, before any work, an output that cannot be written (``ReportError``, one line):
    unknown extension, missing or read-only folder, a folder given as the file. Removes our
    stale temporaries beside it (left by a run killed while writing)."""
    from ..load import check_output

    if path is not None:
        check_output(path, formats, option=option)


def nothing_to_analyse(r) -> str | None:
    """The sentence to print when ``r`` has no allocated variable, else ``None``.

    >>> from tilemem.model import Report
    >>> nothing_to_analyse(Report.from_columns(var_id=[4], tile=[0], size=[8], alignment=[4],
    ...     offset=[0], category=["variable"], eq_class=[0], interference=[[]],
    ...     allocated=[False]))
    'nothing to analyse: the report has no allocated variables (1 unallocated)'
    """
    if r.allocated.any():
        return None
    unallocated = f" ({r.num_vars:,} unallocated)" if r.num_vars else ""
    return f"nothing to analyse: the report has no allocated variables{unallocated}"


#: Every ``--budget``: seconds for a whole run, more than zero.
BUDGET = click.FloatRange(min=0, min_open=True)


def run_journal(out, report, settings: dict, resume: bool, *, echo=None):
    """The journal of a run writing ``out`` (``tilemem.pack.journal``), opened before any work.

    With ``-o OUT`` every finished tile is recorded in ``OUT.journal`` as it completes; the
    caller discards it once OUT is written. ``resume`` continues the journal of an interrupted
    run (refused in one line if it was written for another report or other settings). An
    existing journal without ``--resume`` is refused too rather than overwritten: it holds
    work a user ran for. Without ``-o`` there is nothing to resume into: ``None``.
    """
    from ..errors import ReportError
    from ..pack.journal import FIRST, journal_path, open_journal, report_digest

    if out is None:
        if resume:
            raise ReportError("--resume needs -o OUT: the journal of finished tiles lives "
                              "beside OUT", field="--resume")
        return None
    path = journal_path(out)
    existed = path.exists()
    if existed and not resume:
        raise ReportError("holds the finished tiles of an interrupted run: add --resume to "
                          "continue it, or delete it to start afresh", path=str(path))
    finished, journal = open_journal(out, report_digest(report), settings, resume=resume)
    if resume and existed and echo is not None:
        started = len(set(journal.records.get(FIRST, {})) - set(finished))
        echo(f"resuming from {path}: {len(finished):,} tile(s) finished"
             + (f", {started:,} more past the first pass" if started else "")
             + (f" ({journal.dropped} bytes of a torn last record dropped)"
                if journal.dropped else ""))
    return journal
