from __future__ import annotations

import click

from ..pack.kinds import DEFAULTS
from .guards import nothing_to_analyse, output_path
from .options import packing_options, report_path_argument


@click.command()
@report_path_argument
@packing_options(budget=DEFAULTS.alloc_budget, run=True)
@click.option("--tiles", default=None, help="Tiles to allocate, e.g. 0,5,100-200 (default all "
                                            "tiles in use).")
@click.option("-o", "--output", type=click.Path(), default=None,
              help="Write the report with the new offsets (.json or .capnp).")
@click.option("--resume", is_flag=True,
              help="Continue an interrupted run with -o OUT: tiles recorded in OUT.journal "
                   "(same report, same settings) are not solved again.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
def alloc(report, method, time_limit, budget, tiles, workers, scheduler, shared_report, seed,
          deterministic, output, resume, as_json):
    """Re-run the allocation of REPORT's tiles and say how well each tile fits.

    Prints per tile the method, status (optimal: proven; feasible: time limit hit, not
    proven; heuristic; replay), overflowed bytes, totalIncludingGaps (highest end address),
    the lower bound (maximum live bytes, or where higher, interleavedMemoryStart plus the
    heaviest clique of the variables confined to the interleaved region; either with the
    padding its variables' alignments force between them) and the gap to it;
    then how many tiles fit with the report's own offsets (within memory and accepted by
    `tilemem check` on that tile) and with the new ones. On a partial report (variables of
    only some tiles) says so; tiles not in the dump do not count as fitting.
    """
    import sys
    import time

    from .. import api
    from ..load import FORMATS, save_report
    from ..text import alloc_view
    from .guards import journalled_output
    from .options import console, echo_json, parse_tiles

    output_path(output, FORMATS)
    out = journalled_output(output, resume)
    if scheduler is not None:
        from ..pack.workers.executors import make_executor

        make_executor(scheduler, None)  # refuses a malformed address before any work
    from ..pack.compiled import prepare

    prepare("problem", "pack", "bounds")   # the packer's compiled code, while the report loads (first run)
    began = time.perf_counter()
    r = api.load(report)
    loaded = time.perf_counter() - began
    empty = nothing_to_analyse(r)
    if empty and not as_json:
        if output:
            save_report(r, output)
        click.echo(f"{report}: {empty}" + (f"; wrote {output}" if output else ""))
        return
    chosen = parse_tiles(tiles, r.num_tiles)
    packing = api.Packing(method=method, budget=budget, time_limit=time_limit,
                          workers=workers, seed=seed, deterministic=deterministic,
                          scheduler=scheduler, shared_file=True if shared_report else None,
                          echo=lambda m: click.echo(m, err=True))
    # the journal (-o OUT), the run, OUT written, the journal discarded: all in api.allocate
    a = api.allocate(r, tiles=chosen, packing=packing, output=out,
                     progress=not as_json and sys.stderr.isatty())
    doc = a.to_json(output, load_seconds=loaded)
    if as_json:
        echo_json(doc)
    else:
        alloc_view(console(), report, doc)
