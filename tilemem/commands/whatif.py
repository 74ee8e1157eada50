from __future__ import annotations

import click

from ..pack.kinds import DEFAULTS
from .guards import output_path
from .options import packing_options, report_path_argument


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
@click.option("--amp", default=None, metavar="A[,A...]",
              help="availableMemoryProportion of the convolutions and matmuls, one value or "
                   "one an IPU: their partial sums (told by lifetime and element constraints) "
                   "scale by A / --amp-was.")
@click.option("--amp-was", "amp_was", type=float, default=None, metavar="A",
              help="The availableMemoryProportion the report was compiled with (default "
                   "0.6, Poplar's).")
@click.option("--half-partials", is_flag=True,
              help="FP16 partials: the convolution and matmul partial sums in half the bytes.")
@click.option("--half-momentum", is_flag=True,
              help="FP16 first-order momentum: the persistent state named as momentum in half.")
@click.option("--rts", type=int, default=None, metavar="N",
              help="Replicated tensor sharding over N replicas: each keeps 1/N of the "
                   "optimiser state (persistent, named as an optimiser's), spread over its "
                   "IPU.")
@click.option("--rts-weights", "rts_weights", is_flag=True,
              help="With --rts, the weights sharded too: each tile keeps its largest weight's "
                   "part whole (the weight a pass all-gathers before reading it), the rest "
                   "joins the 1/N share.")
@click.option("--recompute", is_flag=True,
              help="Recompute every layer's activations in the backward pass from its input: "
                   "the activations kept for the backward (told by lifetime) live shorter, "
                   "recomputed copies appear in the backward. Needs class steps.")
@click.option("--recompute-at", "recompute_at", default=None, metavar="L1,L2,...",
              help="Recompute from checkpoints at these layers' inputs only (and the first "
                   "layer's, and every IPU's first layer's).")
@click.option("--serialise", type=click.IntRange(min=1), default=1, show_default=True,
              metavar="N",
              help="The vocabulary matmul, its gradients and the embedding's update in N "
                   "slices one after the other (optimum-graphcore's "
                   "embedding_serialization_factor): the partial sums of the matmuls named as "
                   "the vocabulary's, the vocabulary weight's gradient and the embedding's "
                   "optimiser temporaries at 1/N.")
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
            micro_batch, amp, amp_was, half_partials, half_momentum, rts, recompute,
            recompute_at, rts_weights, serialise):
    """How many tiles would still be out of memory with some tensors offloaded or shrunk?

    Answers with `tilemem oom`'s program summary for the changed data: by the bound (each
    tile's maximum live bytes recomputed, all tiles at once), and with --repack by a
    re-pack the checker accepts. The tiles in question are those out of memory in REPORT
    and those whose live data no longer fits. It assumes the same program with other sizes:
    the same variables on the same tiles, with the same lifetimes and interference (a real
    recompilation also changes lifetimes -- recomputation shortens them --, the mapping and
    the code).

    The memory levers (--amp, --half-partials, --half-momentum, --rts N [--rts-weights],
    --recompute, --recompute-at, --serialise N) find the variables
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
    # a bad pattern is refused before the report is read
    if recompute and recompute_at is not None:
        raise click.BadParameter("give --recompute or --recompute-at, not both",
                                 param_hint="--recompute-at")
    levers = dict(amp=amp, amp_was=amp_was, half_partials=half_partials,
                  half_momentum=half_momentum, rts=rts,
                  recompute="all" if recompute else recompute_at, rts_weights=rts_weights,
                  serialise=serialise)
    what_if_edits(offload, scale, micro_batch, **levers)
    r = api.load(report)
    w = api.what_if(r, offload, scale, micro_batch=micro_batch, repack=repack, method=method,
                    budget=budget, time_limit=time_limit, **levers)
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
