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
    """The sentence to print when ``r`` has no allocated variable (``tilemem.api``'s)."""
    from ..api.answers import nothing_to_analyse as sentence

    return sentence(r)


#: Every ``--budget``: seconds for a whole run, more than zero.
BUDGET = click.FloatRange(min=0, min_open=True)


def journalled_output(output, resume: bool, journalled: bool = True):
    """``-o OUT`` and ``--resume`` as the API's ``Output`` (None without ``-o``), refused in
    one line before the report is read when the run keeps a journal (``journalled``):
    ``--resume`` without ``-o``, and an existing journal without ``--resume``
    (``tilemem.api.allocation.refuse_journal``)."""
    from ..api.allocation import refuse_journal
    from ..api.options import Output
    from ..errors import ReportError

    if output is None:
        if resume and journalled:
            raise ReportError("--resume needs -o OUT: the journal of finished tiles lives "
                              "beside OUT", field="--resume")
        return None
    out = Output(output, resume)
    if journalled:
        refuse_journal(out)
    return out
