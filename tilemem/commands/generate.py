from __future__ import annotations

import click

from .generate_arch import arch_options
from .options import lever_options


@click.command()
@arch_options
@click.option("--model", type=click.Choice(["cnn", "transformer"]), default="cnn",
              show_default=True,
              help="Program family: cnn (convolution, matmul, normalisation and recurrent "
                   "layers, SGD with momentum) or transformer (attention and MLP blocks, Adam, "
                   "gradient accumulation over micro-batches in a Repeat loop with "
                   "loop-carried accumulators, the update in an If/Else on the loss scale).")
@click.option("--always-live-state", is_flag=True,
              help="Write the weights and optimiser state alwaysLive (default: not "
                   "alwaysLive, live over every step, so interfering with every other class): "
                   "two readings of the same memory that the spec allows.")
@click.option("--preset", type=click.Choice(["mk1", "mk2"]), default="mk1", show_default=True,
              help="Target: mk1 (GC2, 1216 x 256 KiB) or mk2 (GC200, 1472 x 624 KiB).")
@click.option("--tiles", type=click.IntRange(min=1), default=None,
              help="Number of tiles per IPU (default: the whole IPU).")
@click.option("--ipus", type=click.IntRange(min=1), default=1, show_default=True,
              help="IPUs: the model is pipelined over them, one stage per IPU; tiles are "
                   "numbered globally (numTiles = IPUs x tiles per IPU).")
@click.option("--splits", default=None, metavar="L1,L2,...",
              help="The one-IPU program of this seed and --steps, pipelined: stage k starts "
                   "at layer Lk (len + 1 IPUs; e.g. the split points of 'tilemem split').")
@click.option("--stash-mapping", type=click.Choice(["like", "linear"]), default=None,
              help="On several IPUs, how a stage's stash (its data for the micro-batches in "
                   "flight) is mapped: like the tensors it keeps (one part each, on their "
                   "tiles) or linear (one tensor over the IPU); the spec allows both. "
                   "Default: the family's own, like for cnn, linear for transformer.")
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="Approximate number of program steps (default: 2000 mk1, 4400 mk2 for cnn; "
                   "610 mk1, 860 mk2 for transformer; times --ipus).")
@click.option("--pressure", type=click.FloatRange(min=0, min_open=True), default=1.0,
              show_default=True,
              help="Multiplies tensor sizes, calibrated so that 1 leaves a few tiles out of "
                   "memory (the transformer's tiles are alike: they go out of memory together, "
                   "not one by one, as pressure grows).")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@lever_options
@click.option("--layers", default=None, metavar="N|LIST",
              help="A named shape, sizes in real bytes, not calibrated, --steps unused. "
                   "Transformer: the number of layers (with --hidden, --heads, --seq-len, "
                   "--vocab). cnn: the layer list, comma separated: convKxK[/S]:C, fc:N, bn, "
                   "relu, pool[/S], gap, N*(...), or resnet50 (ResNet-50's chain, its "
                   "residual additions left out), on --image-size images.")
@click.option("--image-size", "image_size", type=click.IntRange(min=1), default=224,
              show_default=True, help="cnn shape: the input images' height and width.")
@click.option("--hidden", type=click.IntRange(min=1), default=None,
              help="Transformer shape: hidden size.")
@click.option("--heads", type=click.IntRange(min=1), default=None,
              help="Transformer shape: attention heads.")
@click.option("--seq-len", "seq_len", type=click.IntRange(min=1), default=None,
              help="Transformer shape: sequence length.")
@click.option("--vocab", type=click.IntRange(min=1), default=None,
              help="Transformer shape: vocabulary size.")
@click.option("--micro-batch", "micro_batch", type=click.IntRange(min=1), default=1,
              show_default=True,
              help="A named shape's micro-batch: sequences (transformer) or images (cnn).")
@click.option("--partial", type=click.IntRange(min=1), default=None, metavar="K",
              help="Write a partial report, as Poplar does with debug.loweredVarDumpNumOOMTiles: "
                   "the variables of the K worst out-of-memory tiles only (numTiles unchanged).")
