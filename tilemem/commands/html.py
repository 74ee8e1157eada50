from __future__ import annotations

import click

from ..pack.kinds import DEFAULTS
from .guards import output_path
from .options import packing_options, report_path_argument


@click.command()
@report_path_argument
@click.option("--allocation", type=click.Path(dir_okay=False),
              help="Another allocation of the same variables (e.g. written by `tilemem alloc`): "
                   "adds the Compare view, the report's layout beside this one.")
@click.option("--against", type=click.Path(dir_okay=False),
              help="Another compilation of the program (another report): adds the "
                   "Compilations view, both tile profiles overlaid and what changed "
                   "(as tilemem diff).")
@click.option("--tiles", "tiles_spec", help="Also embed the full maps of these tiles, e.g. "
                                            "0,5,100-200 (always, whatever --max-vars).")
@click.option("-o", "--output", default="report.html", show_default=True,
              type=click.Path(dir_okay=False), help="The HTML file to write (atomically).")
@packing_options(what="the out-of-memory tiles' re-pack", budget=DEFAULTS.page_budget,
                 time_limit=DEFAULTS.page_time_limit,
                 time_limit_help="Seconds per out-of-memory tile for its diagnosis (bound "
                                 "and re-pack).",
                 budget_help="Seconds for the whole re-pack: every out-of-memory tile gets "
                             "the heuristic, then exact work goes to the worst until the "
                             "budget is spent.")
@click.option("--no-repack", is_flag=True,
              help="Diagnose out-of-memory tiles by their bound only (no packer run).")
@click.option("--max-vars", type=click.IntRange(min=0), default=250_000, show_default=True,
              help="Budget of variables in full maps (~70 bytes each in the file): tiles out "
                   "of memory, then the fullest, join while it lasts.")
@click.option("--serve", is_flag=True,
              help="Also serve the page at http://127.0.0.1:PORT/ until Ctrl-C, with any "
                   "tile's map made from the report when the page asks for it (the file "
                   "alone holds only the tiles it lists).")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="Port of --serve (0: any free one).")
@click.option("--config", "with_config", is_flag=True,
              help="Also answer tilemem config (the whole configuration that fits: IPUs, "
                   "layers, levers, micro-batch) in the program section.")
def html(report, allocation, against, tiles_spec, output, time_limit, method, budget, no_repack,
         max_vars, serve, port, with_config):
    """Write a one-file interactive HTML report of REPORT (opens offline in any browser).

    Overview: memory per tile (click a tile to open it), the histogram, totals by category
    and region. Tile view: the memory map (hover a variable for its name, id, size, offset,
    category, class and flags), gaps by cause, the oom verdict of an out-of-memory tile.
    Liveness: live bytes over program steps, the always-live floor, the peak step and the
    variables live there. Compare (with --allocation): the two layouts per tile and the tiles
    that changed. With out-of-memory tiles the page opens on the program summary (as
    tilemem oom's first screen); with --against, two compilations compared. Full maps are embedded for the tiles out of memory, the fullest ones and
    those in --tiles (the page says which); report.html#tile=N opens tile N. Another tile's
    map: the page gives the command that embeds it, or, with --serve, loads it from the report.
    With several IPUs an IPU strip (per IPU its fullest tile and mean) picks the IPU whose
    tiles the overview shows.

    Example: tilemem html report.json -o report.html
    """
    from pathlib import Path

    from ..errors import ReportError

    output_path(output, (".html", ".htm"))
    try:
        import bokeh  # noqa: F401
    except ImportError:
        raise ReportError("tilemem html needs Bokeh: pip install 'tilemem[html]'",
                          field="--output") from None
    import time

    if serve and port:   # a taken port said before the long work
        import socket

        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError as e:
                raise ReportError(f"cannot serve on 127.0.0.1:{port}: {e.strerror or e}",
                                  field="--port") from None

    from ..api import load
    from ..plot import html_page, html_server
    from .options import console, parse_tiles

    c = console()
    t0 = time.monotonic()
    with c.status("loading the report") as status:
        r = load(report)
        tiles = parse_tiles(tiles_spec, r.num_tiles)
        compare = load(allocation) if allocation else None
        other = load(against) if against else None
        options = dict(offsets=compare, against=other, tiles=tiles, time_limit=time_limit,
                       repack=not no_repack, method=method, budget=budget, max_vars=max_vars,
                       progress=lambda s: status.update(s))
        if with_config:
            from ..api import ConfigQuery

            options["config"] = ConfigQuery()
        if serve:
            try:
                server = html_server(r, output, port=port, **options)
            except OSError as e:   # the port is taken
                raise ReportError(f"cannot serve on 127.0.0.1:{port}: {e.strerror or e}",
                                  field="--port") from None
            data = server.data
        else:
            data = html_page(r, output, **options)
    size = Path(output).stat().st_size
    c.print(f"wrote {output}: {size / 1e6:.1f} MB, full maps of {len(data['included']):,} of "
            f"{r.num_tiles:,} tiles, in {time.monotonic() - t0:.1f} s")
    if serve:
        host, bound = server.server_address[:2]
        c.print(f"serving it at http://{host}:{bound}/ (any tile's map on demand); Ctrl-C stops")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
