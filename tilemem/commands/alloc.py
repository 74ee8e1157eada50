from __future__ import annotations

import click

from .guards import BUDGET, METHOD, SECONDS, nothing_to_analyse, output_path
from .options import report_path_argument

#: Default ``--budget``: a full Mk2 IPU (1472 tiles) in a few minutes on 2 cores.
DEFAULT_BUDGET = 240.0


@click.command()
@report_path_argument
@click.option("--method", type=METHOD,
              default="auto", show_default=True,
              help="replay: first fit in allocationOrderByTile order; heuristic: best of a few "
                   "greedy orders; auto: heuristic, then a quick search and the exact portfolio "
                   "where it overflows or misses the bound; exact: the exact portfolio on "
                   "every tile (also lowers each region's high-water mark).")
@click.option("--time-limit", type=SECONDS, default=10.0, show_default=True,
              help="Seconds of one slice of the exact portfolio on a tile (auto, exact): "
                   "a cap.")
@click.option("--budget", type=BUDGET, default=DEFAULT_BUDGET, show_default=True,
              help="Seconds the run may take; it ends earlier once every tile is within "
                   "0.1% of its bound or proven optimal, and says so. Under auto every tile "
                   "is visited first (the heuristic, then a quick search: an even share); "
                   "then each next slice goes to the tiles that overflow although their "
                   "bound fits, and among the rest to where it is expected to close the most "
                   "gap per second, learned as the run goes. See docs/architecture.md. Not "
                   "applied with --deterministic.")
@click.option("--tiles", default=None, help="Tiles to allocate, e.g. 0,5,100-200 (default all "
                                            "tiles in use).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Processes (default: all cores).")
@click.option("--scheduler", default=None,
              help="Run the tiles on Dask: 'local' starts a LocalCluster on this machine (its "
                   "dashboard address is printed), tcp://HOST:8786 uses a running scheduler "
                   "(pip install 'tilemem[cluster]'). Default: this machine's process pool.")
@click.option("--shared-report", is_flag=True,
              help="With --scheduler: the workers see REPORT at this same path (a shared file "
                   "system) and open it themselves (a capnp report is memory-mapped: each "
                   "reads only its tiles) instead of receiving a copy.")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@click.option("--deterministic", is_flag=True,
              help="Repeat exactly, on any machine and any number of workers: every stage "
                   "stops on work done instead of the clock (CP-SAT's deterministic time with "
                   "one worker, the compiled search's nodes, the local search's moves, each "
                   "from --time-limit at a fixed rate); auto's quick search, which stops on "
                   "the clock, is skipped, and --budget is not applied.")
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

    from .. import api
    from ..load import FORMATS, save_report
    from ..text import alloc_view
    from .options import console, echo_json, parse_tiles

    output_path(output, FORMATS)
    if scheduler is not None:
        from ..pack.cluster import make_executor

        make_executor(scheduler, None)  # refuses a malformed address before any work
    r = api.load(report)
    empty = nothing_to_analyse(r)
    if empty and not as_json:
        if output:
            save_report(r, output)
        click.echo(f"{report}: {empty}" + (f"; wrote {output}" if output else ""))
        return
    chosen = parse_tiles(tiles, r.num_tiles)
    # the journal (-o OUT), the run, OUT written, the journal discarded: all in api.allocate
    a = api.allocate(r, method=method, tiles=chosen, time_limit=time_limit, workers=workers,
                     seed=seed, deterministic=deterministic, budget=budget,
                     scheduler=scheduler, shared_report=report if shared_report else None,
                     output=output, resume=resume, echo=lambda m: click.echo(m, err=True),
                     progress=not as_json and sys.stderr.isatty())
    doc = a.to_json(output)
    if as_json:
        echo_json(doc)
    else:
        alloc_view(console(), report, doc)