@click.option("-o", "--output", "out", required=True, type=click.Path(),
              help="Output report, .json or .capnp. Over several IPUs a .capnp is made and "
                   "written IPU by IPU (memory of one IPU's variables); a .json (or "
                   "--partial) holds the whole report first.")
def generate(model, always_live_state, preset, tiles, steps, pressure, seed, ipus,
             partial, out, splits, stash_mapping, levers, amp_given, layers, hidden, heads,
             seq_len, vocab, micro_batch, image_size, arch, state_type, accum_type, head_stage,
             config):
    """Generate a realistic lowered-variables report of a Poplar-like training program.

    Tensors spread over tiles with calcLinearTileMapping's rules, Repeat and If/Else control
    flow, always-live code/stack/vertex data in the proportions of a Poplar profile, offsets
    from a first-fit allocator (tiles that do not fit spill past tileMemory). Writes the
    tilemem extension equivalenceClassSteps. --model picks the program family. With
    --ipus N the layers are split into N
    pipeline stages, one per IPU, joined by inter-IPU copies (globalMessage buffers on both
    sides), and the report records the extension field tilesPerIPU. The memory levers
    (--amp, --half-partials, --half-momentum, --rts N [--rts-weights],
    --offload-optimiser-state, --recompute, --recompute-at, --serialise N; spelt as what-if
    spells them) compile the same program with them: the one of this seed without them,
    sized as it is. Deterministic for a seed.

    Example: tilemem generate --model transformer --preset mk2 --layers 24 --hidden 1024
    --heads 16 --seq-len 128 --vocab 30522 -o bert-large.capnp
    """
    from ..figures.summary import highest_end_per_tile
    from ..load import FORMATS, save_report
    from ..generate import generate_report
    from ..text import human_bytes
    from .guards import output_path
    from .options import console

    output_path(out, FORMATS)
    shape = _shape(model, layers, hidden, heads, seq_len if arch is None else None, vocab,
                   micro_batch, image_size)
    points = None
    if splits is not None:
        try:
            points = tuple(int(x) for x in splits.split(","))
        except ValueError:
            raise click.BadParameter(f"{splits!r} is not layer numbers separated by commas",
                                     param_hint="--splits") from None
        if ipus not in (1, len(points) + 1):
            raise click.BadParameter(f"{len(points)} split points make {len(points) + 1} "
                                     f"stages, not --ipus {ipus}", param_hint="--splits")
    from .generate_arch import resolve

    head_given = (click.get_current_context().get_parameter_source("head_stage")
                  != click.core.ParameterSource.DEFAULT)
    model, shape, levers, points, ipus, head_stage = resolve(
        arch, config, seq_len, image_size, micro_batch, state_type, accum_type,
        levers, shape, model, points, ipus, head_stage, head_given)
    c = console()
    # a report over several IPUs is made and written IPU by IPU as capnp (the Pod format),
    # never held whole; JSON (and --partial, which picks tiles over the whole report) whole
    by_ipu = ((ipus > 1 or points is not None) and partial is None
              and out.lower().endswith(".capnp"))
    try:
        r = generate_report(preset, tiles=tiles, steps=steps, pressure=pressure, seed=seed,
                            progress=True, ipus=ipus, model=model, splits=points,
                            always_live_state=always_live_state, stash_mapping=stash_mapping,
                            levers=levers, shape=shape, by_ipu=by_ipu,
                            **({} if head_stage == "last" else {"head_stage": head_stage}))
    except ValueError as e:
        hint = ("--recompute-at" if str(e).startswith("recompute")
                else "--serialise" if str(e).startswith("serialise")
                else "--head-stage" if str(e).startswith("head_stage")
                else "--amp" if "availableMemoryProportion" in str(e)
                else "--layers" if "layers" in str(e) and shape is not None else "--splits")
        raise click.BadParameter(str(e), param_hint=hint) from None
    if by_ipu:
        _write_by_ipu(r, out, c, pressure, seed)
        return
    over = int((highest_end_per_tile(r) > r.target.tile_memory).sum())
    if partial is not None:
        from ..generate.partial import keep_worst_oom_tiles

        r = keep_worst_oom_tiles(r, partial)
    with c.status(f"writing {out}"):
        save_report(r, out)
    ipu_text = (f" on {r.target.num_ipus} IPUs of {r.target.ipu_tiles:,}"
                if r.target.num_ipus > 1 else "")
    c.print(f"{out}: {r.num_tiles:,} tiles{ipu_text}, {r.num_vars:,} variables, "
            f"{r.num_classes:,} classes, "
            f"{human_bytes(int(r.size.sum()))} in all; {over:,} tile(s) out of memory "
            f"(first fit, pressure {pressure:g}, seed {seed})"
            + ("" if partial is None else
               f"; partial: the variables of {len(r.tiles_in_use()):,} of them only"))


