from __future__ import annotations

import click

from .options import report_path_argument


@click.command()
@report_path_argument
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.option("--top", default=5, show_default=True, help="How many of the fullest tiles to list.")
def info(report, as_json, top):
    """Summarise REPORT: target geometry, tiles, variables, classes, bytes by category."""
    from ..figures.summary import info as summarise
    from ..files import load_report
    from ..text import info_view
    from .options import console, echo_json

    d = summarise(load_report(report), top=top)
    if as_json:
        echo_json(d)
    else:
        info_view(console(), report, d)
