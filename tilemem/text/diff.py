"""``tilemem diff``: two compilations compared, as text."""
from __future__ import annotations

from rich.markup import escape

from ..figures.diff import Comparison
from .common import short, titled


def _signed(n: int) -> str:
    return f"{n:+,}"


def diff_view(c, d: Comparison) -> None:
    """Totals and out-of-memory tiles first, then what grew and shrank, and why tiles went
    out of memory."""
    from rich.table import Column, Table

    c.print(f"[bold]{escape(d.before)} -> {escape(d.after)}[/bold]")
    if d.left_out:
        c.print(f"  {d.left_out}")
    t = d.total
    c.print(f"  bytes of all variables (sum of sizes): {t.before:,} -> {t.after:,} "
            f"({_signed(t.delta)})")
    if d.max_live_total is not None:
        m = d.max_live_total
        c.print(f"  {m.name}: {m.before:,} -> {m.after:,} ({_signed(m.delta)})")
    c.print(f"  tiles out of memory: {d.out_of_memory_before:,} -> {d.out_of_memory_after:,}"
            + (f"; went out of memory: {len(d.gained):,} ({_tiles(d.gained)})"
               if d.gained else "")
            + (f"; came back: {len(d.lost):,} ({_tiles(d.lost)})" if d.lost else ""))
    if d.cause_of_gained:
        c.print(f"  [bold]what grew on the {len(d.gained):,} tile(s) that went out of "
                f"memory[/bold] (their bytes there, summed):")
        _changes(c, d.cause_of_gained, "tensor")
    for title, rows, what in (("Tensors that grew most (all tiles)", d.tensors_grown, "tensor"),
                              ("Tensors that shrank most", d.tensors_shrunk, "tensor"),
                              ("Layers that grew most", d.layers_grown, "layer"),
                              ("Layers that shrank most", d.layers_shrunk, "layer"),
                              ("Categories that changed", d.categories, "category")):
        if rows:
            c.print(f"  [bold]{title}[/bold]")
            _changes(c, rows, what)
    if d.tiles_grown:
        tab = Table(Column("tile", justify="right"), Column("used before", justify="right"),
                    Column("after", justify="right"), Column("max live before", justify="right"),
                    Column("after", justify="right"), box=None, padding=(0, 1))
        for x in d.tiles_grown:
            tab.add_row(str(x.tile), f"{x.used_before:,}", f"{x.used_after:,}",
                        f"{x.max_live_before:,}", f"{x.max_live_after:,}")
        c.print(titled("Tiles whose memory used grew most (highest end)", tab))


def _tiles(tiles: list[int], shown: int = 8) -> str:
    return ", ".join(map(str, tiles[:shown])) + (", ..." if len(tiles) > shown else "")


def _changes(c, rows, what: str) -> None:
    from rich.padding import Padding
    from rich.table import Column, Table

    t = Table(what, Column("before", justify="right"), Column("after", justify="right"),
              Column("change", justify="right"), box=None, padding=(0, 1), pad_edge=False)
    for x in rows:
        t.add_row(escape(short(x.name, 44)), f"{x.before:,}", f"{x.after:,}", _signed(x.delta))
    c.print(Padding(t, (0, 0, 0, 4), expand=False))
