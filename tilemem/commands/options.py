"""What every command shares: the REPORT argument, ``--tiles`` parsing, JSON on stdout and the
rich console the text views (``tilemem.text``) print to. Part of the CLI: no stage imports
click."""
from __future__ import annotations

import sys
from typing import Any

import click


def _json_text(obj: Any) -> bytes:
    from ..api.files import json_text

    return json_text(obj)


def echo_json(obj: Any) -> None:
    sys.stdout.write(_json_text(obj).decode())


def write_json(path, obj: Any) -> None:
    """What ``echo_json`` prints, written to ``path`` atomically."""
    from ..load import atomic_write

    with atomic_write(path) as f:
        f.write(_json_text(obj))


def console():
    """The console every command prints its text views on (made here only).

    On a terminal, lines wrap at the terminal's width (or at ``COLUMNS`` when it is set, as
    rich reads it). With stdout piped or redirected, nothing wraps, whatever ``COLUMNS``
    says: rich would take that, the width of a terminal on stdin, or 80 columns, and break
    lines inside phrases and numbers, and a Python process that imported readline (pytest,
    IPython, a script that runs tilemem) exports ``COLUMNS=80`` to every child it starts. A
    file, a pager or ``grep`` gets each line whole, tables at their natural width. Asked of
    stdout itself, not of rich's ``is_terminal``, which ``FORCE_COLOR`` turns on for colours
    in a pipe."""
    from rich.console import Console

    from ..text.common import unwrapped_console

    isatty = getattr(sys.stdout, "isatty", None)
    if isatty is not None and isatty():
        return Console(highlight=False)
    return unwrapped_console()


def report_path_argument(f):
    # no checks here: the loader says in one line what is wrong with the path
    return click.argument("report", type=click.Path())(f)


def parse_tiles(spec: str | None, num_tiles: int, option: str = "--tiles"):
    """``"0,5,100-200"`` -> sorted unique tile numbers; ``None`` -> ``None`` (all tiles).
    ``option``: the option's name, for the error.

    >>> parse_tiles("3,0-2,3", 10).tolist()
    [0, 1, 2, 3]
    """
    import numpy as np

    from ..errors import ReportError

    if spec is None:
        return None
    tiles = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                tiles.extend(range(lo, hi + 1))
            else:
                tiles.append(int(part))
        except ValueError:
            raise ReportError(f"{option}: {part!r} is not a tile or a range like 100-200",
                              field=option) from None
    arr = np.unique(np.asarray(tiles, np.int64))
    bad = arr[(arr < 0) | (arr >= num_tiles)]
    if len(bad):
        raise ReportError(f"{option}: tile {bad[0]} is outside [0, {num_tiles})", field=option,
                          tile=int(bad[0]))
    return arr


