from __future__ import annotations

import click

from .options import report_path_argument


@click.command()
@report_path_argument
@click.option("--ipus", type=int, default=None,
              help="Stages, one an IPU (default: the fewest on which every stage fits).")
@click.option("--stash", type=click.Choice(["inputs", "activations"]), default="inputs",
              show_default=True,
              help="What a stage keeps for the micro-batches in flight: its input (the "
                   "backward recomputes its activations) or every activation still live when "
                   "it hands over (no recomputation). The report cannot tell; the framework's "
                   "recomputation option decides.")
@click.option("--stash-mapping", type=click.Choice(["like", "linear"]), default=None,
              help="How the framework lays the stash out: like the tensors it keeps "
                   "(default) or spread evenly over the IPU's tiles. The report cannot tell.")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
def split(report, ipus, stash, stash_mapping, as_json):
    """Where to split the program over IPUs: pipeline stages that fit.

    From REPORT (the program compiled for fewer IPUs, typically one, out of memory): the
    contiguous split of its layers, in program order, into --ipus stages that minimises the
    worst stage's maximum live bytes, estimated for each stage recompiled on its own IPU
    (by the bound: what no allocator can beat), with the buffers pipelining adds. Without
    --ipus: the fewest IPUs on which every stage fits. A report already pipelined is
    answered per IPU (the tightest stage, which layer to move), or split again over more
    IPUs. Every assumption is printed with the answer.

    Example: tilemem split report.capnp --ipus 4
    """
    from .. import api
    from ..text.split import split_view

    if ipus is not None and ipus < 1:   # refused before the report is read
        from ..errors import ReportError

        raise ReportError(f"--ipus {ipus}: a split needs at least one IPU", path=report,
                          field="--ipus")
    s = api.split(api.load(report), ipus, stash, stash_mapping)
    if as_json:
        from .options import echo_json

        echo_json(s.to_json())
    else:
        click.echo(split_view(s.answer, report, None, ipus))
