"""``generate --arch NAME`` and ``generate --config ipu_config.json``: a named architecture's
shape, and the levers and pipeline stages of an optimum-graphcore ``IPUConfig``."""
from __future__ import annotations

import click

#: ``--state-type`` / ``--accum-type``: bytes of an element.
TYPES = {"float": 4, "half": 2}


def arch_options(f):
    """The options of named architectures and configurations."""
    from ..generate.archs import ARCHS

    for opt in reversed([
        click.option("--arch", type=click.Choice(ARCHS, case_sensitive=False), default=None,
                      help="A named architecture at its real shape, sizes in real bytes (not "
                           "calibrated, --steps unused): encoders with an MLM head over the "
                           "masked positions, GPT-2 decoders causal with a tied LM head over "
                           "every position, ViT with a patch embedding and a class head, "
                           "ResNet-50 as the cnn family's chain with its projection shortcuts. "
                           "FP16 weights and activations; Adam's moments and the gradient "
                           "accumulators by --state-type and --accum-type. --seq-len (default "
                           "128 encoders, 1024 GPT-2), --image-size (ViT, ResNet) and "
                           "--micro-batch apply. Prints the parameter count."),
        click.option("--state-type", type=click.Choice(list(TYPES)), default="float",
                     show_default=True,
                     help="--arch: Adam's moments FP32 (float) or FP16 (half)."),
        click.option("--accum-type", type=click.Choice(list(TYPES)), default="float",
                     show_default=True,
                     help="--arch: the gradient accumulators FP32 (float) or FP16 (half)."),
        click.option("--head-stage", type=click.Choice(["last", "first"]), default="last",
                     show_default=True,
                     help="Pipelined transformer: the tied head on the last stage (the "
                          "embedding copied there) or the first (the embedding's; the last "
                          "layer's output copied there). A first split point 0 (--splits "
                          "0,...) leaves the first stage the embedding alone."),
        click.option("--config", "config", default=None, type=click.Path(dir_okay=False),
                     metavar="IPU_CONFIG.json",
                     help="Compile an optimum-graphcore IPUConfig with --arch: its "
                          "layers_per_ipu (0 and -1 too), ipus_per_replica, matmul_proportion, "
                          "recompute_checkpoint_every_layer, optimizer_state_offchip, "
                          "replicated_tensor_sharding, replication_factor, "
                          "enable_half_partials, enable_half_first_order_momentum and "
                          "embedding_serialization_factor; the tied head on the first IPU "
                          "(as optimum-graphcore places it) unless --head-stage says."),
    ]):
        f = opt(f)
    return f


def resolve(arch, config, seq_len, image_size, micro_batch, state_type, accum_type,
            levers, shape, model, points, ipus, head_stage, head_given):
    """``(model, shape, levers, points, ipus, head_stage)`` after ``--arch`` and
    ``--config``; ``click.BadParameter`` for what does not fit, ``ReportError`` for a
    bad configuration file."""
    from ..generate.archs import PUBLISHED, arch_shape, parameters
    from ..generate.transformershape import Shape
    from ..levers import Levers

    if arch is not None:
        if shape is not None:
            raise click.BadParameter("give --arch or the shape options (--layers, --hidden, "
                                     "...), not both", param_hint="--arch")
        vision = arch.lower() in ("resnet50", "vit-base-16", "vit-large-16")
        try:
            shape = arch_shape(arch, seq_len=seq_len, image=image_size if vision else None,
                               micro_batch=micro_batch, state_bytes=TYPES[state_type],
                               accum_bytes=TYPES[accum_type])
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--arch") from None
        model = "transformer" if isinstance(shape, Shape) else "cnn"
        n = parameters(shape)
        pub, quoted, ours = PUBLISHED[arch.lower()]
        click.echo(f"{arch.lower()}: {n:,} parameters ({(n - pub) / pub:+.2%} of the published "
                   f"{pub / 1e6:g}M: {quoted}; here: {ours})")
    if config is None:
        if model == "cnn" and levers.serialise > 1:
            raise click.BadParameter("a cnn has no vocabulary to serialise",
                                     param_hint="--serialise")
        return model, shape, levers, points, ipus, head_stage
    from ..generate.ipuconfig import from_ipu_config, read_ipu_config

    if not isinstance(shape, Shape):
        raise click.BadParameter("an IPUConfig pipelines a transformer's layers: give --arch "
                                 "(a transformer) or the transformer shape options",
                                 param_hint="--config")
    if points is not None or ipus != 1:
        raise click.BadParameter("--config sets the stages (layers_per_ipu): give no "
                                 "--splits or --ipus", param_hint="--config")
    if levers != Levers():
        raise click.BadParameter("--config sets the levers: give none as options",
                                 param_hint="--config")
    cfg = read_ipu_config(config)
    levers, splits = from_ipu_config(cfg, shape.layers, shape.vocab or None, path=config)
    if not head_given:
        head_stage = "first"
    return model, shape, levers, (splits or None), len(splits) + 1, head_stage
