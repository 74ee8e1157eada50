from __future__ import annotations

import click

from ..output import report_path_argument
from .guards import SECONDS, nothing_to_analyse


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
def liveness(report, tile_spec, top, as_json, time_limit):
    """Always-live bytes, maximum live bytes and the peak live set of REPORT's tiles.

    Like the "Variable Storage Liveness" part of Poplar's profile summary. Maximum live bytes
    of a tile = its always-live bytes + the heaviest set of variables that are live together
    (a maximum-weight clique of its class interference graph): no allocation of the tile can
    use fewer bytes. "exact" says whether that figure is proven; otherwise it is the heaviest
    live set found, with a proven upper bound beside it.
    """
    import sys

    import numpy as np

    from ..load import load_report
    from ..liveness import max_live_all
    from ..output import echo_json, parse_tiles

    r = load_report(report)
    tiles = parse_tiles(tile_spec, r.num_tiles)
    if tiles is None:
        tiles = r.tiles_in_use()
    found = max_live_all(r, tiles, time_limit=time_limit, progress=sys.stderr.isatty()) \
        if len(tiles) else []  # no tile in use: nothing to analyse
    if as_json:
        echo_json({"tiles": [_tile_json(r, m) for m in found]})
        return
    _print_summary(r, report, tiles, found, top, tile_spec is None)


def _tile_json(r, m) -> dict:
    al = r.always_live[m.peak_rows]
    rows = m.peak_rows[~al]
    return {
        "tile": m.tile, "alwaysLiveBytes": m.always_live_bytes,
        "maxLiveBytes": m.max_live_bytes, "exact": m.exact,
        "upperBoundBytes": m.upper_bound_bytes, "method": m.method,
        "alwaysLiveVars": int(al.sum()),
        "peakVars": [{"var": int(r.var_id[x]), "name": r.name(x), "bytes": int(r.size[x]),
                      "class": int(r.eq_class[x])} for x in rows.tolist()],
    }


def base_name(name: str) -> str:
    """A variable's name without Poplar's ``#tile`` suffix (004: "may have a suffix of the
    form #n")."""
    head, sep, tail = name.rpartition("#")
    return head if sep and tail.isdigit() else name


def _by_name(r, rows):
    """``{name without #tile: bytes}`` of the rows, heaviest first."""
    import numpy as np

    names = [base_name(r.name(x)) for x in rows.tolist()]
    uniq, inv = np.unique(np.asarray(names, dtype=object), return_inverse=True) if names else ([], [])
    sums = np.bincount(inv, weights=r.size[rows], minlength=len(uniq)) if names else []
    return sorted(zip(list(uniq), (int(s) for s in sums)), key=lambda kv: (-kv[1], kv[0]))


def _print_summary(r, report, tiles, found, top, all_tiles):
    import numpy as np
    from rich.padding import Padding
    from rich.table import Column, Table

    from ..output import console, human_bytes

    c = console()

    def indented(table, left=6):
        c.print(Padding(table, (0, 0, 0, left), expand=False))

    tm = r.target.tile_memory
    c.print(f"[bold]{report}[/bold]")
    if all_tiles:
        where = "All tiles"
    elif len(tiles) == 1:
        where = f"Tile {tiles[0]}"
    else:
        where = f"{len(tiles)} tiles"
    c.print(f"  Variable Storage Liveness: {where}")
    if not found:
        c.print(f"    {nothing_to_analyse(r) or 'no allocated variables on these tiles'}")
        return
    sel = np.zeros(r.num_tiles, bool)
    sel[tiles] = True
    al_rows = np.flatnonzero(r.allocated & r.always_live & sel[np.where(r.allocated, r.tile, 0)])
    c.print(f"    Always-live bytes: {int(r.size[al_rows].sum()):,}")
    named = _by_name(r, al_rows)
    t = Table(Column("Always-live variables", style=None), Column("bytes", justify="right"),
              box=None, padding=(0, 2), pad_edge=False)
    for name, b in named[:top]:
        t.add_row(name, f"{b:,}")
    if len(named) > top:
        t.add_row(f"... {len(named) - top:,} more names", "")
    indented(t)
    peak = max(found, key=lambda m: (m.max_live_bytes, -m.tile))
    c.print(f"    Maximum live bytes (including always-live): {human_bytes(peak.max_live_bytes)}"
            f" on tile {peak.tile}" + ("" if peak.exact else
                                       f" (not proven: at most {peak.upper_bound_bytes:,})"))
    inexact = [m for m in found if not m.exact]
    if len(found) > 1:
        tab = Table(Column("tile", justify="right"), Column("always-live", justify="right"),
                    Column("max live", justify="right"), Column("of tileMemory", justify="right"),
                    Column("exact"), box=None, padding=(0, 2), pad_edge=False)
        for m in sorted(found, key=lambda m: (-m.max_live_bytes, m.tile))[:top]:
            tab.add_row(str(m.tile), f"{m.always_live_bytes:,}", f"{m.max_live_bytes:,}",
                        f"{100 * m.max_live_bytes / tm:.1f} %",
                        "yes" if m.exact else f"no (<= {m.upper_bound_bytes:,})")
        c.print(f"    The {min(top, len(found))} tiles with the highest maximum live bytes:")
        indented(tab)
        over = sum(m.max_live_bytes > tm for m in found)
        c.print(f"    Tiles whose maximum live bytes exceed tileMemory ({tm:,}): {over:,}"
                + (" (no allocation can fit them)" if over else ""))
    c.print(f"    Peak on tile {peak.tile} ({peak.method}):")
    rows = peak.peak_rows[~r.always_live[peak.peak_rows]]
    c.print(f"      Live Bytes (excluding always-live): {peak.peak_bytes:,}")
    live = _by_name(r, rows)
    t = Table(Column("Live Vars (excluding always-live)"), Column("bytes", justify="right"),
              box=None, padding=(0, 2), pad_edge=False)
    for name, b in live[:top]:
        t.add_row(name, f"{b:,}")
    if len(live) > top:
        t.add_row(f"... {len(live) - top:,} more names", "")
    indented(t, 8)
    if inexact:
        c.print(f"    Not proven within the time limit on {len(inexact):,} tile(s): their figure "
                "is the heaviest live set found (a valid lower bound); see the upper bounds.")
