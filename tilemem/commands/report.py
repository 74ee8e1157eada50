from __future__ import annotations

import click

from .guards import nothing_to_analyse, output_path
from .options import report_path_argument


@click.command()
@report_path_argument
@click.option("--allocation", "allocation", type=click.Path(),
              help="Figures for this allocation (a report of the same variables, e.g. written "
                   "by `tilemem alloc`) instead of REPORT's own offsets.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the JSON memory object instead of the summary.")
@click.option("-o", "--output", type=click.Path(),
              help="Write the JSON memory object to this file (atomically).")
@click.option("--no-holes", is_flag=True, help="Leave the list of gaps out of the JSON "
              "(keep the per-tile bytes by cause).")
def report(report, allocation, as_json, output, no_holes):
    """Memory figures of REPORT in the graph profile's format.

    Prints a summary in the style of Poplar's profile summary: memory including and excluding
    gaps, by region, by category (not overlapped / overlapped / total after overlapping), gaps
    by likely cause, a histogram of tiles by memory used, the fullest tile and the number of
    tiles out of memory. --json / -o give {"memory": {"byTile", "byCategory",
    "afterOverlapping", "gaps"}}.
    """
    from .. import api
    from ..load import atomic_write
    from ..load.allocation import offsets_from_file
    from ..text import summary_text
    from .options import echo_json

    output_path(output, (".json",))
    r = api.load(report)
    offsets = offsets_from_file(r, allocation) if allocation else None
    fig = api.report(r, offsets).figures
    if output or as_json:
        doc = fig.to_json(holes=not no_holes)
    if output:
        import msgspec

        with atomic_write(output) as f:
            f.write(msgspec.json.encode(doc))
    if as_json:
        echo_json(doc)
    elif not output:
        click.echo(f"{report}" + (f" (allocation {allocation})" if allocation else ""))
        if nothing_to_analyse(r):
            click.echo(f"  {nothing_to_analyse(r)}")
        click.echo(summary_text(fig))
    else:
        click.echo(f"wrote {output}")
