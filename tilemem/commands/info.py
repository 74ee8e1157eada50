from __future__ import annotations

import click

from .options import report_path_argument


@click.command()
@report_path_argument
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.option("--top", type=click.IntRange(min=1), default=5, show_default=True,
              help="How many of the fullest tiles to list.")
def info(report, as_json, top):
    """Summarise REPORT: target geometry, tiles, variables, classes, bytes by category."""
    from ..api import load as load_report
    from ..figures.summary import info as summarise
    from ..text import info_view
    from .guards import nothing_to_analyse
    from .options import console, echo_json

    r = load_report(report)
    d = summarise(r, top=top)
    if as_json:
        echo_json(d)
    else:
        c = console()
        info_view(c, report, d)
        if nothing_to_analyse(r):
            c.print(f"  {nothing_to_analyse(r)}")
