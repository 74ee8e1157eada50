from __future__ import annotations

import click

from .options import report_path_argument


@click.command()
@report_path_argument
@click.option("--ipus", type=int, default=None,
              help="Stages, one an IPU (default: the fewest on which every stage fits).")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
def split(report, ipus, as_json):
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
    from ..errors import ReportError
    from ..figures.split import SplitModel
    from ..figures.splitsearch import best_split, current_split, fewest_ipus
    from ..load import load_report
    from ..text.split import split_view
    from .guards import nothing_to_analyse
    from .options import echo_json

    if ipus is not None and ipus < 1:
        raise ReportError(f"--ipus {ipus}: a split needs at least one IPU", path=report,
                          field="--ipus")
    r = load_report(report)
    empty = nothing_to_analyse(r)
    if empty:
        raise ReportError(empty, path=report, field="vars")
    try:
        m = SplitModel(r)
        have = m.source_ipus
        if ipus is not None and ipus < have:
            raise ReportError(f"--ipus {ipus}: the report is already split over {have} IPUs "
                              f"(tilesPerIPU {r.target.ipu_tiles}); ask for {have} or more",
                              field="--ipus")
        if ipus is not None and ipus > m.L:
            raise ReportError(f"--ipus {ipus} is more IPUs than the {m.L} units "
                              f"({m.units.source}) to split", field="--ipus")
        if have > 1 and ipus in (None, have):
            a = current_split(m, r)
        elif ipus is None:
            a = fewest_ipus(m)
        else:
            a = best_split(m, ipus)
    except ReportError as e:
        if e.path is None:
            e.path = report
        raise
    if as_json:
        echo_json(a)
    else:
        click.echo(split_view(a, report, None, ipus))
