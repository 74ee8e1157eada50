from __future__ import annotations

import click

from ..pack.kinds import DEFAULTS
from .guards import nothing_to_analyse, output_path
from .options import packing_options, report_path_argument


@click.command()
@report_path_argument
@click.option("--tiles", "tiles_spec", help="Only these tiles, e.g. 0,5,100-200.")
@click.option("--allocation", type=click.Path(),
              help="Diagnose this allocation (a report of the same variables) instead of "
                   "REPORT's own offsets.")
@packing_options(what="the re-pack", budget=DEFAULTS.repack_budget,
                 time_limit_help="Seconds per tile for the maximum live bytes and for the "
                                 "re-pack.")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many peak variables and classes to list.")
@click.option("--no-repack", is_flag=True, help="Do not run the packer (bound only).")
@click.option("--panels", type=click.IntRange(min=0), default=2, show_default=True,
              help="Full panels for this many of the worst tiles (with --tiles: every tile "
                   "asked for).")
@click.option("--json", "as_json", is_flag=True,
              help='Print JSON instead: {"summary": the program summary, "tiles": one '
                   'diagnosis per out-of-memory tile}.')
@click.option("-o", "--output", type=click.Path(), default=None,
              help="Also write the diagnosis as JSON to this file (.json), atomically.")
@click.option("--resume", is_flag=True,
              help="Continue an interrupted run with -o OUT: re-packed tiles recorded in "
                   "OUT.journal (same report, same settings) are not solved again.")
@click.option("--prefer", multiple=True, metavar="LEVER",
              help="A lever the plan that fits tries first (rank 0): half-momentum, "
                   "half-partials, amp, recompute, offload, rts, rts-weights, micro-batch. "
                   "Repeat for more.")
@click.option("--avoid", multiple=True, metavar="LEVER",
              help="A lever the plan that fits leaves out. Repeat for more.")
@click.option("--no-plan", is_flag=True,
              help="Do not search for the plan that fits (the cheapest combination of levers).")
def oom(report, tiles_spec, allocation, time_limit, top, method, budget, no_repack, panels,
        as_json, output, resume, prefer, avoid, no_plan):
    """Diagnose the out-of-memory tiles of REPORT: the program first, then each tile.

    First the answer for the program: how many tiles are out of memory, how many cannot fit
    as they are (the live data alone exceeds tileMemory: reduce data, and how many bytes must
    go), how many fit once re-packed, how many are proven not to fit although their live
    data does (variables live together that cannot be placed under the rules), how many are
    undecided; the tensors (names without
    #tile) and layers live at the peaks of most of them; and the next steps ranked by how
    many tiles each brings under tileMemory by the bound, each with the `tilemem what-if`
    options that try it. Then one line per tile, and full panels for the worst few: the
    excess, the maximum live bytes (no allocation can use less), the verdict, the peak live
    set (* marks always-live variables), the bytes lost in gaps by cause, and next steps in
    Poplar's terms (recomputation, availableMemoryProportion, offloading, a smaller batch,
    pipelining over IPUs).

    Example: tilemem oom report.json --tiles 0-99 --time-limit 5
    """
    from .. import api
    from ..load.allocation import offsets_from_file
    from .guards import journalled_output
    from .options import console, echo_json, parse_tiles

    output_path(output, (".json",))
    # the journal keeps the re-pack: without one, -o is the JSON only
    out = journalled_output(output, resume, journalled=not no_repack)
    prefer = [x for p in prefer for x in p.split(",") if x]
    avoid = [x for p in avoid for x in p.split(",") if x]
    detail = api.Detail(top=top, plan=not no_plan, prefer=prefer, avoid=avoid)
    from ..figures.plan import check_names

    check_names(detail.prefer, detail.avoid)   # before the report is read
    if not no_repack:
        from ..pack.compiled import prepare

        prepare("problem", "pack")   # the packer's compiled code, while the report loads (first run)
    r = api.load(report)
    tiles = parse_tiles(tiles_spec, r.num_tiles)
    offsets = offsets_from_file(r, allocation) if allocation else None
    c = console()
    # the journal (-o OUT), the run, OUT written, the journal discarded: all in api.diagnose
    run = dict(offsets=offsets, repack=not no_repack, detail=detail, output=out,
               packing=api.Packing(method=method, budget=budget, time_limit=time_limit,
                                   echo=lambda m: click.echo(m, err=True)))
    if as_json or not c.is_terminal:
        d = api.diagnose(r, tiles, **run)
    else:
        from rich.progress import Progress

        with Progress(console=c, transient=True) as p:
            bars = {}

            def advance(e):   # one bar a stage, made when its first tile is done
                if e.stage not in bars:
                    bars[e.stage] = p.add_task(e.stage, total=e.total)
                p.update(bars[e.stage], completed=e.done)

            d = api.diagnose(r, tiles, progress=advance, **run)
    summary, found = d.summary, d.tiles
    if as_json:
        echo_json({"summary": summary, "tiles": found})
    elif not found and nothing_to_analyse(r):
        c.print(f"{report}: {nothing_to_analyse(r)}")
    else:
        show_oom(c, report, summary, found, d.figures, tiles, panels)


def show_oom(c, report, summary, found, fig, tiles, panels: int) -> None:
    """The program summary, the tile table and the panels (every tile asked for with
    --tiles, else the ``panels`` worst)."""
    from ..text import no_oom_text, oom_panel
    from ..text.program import program_view, tile_table

    if not found:
        c.print(no_oom_text(fig, tiles))
        return
    program_view(c, report, summary, report_arg=report)
    tile_table(c, found)
    chosen = found if tiles is not None else found[:panels]
    if chosen:
        c.print(f"[bold]{'The tiles asked for' if tiles is not None else 'The worst tiles'}"
                f"[/bold] ({len(chosen)} of {len(found):,}; --tiles T for others, --panels N "
                "for more)")
    for d in chosen:
        oom_panel(d, c)

