"""``tilemem info``: the summary of a report."""
from __future__ import annotations

from ..figures.summary import Info
from .common import human_bytes, titled


def info_view(c, name: str, d: Info) -> None:
    """The summary of a report: geometry, tiles, variables, bytes by category, fullest tiles."""
    from rich.table import Column, Table

    t = d.target
    c.print(f"[bold]{name}[/bold]")
    ipus = f" on {t.num_ipus} IPUs of {t.tiles_per_ipu:,}" if t.num_ipus > 1 else ""
    from ..figures.summary import dump_note

    partial = dump_note(d.tiles_in_use, t.num_tiles)
    c.print(f"  tiles: {t.num_tiles:,}{ipus} ({d.tiles_in_use:,} in use), "
            f"tileMemory {human_bytes(t.tile_memory)}, interleaved from "
            f"{t.interleaved_memory_start:,}, {t.memory_elements} memory elements")
    c.print(f"  variables: {d.variables:,} allocated"
            + (f" (+{d.unallocated_variables:,} unallocated)" if d.unallocated_variables else "")
            + f", {d.interleaved_variables:,} interleaved; classes: "
            f"{d.equivalence_classes:,}; interference edges: {d.interference_edges:,}")
    c.print(f"  constraints: {d.element_constraints:,} element, {d.region_constraints:,} "
            f"region; class steps: {'yes' if d.class_steps else 'no'}")
    if partial:
        c.print(f"  {partial}")
    pr = d.interference_pruned
    if pr:
        c.print(f"  interference pruned to the pairs of classes that share a tile: "
                f"{pr.kept:,} entries kept, "
                + (f"{pr.dropped:,} dropped" if pr.dropped is not None
                   else "the pairs of other tiles never built (generated IPU by IPU)"))
    c.print(f"  bytes: {human_bytes(d.total_bytes_after_overlapping)} after overlapping "
            f"(report's offsets; sum of sizes {d.total_bytes:,} (before overlapping): "
            f"variables that share memory count once each), always-live "
            f"{human_bytes(d.always_live_bytes)}; tiles over memory (report's offsets): "
            f"{d.tiles_over_memory:,}")
    cats = Table("category", Column("sum of sizes", justify="right"))
    for cat, b in d.bytes_by_category.items():
        cats.add_row(cat, f"{b:,}")
    c.print(titled("Bytes by category (sum of sizes, before overlapping)", cats))
    multi = t.num_ipus > 1
    tiles = Table(Column("tile", justify="right"),
                  *([Column("IPU", justify="right")] if multi else []),
                  Column("after overlapping", justify="right"),
                  Column("sum of sizes", justify="right"),
                  Column("highest end", justify="right"), "out of memory")
    for row in d.top_tiles:
        tiles.add_row(str(row.tile), *([str(row.ipu)] if multi else []),
                      f"{row.bytes:,}", f"{row.sum_of_sizes:,}", f"{row.highest_end:,}",
                      "yes" if row.out_of_memory else "")
    c.print(titled(f"The {len(d.top_tiles)} tiles with most bytes (after overlapping: bytes "
                   "shared by variables counted once)", tiles))
