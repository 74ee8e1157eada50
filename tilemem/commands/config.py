from __future__ import annotations

import click

from .options import report_path_argument

OBJECTIVES = ("ipus", "micro-batch", "cost")


def _names(text):
    return tuple(x.strip() for x in text.split(",") if x.strip()) if text else ()


@click.command()
@report_path_argument
@click.option("--max-ipus", type=int, default=16, show_default=True,
              help="IPUs per replica tried, from one up to this.")
@click.option("--ipus", type=int, default=None, help="Only this many IPUs per replica.")
@click.option("--micro-batch", type=int, default=None, help="Only this micro-batch.")
@click.option("--report-micro-batch", type=int, default=1, show_default=True,
              help="The micro-batch REPORT was compiled with.")
@click.option("--max-micro-batch", type=int, default=64, show_default=True,
              help="The largest micro-batch tried (powers of two times the report's).")
@click.option("--objective", type=click.Choice(OBJECTIVES), default="ipus", show_default=True,
              help="What ranks the configurations that fit: the fewest IPUs, the largest "
                   "micro-batch or the cheapest levers first (then the others).")
@click.option("--prefer", default="", help="Levers made free, comma-separated "
              "(half-momentum, half-partials, serialise, rts, offload, rts-weights, recompute, "
              "recompute-at, amp).")
@click.option("--avoid", default="", help="Levers left out, comma-separated.")
@click.option("--replicas", type=int, default=4, show_default=True,
              help="Replicas the optimiser state (and weights) are sharded over.")
@click.option("--serialise", type=int, default=4, show_default=True,
              help="Slices of the vocabulary matmul when the search serialises it.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the best configuration as optimum-graphcore ipu_config.json.")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
def config(report, max_ipus, ipus, micro_batch, report_micro_batch, max_micro_batch,
           objective, prefer, avoid, replicas, serialise, output, as_json):
    """The whole configuration that fits: IPUs, layers per IPU, levers, micro-batch.

    From REPORT (typically one IPU, out of memory): searches jointly the IPUs per replica,
    the layers on each (contiguous), the program's memory levers, each stage's
    availableMemoryProportion and the micro-batch. A configuration fits only under
    tileMemory by more than the measured error of the estimates it rests on. Prints the
    ranked configurations that fit, the best one's stages, the near misses with the change
    that makes each fit, the IPUConfig keys and the PopTorch options.

    Example: tilemem config report.capnp --max-ipus 8 -o ipu_config.json
    """
    from .. import api
    from ..errors import ReportError

    q = api.ConfigQuery(max_ipus=max_ipus, ipus=ipus, micro_batch=micro_batch,
                        report_micro_batch=report_micro_batch,
                        max_micro_batch=max_micro_batch, objective=objective,
                        prefer=_names(prefer), avoid=_names(avoid), replicas=replicas,
                        serialise=serialise)
    try:   # refused before the report is read
        q.check()
        if output is not None and not output.endswith(".json"):
            raise ReportError(f"-o {output}: write a .json file", field="-o")
    except ReportError as e:
        e.path = report
        raise
    c = api.configure(api.load(report), q)
    written = c.best_in_ipu_config
    if output is not None and written is not None:
        from .options import write_json

        write_json(output, c.ipu_config())
    if as_json:
        from .options import echo_json

        echo_json(c.to_json())
    else:
        from ..text.config import config_view

        click.echo(config_view(c.answer, report))
        if output is not None:
            if written is None:
                click.echo(f"\nnothing written to {output}: no configuration that an "
                           "IPUConfig can say fits" + ("" if c.best is None else
                                                       " (the weights sharded, or checkpoints "
                                                       "at some layers only, have no key)"))
            else:
                rank = c.answer.ranked.index(written) + 1
                click.echo(f"\nwrote {output}: configuration {rank}"
                           + ("" if written is c.best else
                              " (the best shards the weights or recomputes from checkpoints at "
                              "some layers only, which an IPUConfig has no key for: PopTorch's "
                              "options above)")
                           + (f"; its micro-batch {written.micro_batch} is the DataLoader's "
                              "batch size" if written.micro_batch != 1 else ""))
