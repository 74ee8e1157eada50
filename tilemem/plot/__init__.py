"""The PLOT stage: pictures of tile memory drawn over the figures and liveness stages.

- ``tilemem.plot.maps``: static memory maps and per-tile pictures (matplotlib).
- ``tilemem.plot.html``: the one-file interactive report (``tilemem html``).

Two of them are public (``tilemem.plot.tile_map``, ``tilemem.plot.html_page``).
"""
from __future__ import annotations

from ..figures.oom import DEFAULTS   # the re-pack's defaults (``tilemem.pack.kinds``)


def tile_map(report, tile: int, offsets=None, *, ax=None, gaps: bool = True):
    """Draw the memory map of one tile, as ``tilemem plot`` does.

    x: addresses from 0 to tileMemory (and the overflow zone when used); y: program steps when
    the report has a timeline (each variable a rectangle: its lifetime x its address range),
    otherwise lanes that separate variables sharing bytes. Colours: categories.

    Parameters
    ----------
    report : Report
    tile : int
    offsets : Allocation, Report or array of int, optional
        Draw this allocation (default: the report's own offsets).
    ax : matplotlib Axes, optional
        Draw on it (the map alone); default: a new figure with the map and, below it, a strip
        of the gaps by likely cause.
    gaps : bool
        With a new figure, draw the strip of gaps.

    Returns
    -------
    matplotlib.axes.Axes
        The map's axes.

    Example
    -------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import tilemem
    >>> ax = tilemem.plot.tile_map(tilemem.load("examples/mk1-small.json"), 3)
    >>> bool(ax.get_xlim()[1] >= 256 * 1024)
    True
    """
    from ..errors import ReportError
    from .maps import address_axis, draw_tile_map, tile_map as layout, x_limit

    if not 0 <= tile < report.num_tiles:
        raise ReportError(f"--tile {tile} is outside [0, {report.num_tiles})", field="--tile",
                          tile=tile)
    if offsets is not None and hasattr(offsets, "offsets"):   # an Allocation
        offsets = offsets.offsets
    elif offsets is not None and hasattr(offsets, "offset"):  # a report of the same variables
        from ..load.allocation import offsets_from_allocation

        offsets = offsets_from_allocation(report, offsets, getattr(offsets, "_source", None))
    m = layout(report, tile, offsets)
    xmax = x_limit([m])
    strip = None
    if ax is None:
        import matplotlib.pyplot as plt

        if gaps:
            fig, (ax, strip) = plt.subplots(2, 1, figsize=(13, 4.8), sharex=True,
                                            gridspec_kw={"height_ratios": [12, 1]},
                                            layout="constrained")
        else:
            fig, ax = plt.subplots(figsize=(13, 4.4), layout="constrained")
    draw_tile_map(ax, m, strip, categories=report.categories, xmax=xmax)
    address_axis(strip if strip is not None else ax, xmax)
    return ax


def html_page(report, path, *, offsets=None, against=None, tiles=None,
              time_limit: float = DEFAULTS.page_time_limit, method: str = "auto",
              budget: float = DEFAULTS.page_budget, repack: bool = True,
              max_vars: int = 250_000, progress=None, config=None) -> dict:
    """Write the one-file interactive HTML report (as ``tilemem html``; needs Bokeh).

    Parameters
    ----------
    report : Report
    path : str or path-like
        The ``.html`` file to write (atomically).
    offsets : Allocation, Report or array of int, optional
        Another allocation of the same variables: adds the Compare view.
    against : Report, optional
        Another compilation of the program: adds the Compilations view.
    tiles : list of int, optional
        Also embed the full maps of these tiles.
    time_limit, method, budget, repack
        The diagnosis of the out-of-memory tiles (as ``tilemem.diagnose``).
    max_vars : int
        Budget of variables in full maps.
    progress : callable, optional
        Called with a line saying what is being built.
    config : tilemem.ConfigQuery, optional
        Also answer ``tilemem config`` (the whole configuration that fits) in the program
        section, when tiles are out of memory.

    Returns
    -------
    dict
        What the page holds (``"included"``: the tiles with full maps).

    Example
    -------
    >>> import os, tempfile, tilemem
    >>> p = os.path.join(tempfile.mkdtemp(), "r.html")
    >>> data = tilemem.plot.html_page(tilemem.load("examples/mk1-small.json"), p,
    ...                               repack=False, max_vars=0)
    >>> open(p).read(15)
    '<!DOCTYPE html>'
    """
    return _page(report, path, offsets=offsets, against=against, tiles=tiles,
                 time_limit=time_limit, method=method, budget=budget, repack=repack,
                 max_vars=max_vars, progress=progress, config=config)["data"]


def html_server(report, path, *, host: str = "127.0.0.1", port: int = 0, **options):
    """Write the page as ``html_page`` does (same options) and return an HTTP server of it
    (not yet serving: call ``serve_forever``; ``server_address`` says where) that makes any
    tile's map from ``report`` when the page asks for it (``tilemem html --serve``).
    ``.data`` on the server: what the file holds."""
    from .serve import tile_server

    built = _page(report, path, **options)
    srv = tile_server(report, path, built, offsets=None, compare=built["compare"],
                      host=host, port=port)
    srv.data = built["data"]
    return srv


def _page(report, path, *, offsets=None, against=None, tiles=None, time_limit: float = 2.0,
          method: str = "auto", budget: float = 60.0, repack: bool = True,
          max_vars: int = 250_000, progress=None, config=None) -> dict:
    from pathlib import Path

    import numpy as np

    from ..errors import ReportError
    from .html import write_html

    try:
        import bokeh  # noqa: F401
    except ImportError:
        raise ReportError("tilemem html needs Bokeh: pip install 'tilemem[html]'",
                          field="--output") from None
    compare, label = offsets, "allocation"
    if offsets is not None and hasattr(offsets, "offsets"):
        compare = offsets.offsets
    elif offsets is not None and hasattr(offsets, "offset"):
        from ..load.allocation import offsets_from_allocation

        label = f"allocation {Path(getattr(offsets, 'source', 'allocation')).name}"
        compare = offsets_from_allocation(report, offsets, getattr(offsets, "_source", None))
    built = write_html(path, report, source=Path(getattr(report, "source", "report")).name,
                       compare=compare, compare_label=label, against=against,
                       against_label=Path(getattr(against, "source", "other")).name,
                       requested=None if tiles is None else np.asarray(tiles, np.int64),
                       time_limit=time_limit, repack=repack, method=method, budget=budget,
                       max_vars=max_vars, progress=progress or (lambda s: None), keep=True,
                       config=config)
    return built | {"compare": compare}
