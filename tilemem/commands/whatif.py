from __future__ import annotations

import click

from ..pack.kinds import DEFAULTS
from .guards import output_path
from .options import lever_options, packing_options, report_path_argument


@click.command("what-if")
@report_path_argument
@click.option("--offload", multiple=True, metavar="PATTERN",
              help="Remove the variables of the tensors matching PATTERN (moved to streaming "
                   "memory). A glob over names without #tile ('layer*/momentum'), or re: and "
                   "a regular expression. Repeat for more.")
@click.option("--scale", multiple=True, metavar="PATTERN=FACTOR",
              help="Multiply the sizes of the tensors matching PATTERN by FACTOR (a "
                   "micro-batch half as large: 0.5 on the activations). Repeat for more; "
                   "edits apply in order, offloads first.")
@click.option("--micro-batch", "micro_batch", type=click.FloatRange(min=0), default=None,
              metavar="FACTOR",
              help="Scale what is per sample (activations, their gradients, exchange "
                   "buffers) by FACTOR, leaving persistent state and tensors of its shape "
                   "(weight gradients, accumulators) alone; told by lifetime and layout, not "
                   "by name (0.5: a micro-batch half as large).")
@click.option("--amp-was", "amp_was", type=float, default=None, metavar="A",
              help="The availableMemoryProportion the report was compiled with (default "
                   "0.6, Poplar's).")
@lever_options
@click.option("--repack", is_flag=True,
              help="Also re-pack the tiles in question (slower): which fit, checked by "
                   "tilemem check's rules, and which stay undecided.")
@packing_options(what="the re-pack", budget=DEFAULTS.repack_budget,
                 time_limit_help="Seconds per tile for the maximum live bytes and for the "
                                 "re-pack.")
@click.option("--json", "as_json", is_flag=True, help="Print the program summary as JSON.")
@click.option("-o", "--output", type=click.Path(), default=None,
              help="Write the changed report (.json or .capnp): every other command opens it; "
                   "with --repack it holds the re-packed tiles' offsets.")
def what_if(report, offload, scale, repack, method, budget, time_limit, as_json, output,
            micro_batch, amp_was, levers, amp_given):
    """How many tiles would still be out of memory with some tensors offloaded or shrunk?

    Answers with `tilemem oom`'s program summary for the changed data: by the bound (each
    tile's maximum live bytes recomputed, all tiles at once), and with --repack by a
    re-pack the checker accepts. The tiles in question are those out of memory in REPORT
    and those whose live data no longer fits. It assumes the same program with other sizes:
    the same variables on the same tiles, with the same lifetimes and interference (a real
    recompilation also changes lifetimes -- recomputation shortens them --, the mapping and
    the code).

    The memory levers (--amp, --half-partials, --half-momentum, --rts N [--rts-weights],
    --offload-optimiser-state, --recompute, --recompute-at, --serialise N; spelt as generate
    spells them) find the variables
    they change by lifetime, layout and constraints first, names only as a hint, and each
    says what it assumes.

    Example: tilemem what-if report.capnp --offload '*/momentum' --scale '*/activations=0.5'
    """
    from .. import api
    from ..api.program import what_if_edits
    from ..text.program import program_view, tile_table
    from .guards import nothing_to_analyse
    from .options import console, echo_json

    output_path(output, (".json", ".capnp"))
    # a bad pattern or lever is refused before the report is read
    from ..levers import DEFAULT_AMP

    if amp_was is not None and not amp_given:
        raise click.BadParameter("give --amp too (the value to compare with)",
                                 param_hint="--amp-was")
    amp_was = amp_was if amp_was is not None or not amp_given else DEFAULT_AMP
    edits = api.Edits(offload=offload, scale=scale, micro_batch=micro_batch)
    what_if_edits(edits, levers, amp_was)
    r = api.load(report)
    w = api.what_if(r, edits, levers=levers, amp_was=amp_was, repack=repack,
                    packing=api.Packing(method=method, budget=budget, time_limit=time_limit))
    for a in w.edits:
        if not a.variables:
            click.echo(f"tilemem: what-if: {a.edit}: the pattern matches no allocated "
                       "variable", err=True)
    if output:   # with --repack, with the re-packs the checker accepted
        w.report.save(output)
    if as_json:
        echo_json(w.to_json())
        return
    c = console()
    if not w.tiles and nothing_to_analyse(r):
        c.print(f"{report}: {nothing_to_analyse(r)}")
    else:
        program_view(c, f"{report} (what-if)", w.summary, report_arg=report)
        tile_table(c, w.tiles)
    if output:
        c.print(f"wrote {output}")

