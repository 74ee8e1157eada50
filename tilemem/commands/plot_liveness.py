from __future__ import annotations

import click

from .options import report_path_argument


@click.command("plot-liveness")
@report_path_argument
@click.option("--tile", "tile", type=int, required=True, help="The tile to draw.")
@click.option("-o", "--output", default="live.png", show_default=True,
              type=click.Path(dir_okay=False),
              help="Picture to write: .png, .svg or .pdf (by extension).")
def plot_liveness(report, tile, output):
    """Draw live bytes over program steps for one tile of REPORT.

    The always-live bytes are the floor, the peak step is marked, the maximum over tiles is
    drawn in grey. Steps come from equivalenceClassSteps; without them, from an order of
    program points reconstructed from the interference (the title says so); a tile with
    neither is an error rather than a made-up curve.

    Example: tilemem plot-liveness report.json --tile 3 -o live.png
    """
    from ..errors import ReportError
    from ..api import load as load_report
    from ..plot.liveness import plot_liveness as draw
    from ..plot.maps import picture_format, save_figure

    picture_format(output)
    r = load_report(report)
    if not 0 <= tile < r.num_tiles:
        raise ReportError(f"--tile {tile} is outside [0, {r.num_tiles})", field="--tile",
                          tile=tile)
    try:
        fig, _ = draw(r, tile)
    except ReportError as e:
        raise e.with_path(str(report)) from None
    save_figure(fig, output)
    click.echo(f"wrote {output}")
