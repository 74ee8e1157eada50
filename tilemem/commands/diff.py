from __future__ import annotations

import click

from .guards import output_path
from .options import report_path_argument


@click.command()
@report_path_argument
@click.argument("other", metavar="AFTER", type=click.Path())
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many tensors, layers, categories and tiles to list.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.option("-o", "--output", type=click.Path(), default=None,
              help="Also write the comparison as JSON to this file (.json), atomically.")
def diff(report, other, top, as_json, output):
    """Compare two compilations of one program: REPORT (before) and AFTER.

    Per tile and in total: memory used, maximum live bytes, the tiles that went out of
    memory and those that came back; by category; by tensor (names without #tile) and layer
    prefix, the largest growths and shrinkages; and what grew on the tiles that went out of
    memory. The reports hold different variables: they are matched by tile, category and
    name. Reports of different targets or tile counts are compared where they can be
    (totals, categories, tensors), and a line says what is left out.

    Example: tilemem diff before.capnp after.capnp
    """
    from .. import api
    from ..load import check_input
    from ..text.diff import diff_view
    from .options import console, echo_json, write_json

    output_path(output, (".json",))
    check_input(other)
    a = api.load(report)
    b = api.load(other)
    d = api.diff(a, b, names=(report, other), top=top).comparison
    if output:
        write_json(output, d)
    if as_json:
        echo_json(d)
    else:
        diff_view(console(), d)
