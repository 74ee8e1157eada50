from __future__ import annotations

import click

from ..output import report_path_argument


@click.command()
@report_path_argument
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.option("--top", type=click.IntRange(min=1), default=5, show_default=True,
              help="How many of the fullest tiles to list.")
def info(report, as_json, top):
    """Summarise REPORT: target geometry, tiles, variables, classes, bytes by category."""
    from ..load import load_report
    from ..output import console, echo_json, human_bytes
    from ..summary import info as summarise
    from .guards import nothing_to_analyse

    r = load_report(report)
    d = summarise(r, top=top)
    if as_json:
        echo_json(d)
        return
    from rich.table import Table

    c = console()
    t = d["target"]
    c.print(f"[bold]{report}[/bold]")
    c.print(f"  tiles: {t['numTiles']:,} ({d['tilesInUse']:,} in use), "
            f"tileMemory {human_bytes(t['tileMemory'])}, interleaved from "
            f"{t['interleavedMemoryStart']:,}, {t['memoryElements']} memory elements")
    c.print(f"  variables: {d['variables']:,} allocated"
            + (f" (+{d['unallocatedVariables']:,} unallocated)" if d['unallocatedVariables'] else "")
            + f", {d['interleavedVariables']:,} interleaved; classes: "
            f"{d['equivalenceClasses']:,}; interference edges: {d['interferenceEdges']:,}")
    c.print(f"  constraints: {d['elementConstraints']:,} element, {d['regionConstraints']:,} "
            f"region; class steps: {'yes' if d['classSteps'] else 'no'}")
    c.print(f"  bytes: {human_bytes(d['totalBytes'])} in all, always-live "
            f"{human_bytes(d['alwaysLiveBytes'])}; tiles over memory (report's offsets): "
            f"{d['tilesOverMemory']:,}")
    from rich.table import Column

    cats = Table("category", Column("bytes", justify="right"), title="Bytes by category",
                 title_justify="left")
    for name, b in d["bytesByCategory"].items():
        cats.add_row(name, f"{b:,}")
    c.print(cats)
    tiles = Table(Column("tile", justify="right"), Column("bytes", justify="right"),
                  Column("highest end", justify="right"), "out of memory",
                  title=f"The {len(d['topTiles'])} tiles with most bytes", title_justify="left")
    for row in d["topTiles"]:
        tiles.add_row(str(row["tile"]), f"{row['bytes']:,}", f"{row['highestEnd']:,}",
                      "yes" if row["outOfMemory"] else "")
    c.print(tiles)
    if nothing_to_analyse(r):
        c.print(f"  {nothing_to_analyse(r)}")
