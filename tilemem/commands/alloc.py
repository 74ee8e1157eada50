from __future__ import annotations

import click

from ..output import report_path_argument


@click.command()
@report_path_argument
@click.option("--method", type=click.Choice(["auto", "exact", "heuristic", "replay"]),
              default="auto", show_default=True,
              help="replay: first fit in allocationOrderByTile order; heuristic: best of a few "
                   "greedy orders; auto: heuristic, then the exact portfolio where it overflows "
                   "or misses the bound; exact: the exact portfolio on every tile (also lowers "
                   "each region's high-water mark).")
@click.option("--time-limit", type=click.FloatRange(min=0.01), default=10.0, show_default=True,
              help="Seconds per tile for the exact portfolio (auto, exact).")
@click.option("--tiles", default=None, help="Tiles to allocate, e.g. 0,5,100-200 (default all "
                                            "tiles in use).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Processes (default: all cores).")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@click.option("--deterministic", is_flag=True,
              help="CP-SAT and the local search stop on work done, not on the clock, so "
                   "they repeat exactly (the compiled search stays clock-bounded).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the report with the new offsets (.json or .capnp).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
def alloc(report, method, time_limit, tiles, workers, seed, deterministic, output, as_json):
    """Re-run the allocation of REPORT's tiles and say how well each tile fits.

    Prints per tile the method, status (optimal: proven; feasible: time limit hit, not
    proven; heuristic; replay), overflowed bytes, totalIncludingGaps (highest end address),
    the lower bound (maximum live bytes, or where higher, interleavedMemoryStart plus the
    heaviest clique of the variables confined to the interleaved region) and the gap to it;
    then how many tiles fit with the report's own offsets and with the new ones.
    """
    import sys

    import numpy as np

    from ..files import load_report, save_report
    from ..output import console, echo_json, parse_tiles
    from ..pack.driver import allocate

    r = load_report(report)
    chosen = parse_tiles(tiles, r.num_tiles)
    result = allocate(r, method=method, tiles=chosen, time_limit=time_limit, workers=workers,
                      seed=seed, deterministic=deterministic,
                      progress=not as_json and sys.stderr.isatty())
    if output:
        save_report(r.with_offsets(result.offsets), output)
    tiles_done = np.array([t.tile for t in result.tiles], np.int64)
    before = _tiles_fitting(r, r.offset, tiles_done)
    summary = {"method": method, **result.summary(), "tilesThatFitBefore": before,
               "tilesThatFitAfter": sum(t.fits for t in result.tiles)}
    if output:
        summary["output"] = str(output)
    if as_json:
        echo_json({"tiles": [t.to_dict() for t in result.tiles], "summary": summary})
        return
    from rich import box
    from rich.table import Table

    c = console()
    table = Table("tile", "vars", "method", "status", "overflow", "total", "bound", "gap",
                  "secs", title=f"{report}: allocation ({method})", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in table.columns:
        col.no_wrap = True
    for col in table.columns[4:]:
        col.justify = "right"
    table.columns[1].justify = "right"
    inexact = False
    for t in result.tiles:
        inexact |= not t.bound_exact
        table.add_row(str(t.tile), f"{t.num_vars:,}", t.method, t.status,
                      f"{t.overflow_bytes:,}", f"{t.total_including_gaps:,}",
                      f"{t.bound:,}" + ("" if t.bound_exact else "*"), f"{100 * t.gap:.2f}%",
                      f"{t.seconds:.2f}")
    c.print(table)
    c.print(f"tiles that fit: {before:,} of {len(result.tiles):,} with the report's offsets, "
            f"{summary['tilesThatFitAfter']:,} after; overflowed bytes "
            f"{summary['overflowBytes']:,}; proven optimal {summary['optimal']:,}; mean gap "
            f"{100 * summary['meanGap']:.2f}%")
    c.print("total = totalIncludingGaps (highest end address); bound = maximum live bytes, "
            "or interleaved start + heaviest interleaved-only clique where higher"
            + (" (* a lower bound, not proven maximum)" if inexact else "")
            + "; feasible = time limit hit, not proven optimal")
    if output:
        c.print(f"wrote {output}")


def _tiles_fitting(r, offsets, tiles) -> int:
    """How many of ``tiles`` have every variable inside tileMemory at ``offsets``."""
    import numpy as np

    a = r.allocated
    end = np.zeros(r.num_tiles, np.int64)
    np.maximum.at(end, r.tile[a], offsets[a] + r.size[a])
    return int(np.sum(end[tiles] <= r.target.tile_memory))
