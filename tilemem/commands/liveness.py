from __future__ import annotations

import click

from .guards import SECONDS, nothing_to_analyse
from .options import report_path_argument


@click.command()
@report_path_argument
@click.option("--tile", "tile_spec", metavar="TILES",
              help="Only these tiles, e.g. 5 or 0,5,100-200 (default: all tiles).")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many tiles, always-live names and peak variables to list.")
@click.option("--json", "as_json", is_flag=True,
              help='Print {"tiles": [{"tile", "alwaysLiveBytes", "maxLiveBytes", "exact", '
                   '"peakVars": [...]}, ...]} instead of the summary.')
@click.option("--time-limit", type=SECONDS, default=10.0, show_default=True,
              help="Seconds for the exact search on tiles whose class graph is not chordal "
                   "(all tiles together); tiles it does not finish are marked not exact.")
@click.option("--steps", is_flag=True,
              help="Live bytes over program steps instead: per step for one tile, the maximum "
                   "over tiles for several, and the peak step (from equivalenceClassSteps, "
                   "else reconstructed from the interference where it can be).")
def liveness(report, tile_spec, top, as_json, time_limit, steps):
    """Always-live bytes, maximum live bytes and the peak live set of REPORT's tiles.

    Like the "Variable Storage Liveness" part of Poplar's profile summary. Maximum live bytes
    of a tile = its always-live bytes + the heaviest set of variables that are live together
    (a maximum-weight clique of its class interference graph): no allocation of the tile can
    use fewer bytes. "exact" says whether that figure is proven; otherwise it is the heaviest
    live set found, with a proven upper bound beside it.
    """
    import sys

    import msgspec

    from .. import api
    from ..text import liveness_view
    from .options import console, echo_json, parse_tiles

    r = api.load(report)
    tiles = parse_tiles(tile_spec, r.num_tiles, option="--tile")
    if tiles is None:
        tiles = r.tiles_in_use()
    if steps and not as_json:
        # the live bytes over steps are a view of the report, not of its maximum live bytes
        from ..text import steps_view

        steps_view(console(), r, report, tiles, tile_spec is None)
        return
    live = api.liveness(r, tiles, time_limit=time_limit, progress=sys.stderr.isatty())
    found = live.tiles
    if as_json:
        out = msgspec.to_builtins(live.to_json())
        if steps:
            from ..text import steps_json

            out.update(steps_json(r, tiles, out["tiles"]))
        echo_json(out)
    elif not found:
        click.echo(f"{report}: {nothing_to_analyse(r) or 'no allocated variables on these tiles'}")
    else:
        liveness_view(console(), r, report, tiles, found, top, tile_spec is None)
