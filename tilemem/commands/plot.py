from __future__ import annotations

import click

from ..pack.kinds import DEFAULTS
from .guards import nothing_to_analyse, output_path
from .options import packing_options, report_path_argument


def _output_option(default):
    return click.option("-o", "--output", default=default, show_default=True,
                        type=click.Path(),
                        help="Picture to write: .png, .svg or .pdf (by extension).")


@click.command()
@report_path_argument
@click.option("--tile", "tile", type=int, required=True, help="The tile to draw.")
@click.option("--allocation", type=click.Path(),
              help="Draw this allocation (a report of the same variables, e.g. written by "
                   "`tilemem alloc`) instead of REPORT's own offsets.")
@click.option("--compare", is_flag=True,
              help="Draw the report's allocation (or --allocation) above a re-run of the "
                   "packer on this tile, on the same scales.")
@packing_options(what="the --compare re-run",
                 time_limit_help="Seconds the --compare re-run may take.")
@_output_option("map.png")
def plot(report, tile, allocation, compare, method, time_limit, output):
    """Draw the memory map of one tile of REPORT.

    x: addresses from 0 to tileMemory (and the overflow zone when used), with the region and
    memory element boundaries; y: program steps when the report has a timeline (each variable
    a rectangle: its lifetime x its address range), otherwise lanes that separate variables
    sharing bytes. Colours: categories; the strip below: gaps by likely cause.

    Example: tilemem plot report.json --tile 3 -o map.png
    """
    from ..api import load
    from ..errors import ReportError
    from ..load.allocation import offsets_from_file
    from ..plot.maps import picture_format, plot_tile, save_figure

    picture_format(output)
    output_path(output)
    # the figure is plot_tile's, not tilemem.plot.tile_map's: --compare draws two maps on
    # shared scales in one figure; both draw a map with the same draw_tile_map
    r = load(report)
    if not 0 <= tile < r.num_tiles:
        raise ReportError(f"--tile {tile} is outside [0, {r.num_tiles})", field="--tile",
                          tile=tile)
    offsets = offsets_from_file(r, allocation) if allocation else None
    other, label = None, "re-run"
    if compare:
        other, label = rerun_offsets(r, tile, method=method, time_limit=time_limit)
    fig, _ = plot_tile(r, tile, offsets, compare=other, compare_label=label,
                       label=("allocation " + str(allocation)) if allocation and compare
                       else None)
    save_figure(fig, output)
    empty = nothing_to_analyse(r)
    click.echo(f"wrote {output}" + (f" ({report}: {empty})" if empty else ""))


def rerun_offsets(r, tile: int, *, method="auto", time_limit=DEFAULTS.time_limit):
    """The packer's allocation of ``tile`` (offset column) and a label saying how it was made."""
    import numpy as np

    import math

    from ..api import Packing, allocate

    # the packer's defaults but no run-wide budget: one tile, --time-limit is its cap
    a = allocate(r, tiles=[tile], packing=Packing(method=method, time_limit=time_limit,
                                                  budget=math.inf))
    offsets = np.asarray(a.offsets, np.int64).copy()
    res = next((t for t in a.tiles if int(t.tile) == tile), None)
    label = "re-run"
    if res is not None:
        label = f"re-run ({res.method}, {res.status})"
    return offsets, label


@click.command()
@report_path_argument
@click.option("--allocation", type=click.Path(),
              help="Use this allocation instead of REPORT's own offsets.")
@_output_option("tiles.png")
def plot_tiles(report, allocation, output):
    """Draw memory used per tile of REPORT (including and excluding gaps) against tileMemory,
    and the histogram of tiles by memory used.

    Example: tilemem plot-tiles report.json -o tiles.png
    """
    from ..figures.memory import memory_figures
    from ..api import load as load_report
    from ..load.allocation import offsets_from_file
    from ..plot.maps import picture_format, save_figure
    from ..plot.maps import plot_tiles as draw

    picture_format(output)
    output_path(output)
    r = load_report(report)
    offsets = offsets_from_file(r, allocation) if allocation else None
    fig, _ = draw(memory_figures(r, offsets))
    save_figure(fig, output)
    empty = nothing_to_analyse(r)
    click.echo(f"wrote {output}" + (f" ({report}: {empty})" if empty else ""))
