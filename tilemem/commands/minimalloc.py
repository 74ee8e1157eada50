from __future__ import annotations

import click


@click.command()
@click.argument("csv_path", metavar="CSV", type=click.Path())
@click.option("--capacity", type=click.IntRange(min=1), required=True,
              help="Memory size in bytes (MiniMalloc's capacity): the tile's tileMemory.")
@click.option("-o", "--output", "out", required=True, type=click.Path(),
              help="Output report, .json or .capnp.")
def import_minimalloc(csv_path, capacity, out):
    """Make a one-tile report from a MiniMalloc CSV (id,lower,upper,size[,alignment][,offset]).

    Lifetimes are half-open [lower, upper); MiniMalloc's aliases buffer, start/begin and
    (inclusive) end are accepted. One equivalence class per distinct [lower, upper) lifetime,
    classes interfere when their
    lifetimes overlap, lifetimes kept as equivalenceClassSteps. Offsets come from the CSV's
    offset column; without one, tilemem's first fit places the buffers (largest first).
    """
    from ..interop.minimalloc import read_minimalloc_csv, report_from_minimalloc
    from ..load import FORMATS, check_input, save_report
    from ..text import human_bytes
    from .guards import output_path
    from .options import console

    output_path(out, FORMATS)
    check_input(csv_path)
    b = read_minimalloc_csv(csv_path)
    r = report_from_minimalloc(b, capacity)
    if b.offset is None and r.num_vars:
        import math

        from ..api import Packing, allocate

        # replay: first fit in the report's allocation order (largest first)
        r = r.with_offsets(allocate(r, packing=Packing(method="replay", workers=1,
                                                       budget=math.inf)).offsets)
    save_report(r, out)
    end = int((r.offset + r.size).max()) if r.num_vars else 0
    how = "offsets from the CSV" if b.offset is not None else "offsets by first fit"
    over = "" if end <= capacity else f", OUT OF MEMORY by {human_bytes(end - capacity)}"
    console().print(f"{out}: {r.num_vars:,} buffers, {r.num_classes:,} classes, capacity "
                    f"{human_bytes(capacity)}; {how}, highest end {human_bytes(end)}{over}")


@click.command()
@click.argument("report", type=click.Path())
@click.option("--tile", type=int, required=True, help="The tile to export.")
@click.option("-o", "--output", "out", required=True, type=click.Path(),
              help="Output CSV.")
@click.option("--offsets", is_flag=True, help="Also write the report's offsets (offset column).")
@click.option("--ids", type=click.Choice(["var", "name"]), default="var", show_default=True,
              help="Buffer ids: var ids, or variable names (unique on the tile, e.g. after "
                   "importing a CSV whose ids are not integers).")
def export_minimalloc(report, tile, out, offsets, ids):
    """Write one tile of REPORT as a MiniMalloc CSV (id,lower,upper,size[,alignment][,offset]).

    Needs class lifetimes: the equivalenceClassSteps extension, or class interference that
    forms an interval graph (the lifetimes are then recovered from it). Each allocated variable
    becomes a buffer with its class's [lower, upper) steps (always-live variables: the whole
    program). MiniMalloc knows only lifetime overlap:
    element/region constraints and the interleaved region are not exported.
    """
    from ..errors import ReportError
    from ..interop.minimalloc import minimalloc_from_report, write_minimalloc_csv
    from ..liveness import timeline
    from ..api import load as load_report
    from ..text import human_bytes
    from .guards import CSV, output_path
    from .options import console

    output_path(out, CSV)
    r = load_report(report)
    # the class steps, else an interval model of the interference (a tile out of range is
    # named by minimalloc_from_report)
    lifetimes = timeline(r, tile) if 0 <= tile < r.num_tiles else None
    try:
        b = minimalloc_from_report(r, tile, ids, lifetimes)
    except ReportError as e:
        raise e.with_path(report) from None
    write_minimalloc_csv(b, out, offsets=offsets)
    rows = r.tile_rows(tile)
    lost = []
    if r.in_interleaved_mem[rows].any() or (r.executable | r.vertex_code)[rows].any():
        lost.append("region placement")
    if r.element_constraints.lengths()[rows].any():
        lost.append("element constraints")
    if r.region_constraints.lengths()[rows].any():
        lost.append("region constraints")
    note = f"; not expressible in MiniMalloc: {', '.join(lost)}" if lost else ""
    console().print(f"{out}: {len(b):,} buffers of tile {tile}, capacity "
                    f"{human_bytes(r.target.tile_memory)} (pass it to MiniMalloc){note}")