def _write_by_ipu(p, out, c, pressure, seed) -> None:
    """Write an ``IpuPieces`` report, counting what the summary line says as it passes."""
    from dataclasses import replace

    from ..figures.summary import highest_end_per_tile
    from ..load import save_report
    from ..text import human_bytes

    seen = {"vars": 0, "bytes": 0, "over": 0}

    def counted(pieces):
        for piece in pieces:
            seen["vars"] += piece.num_vars
            seen["bytes"] += int(piece.size.sum())
            seen["over"] += int((highest_end_per_tile(piece) > p.target.tile_memory).sum())
            yield piece

    save_report(replace(p, pieces=counted(p.pieces)), out)
    t = p.target
    c.print(f"{out}: {t.num_tiles:,} tiles on {t.num_ipus} IPUs of {t.ipu_tiles:,}, "
            f"{seen['vars']:,} variables, {p.num_classes:,} classes, "
            f"{human_bytes(seen['bytes'])} in all; {seen['over']:,} tile(s) out of memory "
            f"(first fit, pressure {pressure:g}, seed {seed}); made and written IPU by IPU")


def _shape(model, layers, hidden, heads, seq_len, vocab, micro_batch, image_size=224):
    """The named ``Shape`` (``CnnShape``) of the shape options, or None;
    ``click.BadParameter`` (exit 2, one line) for a value that is not valid, before any
    work."""
    from ..generate.cnnshape import CnnShape
    from ..generate.transformer import Shape

    given = {"--layers": layers, "--hidden": hidden, "--heads": heads, "--seq-len": seq_len,
             "--vocab": vocab}
    shape = None
    if model == "cnn" and layers is not None:
        wrong = [k for k, v in given.items() if v is not None and k != "--layers"]
        if wrong:
            raise click.BadParameter(f"{wrong[0]} belongs to a transformer's shape: add "
                                     "--model transformer (a cnn's is its layer list)",
                                     param_hint="--layers")
        try:
            return CnnShape.parse(layers, image=image_size, micro_batch=micro_batch)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--layers") from None
    if layers is not None:
        try:
            layers = int(layers)
        except ValueError:
            raise click.BadParameter(f"{layers!r}: a transformer's --layers is a number of "
                                     "layers (a layer list is the cnn family's)",
                                     param_hint="--layers") from None
        if layers < 1:
            raise click.BadParameter(f"{layers} is not a number of layers of 1 or more",
                                     param_hint="--layers")
    if any(v is not None for v in given.values()):
        missing = [k for k, v in given.items() if v is None]
        if missing:
            raise click.BadParameter(f"a transformer's shape needs {', '.join(missing)} too",
                                     param_hint=missing[0])
        if model != "transformer":
            raise click.BadParameter("a named shape is the transformer family's: add "
                                     "--model transformer", param_hint="--layers")
        try:
            shape = Shape(layers, hidden, heads, seq_len, vocab, micro_batch)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--heads") from None
    return shape