def packing_options(*, what: str | None = None, budget: float | None = None,
                    time_limit: float | None = None, time_limit_help: str | None = None,
                    budget_help: str | None = None,
                    run: bool = False):
    """The options of every command that runs the packer, defined once: ``--method``,
    ``--time-limit`` and (given a ``budget`` default) ``--budget``; with ``run`` also how
    the run runs (``--workers``, ``--scheduler``, ``--shared-report``, ``--seed``,
    ``--deterministic``: ``alloc``'s). ``what``: what the packer does in this command ("the
    re-pack"), for the help (None: ``alloc``, which says it in full). Each command states
    its own default budget and time limit here, from ``tilemem.pack.kinds.DEFAULTS``;
    ``*_help``: a command's own sentence where the packer's time means something else
    there."""
    from ..pack.kinds import DEFAULTS
    from .guards import BUDGET, METHOD, SECONDS

    see = " (see `tilemem alloc`)"
    options = [click.option(
        "--method", type=METHOD, default="auto", show_default=True,
        help=(
            f"Packing method of {what}{see}." if what else
            "replay: first fit in allocationOrderByTile order; heuristic: best of a few "
            "greedy orders; auto: heuristic, then a quick search and the exact portfolio "
            "where it overflows or misses the bound; exact: the exact portfolio on every "
            "tile (also lowers each region's high-water mark).")),
        click.option(
            "--time-limit", type=SECONDS,
            default=DEFAULTS.time_limit if time_limit is None else time_limit,
            show_default=True,
            help=time_limit_help or (
                f"Seconds of one slice of exact work on a tile in {what} (a cap)." if what
                else "Seconds of one slice of the exact portfolio on a tile (auto, exact): "
                     "a cap."))]
    if budget is not None:
        options.append(click.option(
            "--budget", type=BUDGET, default=budget, show_default=True,
            help=budget_help or (
                f"Seconds for the whole of {what}{see}." if what else
                "Seconds the run may take; it ends earlier once every tile is within 0.1% "
                "of its bound or proven optimal, and says so. Under auto every tile is "
                "visited first (the heuristic, then a quick search: an even share); then "
                "each next slice goes to the tiles that overflow although their bound fits, "
                "and among the rest to where it is expected to close the most gap per "
                "second, learned as the run goes. See docs/architecture.md. Not applied "
                "with --deterministic.")))
    if run:
        options += [
            click.option("--workers", type=click.IntRange(min=1), default=None,
                         help="Processes (default: all cores)."),
            click.option("--scheduler", default=None,
                         help="Run the tiles on Dask: 'local' starts a LocalCluster on this "
                              "machine (its dashboard address is printed), tcp://HOST:8786 "
                              "uses a running scheduler (pip install 'tilemem[cluster]'). "
                              "Default: this machine's process pool."),
            click.option("--shared-report", is_flag=True,
                         help="With --scheduler: the workers must see REPORT at this same "
                              "path (a shared file system; an error if one does not). "
                              "Without it a capnp REPORT is opened by the workers that all "
                              "see it (each builds only its IPUs' part of it), and sent to "
                              "every worker where one does not."),
            click.option("--seed", type=int, default=0, show_default=True,
                         help="Random seed."),
            click.option("--deterministic", is_flag=True,
                         help="Repeat exactly, on any machine and any number of workers: "
                              "every stage stops on work done instead of the clock (CP-SAT's "
                              "deterministic time with one worker, the compiled search's "
                              "nodes, the local search's moves, each from --time-limit at a "
                              "fixed rate); auto's quick search, which stops on the clock, "
                              "is skipped, and --budget is not applied.")]

    def decorate(f):
        for option in reversed(options):
            f = option(f)
        return f

    return decorate


