"""What every command checks before any work: its options (one definition each, so every
command validates them the same way), its output paths, and whether the report has anything to
analyse."""
from __future__ import annotations

import click

#: The packing methods (``tilemem.pack``), for every ``--method``.
METHODS = ("auto", "exact", "heuristic", "replay")
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