def lever_options(f):
    """The memory levers' options, one spelling for every command that takes them
    (``generate`` compiles them, ``what-if`` estimates them): ``--amp``, ``--half-partials``,
    ``--half-momentum``, ``--rts N`` [``--rts-weights``], ``--offload-optimiser-state``,
    ``--recompute``, ``--recompute-at``, ``--serialise N``; the command receives one
    ``tilemem.levers.Levers`` as ``levers`` and, as ``amp_given``, whether ``--amp`` was
    given. ``generate``'s earlier spellings stay as hidden aliases:
    ``--available-memory-proportion A`` and ``--replicas N --rts``. A value that is not valid
    is ``click.BadParameter`` (one line, exit 2) naming the option, before any work."""
    import functools

    from ..levers import DEFAULT_AMP

    options = [
        click.option("--amp", "amp", default=None, metavar="A[,A...]",
                     help=f"availableMemoryProportion of the convolutions and matmuls, one value "
                          f"or one a pipeline stage (IPU) (0.3,0.6): their partial sums scale "
                          f"with it (default {DEFAULT_AMP:g}, Poplar's)."),
        click.option("--available-memory-proportion", "amp_alias", default=None, hidden=True,
                     help="--amp's former name in generate."),
        click.option("--half-partials", is_flag=True,
                     help="FP16 partials of the convolutions and matmuls: every partial sum in "
                          "half the bytes, the same elements on the same tiles."),
        click.option("--half-momentum", is_flag=True,
                     help="The first-order momentum (SGD's momentum, Adam's first moment) in "
                          "FP16."),
        click.option("--rts", "rts", type=int, is_flag=False, flag_value=0, default=None,
                     metavar="N",
                     help="Replicated tensor sharding over N replicas (2 or more): each keeps "
                          "1/N of the optimiser state, one flat shard linearly over its IPU; "
                          "the gradient is reduce-scattered and the updated weights "
                          "all-gathered."),
        click.option("--replicas", "replicas", type=int, default=None, hidden=True,
                     help="generate's former spelling, --replicas N --rts: --rts N."),
        click.option("--rts-weights", "rts_weights", is_flag=True,
                     help="With --rts, the weights sharded too: each replica keeps 1/N of "
                          "every weight and all-gathers a layer's whole weights before each "
                          "pass that reads them, a temporary to their last use there."),
        click.option("--offload-optimiser-state", "offload_state", is_flag=True,
                     help="The optimiser state off chip (streaming memory): each weight's "
                          "update loads its state into the chip and stores it back, a "
                          "temporary of that update."),
        click.option("--recompute", is_flag=True,
                     help="Recompute activations: a checkpoint at every layer's input; the "
                          "rest is recomputed in the backward pass."),
        click.option("--recompute-at", "recompute_at", default=None, metavar="L1,L2,...",
                     help="Recompute from checkpoints at these layers' inputs only (and the "
                          "first layer's, and every pipeline stage's first)."),
        click.option("--serialise", type=click.IntRange(min=1), default=1, show_default=True,
                     metavar="N",
                     help="The vocabulary matmul (the logits), its gradients and the "
                          "embedding's update in N slices one after the other, each slice's "
                          "temporaries live in turn (optimum-graphcore's "
                          "embedding_serialization_factor)."),
    ]

    @functools.wraps(f)
    def wrapper(*args, amp, amp_alias, half_partials, half_momentum, rts, replicas,
                rts_weights, offload_state, recompute, recompute_at, serialise, **kw):
        levers = levers_of(amp, amp_alias, half_partials, half_momentum, rts, replicas,
                           rts_weights, offload_state, recompute, recompute_at, serialise)
        return f(*args, levers=levers, amp_given=amp is not None or amp_alias is not None,
                 **kw)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def levers_of(amp=None, amp_alias=None, half_partials=False, half_momentum=False, rts=None,
              replicas=None, rts_weights=False, offload_state=False, recompute=False,
              recompute_at=None, serialise=1):
    """The ``Levers`` of ``lever_options``' values; ``click.BadParameter`` naming the option
    of a value that is not valid."""
    from ..levers import DEFAULT_AMP, Levers, parse_recompute
    from ..rules import parse_amp

    if amp is not None and amp_alias is not None:
        raise click.BadParameter("give --amp once (--available-memory-proportion is its "
                                 "former name)", param_hint="--amp")
    hint = "--available-memory-proportion" if amp_alias is not None else "--amp"
    try:
        amps = parse_amp(amp if amp is not None else amp_alias if amp_alias is not None
                         else DEFAULT_AMP)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint=hint) from None
    if replicas is not None and replicas < 1:
        raise click.BadParameter(f"{replicas} is not a number of replicas of 1 or more",
                                 param_hint="--replicas")
    if rts == 0:   # --rts alone: the replicas of --replicas (generate's former spelling)
        if replicas is None or replicas < 2:
            raise click.BadParameter("--rts needs the replicas to shard over: --rts N, N 2 "
                                     "or more", param_hint="--rts")
        rts = replicas
    if rts is not None:
        if rts < 2:
            raise click.BadParameter(f"{rts} is not a number of replicas of 2 or more",
                                     param_hint="--rts")
        if replicas is not None and replicas != rts:
            raise click.BadParameter(f"--rts {rts} and --replicas {replicas} disagree",
                                     param_hint="--rts")
    if rts_weights and rts is None:
        raise click.BadParameter("--rts-weights needs --rts N (the replicas to shard over)",
                                 param_hint="--rts-weights")
    if recompute and recompute_at is not None:
        raise click.BadParameter("give --recompute or --recompute-at, not both",
                                 param_hint="--recompute-at")
    try:
        rec = "all" if recompute else parse_recompute(recompute_at)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--recompute-at") from None
    return Levers(amp=amps, half_partials=half_partials, half_momentum=half_momentum,
                  replicas=rts or replicas or 1, rts=rts is not None, recompute=rec,
                  rts_weights=rts_weights, offload_state=offload_state, serialise=serialise)
