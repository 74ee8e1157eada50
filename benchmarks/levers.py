"""``tilemem what-if``'s memory levers against the program compiled with them: for each lever,
family, number of IPUs and seed, a report is generated without the lever and the same program
with it (``tilemem generate`` with the lever's option); the what-if estimate of every tile's
maximum live bytes, from the first report alone, against the second report's (the bound of
each tile). A verdict is wrong where the estimate says a tile fits and it does not, or the
other way round; ``--margin`` (a share of tileMemory) leaves out tiles within it of
tileMemory in the compiled program.

    python benchmarks/levers.py --preset mk1 --tiles 64 --seeds 1,2,3 --ipus 1,2 \\
        [--levers amp,amp-per-stage,half-partials,half-momentum,rts,rts-weights,recompute,\\
        recompute-at,offload,offload-state,micro-batch,serialise] \\
        [--models cnn,transformer] [--seq-lens 128,1024] \\
        [--pressure 1.2]

Prints one line per case and a summary per lever (error: (estimate - actual) / actual).

``micro-batch`` compares a named shape (``SHAPES``: real bytes, not calibrated, so
``--pressure`` does not apply, and on the whole IPU of ``--preset`` unless ``--shape-tiles``)
generated with a micro-batch of ``MICRO_BATCH`` against the same shape with half
(``micro-batch-double``: half of it against ``MICRO_BATCH``, as ``tilemem config`` grows the
micro-batch from the report's); the generator
draws no micro-batch for its drawn models. ``offload`` is ``tilemem oom``'s plan's lever (its
name pattern) against the program compiled with the optimiser state off chip.
``serialise`` compares GPT-2 (``generate --arch gpt2``, real bytes times ``--pressure``) at
each of ``--seq-lens`` with the program compiled with ``--serialise 4``; on several IPUs the
embedding and the tied head are on the first (``SERIALISE_SPLITS``), as optimum-graphcore
places them.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from tilemem.figures.plan import PLAN_LEVERS

#: The plan's offload pattern (``tilemem.figures.plan``), as ``tilemem oom`` offers it.
OFFLOAD = next(x[2]["offload"] for x in PLAN_LEVERS if x[0] == "offload")
#: Each lever: (the generator's ``Levers`` fields, ``tilemem.what_if``'s keywords).
LEVERS = {
    "amp": (dict(amp=(0.3,)), dict(amp=0.3)),
    "amp-per-stage": (dict(amp="per-stage"), dict(amp="per-stage")),
    "half-partials": (dict(half_partials=True), dict(half_partials=True)),
    "half-momentum": (dict(half_momentum=True), dict(half_momentum=True)),
    "rts": (dict(replicas=4, rts=True), dict(rts=4)),
    "rts-weights": (dict(replicas=4, rts=True, rts_weights=True), dict(rts=4, rts_weights=True)),
    "recompute": (dict(recompute="all"), dict(recompute="all")),
    "recompute-at": (dict(recompute=(2,)), dict(recompute="2")),
    "offload": (dict(offload_state=True), dict(offload=[OFFLOAD])),
    # config's: what-if's offload-state lever (one weight's state streamed in for its update)
    "offload-state": (dict(offload_state=True), dict(offload_state=True)),
    "micro-batch": ({}, dict(micro_batch=0.5)),
    "micro-batch-double": ({}, dict(micro_batch=2.0)),
    "serialise": (dict(serialise=4), dict(serialise=4)),
}
#: The serialise lever's architecture (``generate --arch``), at each of ``--seq-lens``, in
#: real bytes times ``--pressure``; pipelined as the published configurations are: the
#: embedding and the tied head on the first IPU, the layers on the others.
SERIALISE_ARCH = "gpt2"
SERIALISE_SPLITS = {2: (0,), 4: (0, 6, 9)}
#: Program steps of the one-IPU program a family is generated with.
STEPS = {"cnn": 400, "transformer": 740}
#: Where the pipelined program's stages start (layers), by number of IPUs.
SPLITS = {"cnn": {2: (22,), 4: (11, 22, 33)}, "transformer": {2: (2,), 4: (1, 2, 3)}}
#: The named shapes of the micro-batch lever (``tilemem generate``'s shape options), each
#: with its splits by number of IPUs (at convolutions and layers), at sizes users run out of
#: memory with on one IPU: four BERT-Base layers with its vocabulary, ResNet-50 at 224 x 224.
SHAPES = {
    "transformer": (dict(layers=4, hidden=768, heads=12, seq_len=128, vocab=30522),
                    {2: (2,), 4: (1, 2, 3)}),
    "cnn": ("resnet50", {2: (76,), 4: (37, 76, 112)}),
}
#: The micro-batch the named shapes are generated with (``--micro-batch``), halved for the
#: compiled one.
MICRO_BATCH = 16


def bounds(r) -> np.ndarray:
    from tilemem.liveness import max_live_all

    tiles = r.tiles_in_use()
    out = np.zeros(r.num_tiles, np.int64)
    out[tiles] = [m.max_live_bytes for m in max_live_all(r, tiles)]
    return out


def estimate(r, **kw) -> np.ndarray:
    """Every tile's maximum live bytes by what-if's edits (``tilemem.what_if``'s bound)."""
    from tilemem.figures.whatif.edits import apply_edits, apply_recompute, parse_edits

    edits = parse_edits(kw.pop("offload", ()), (), kw.pop("micro_batch", None), **kw)
    changed, _ = apply_edits(r, edits)
    changed, _, _ = apply_recompute(changed, edits, base=r)
    return bounds(changed)[:r.num_tiles]


def shape_of(model, micro_batch):
    """The named shape of ``model`` for the micro-batch lever, with that micro-batch."""
    from tilemem.generate.cnnshape import CnnShape
    from tilemem.generate.transformershape import Shape

    spec = SHAPES[model][0]
    if model == "cnn":
        return CnnShape.parse(spec, image=224, micro_batch=micro_batch)
    return Shape(micro_batch=micro_batch, **spec)


def micro_batch_case(preset, tiles, model, ipus, seed, micro_batch=MICRO_BATCH,
                     double=False):
    """The micro-batch lever's case: a named shape with ``MICRO_BATCH``, and with half (with
    ``double``: the other way round, half of it estimated at twice that)."""
    from tilemem.generate import generate_report

    common = dict(tiles=tiles, seed=seed, model=model,
                  splits=None if ipus == 1 else SHAPES[model][1][ipus])
    base = generate_report(preset, shape=shape_of(model, micro_batch), **common)
    compiled = generate_report(preset, shape=shape_of(model, micro_batch // 2), **common)
    return (compiled, base) if double else (base, compiled)


def case(preset, tiles, model, ipus, seed, lever, pressure, shape_tiles=None,
         micro_batch=MICRO_BATCH):
    """``(errors, wrong verdicts, tiles near tileMemory)`` of one case."""
    from tilemem.generate import Levers, generate_report

    gen_kw, est_kw = LEVERS[lever]
    est_kw = dict(est_kw)
    if lever == "serialise":   # ``model`` is "gpt2@SEQ"
        from tilemem.generate.archs import arch_shape

        shape = arch_shape(model.split("@")[0], seq_len=int(model.split("@")[1]))
        common = dict(tiles=tiles, seed=seed, model="transformer", shape=shape,
                      pressure=pressure, splits=None if ipus == 1 else SERIALISE_SPLITS[ipus],
                      head_stage="first" if ipus > 1 else "last")
        base = generate_report(preset, **common)
        compiled = generate_report(preset, levers=Levers(**gen_kw), **common)
        est, act = estimate(base, **est_kw), bounds(compiled)
        used = act > 0
        return ((est[used] - act[used]) / act[used], est[used], act[used],
                base.target.tile_memory)
    if lever in ("micro-batch", "micro-batch-double"):
        base, compiled = micro_batch_case(preset, shape_tiles, model, ipus, seed, micro_batch,
                                          double=lever == "micro-batch-double")
        est, act = estimate(base, **est_kw), bounds(compiled)
        used = act > 0
        err = (est[used] - act[used]) / act[used]
        return err, est[used], act[used], base.target.tile_memory
    splits = None if ipus == 1 else SPLITS[model][ipus]
    if gen_kw.get("amp") == "per-stage":   # lower on the first stage, as the published
        amps = tuple([0.3] + [0.6] * (ipus - 1))  # configurations set on the embedding's
        gen_kw, est_kw = dict(amp=amps), dict(amp=",".join(map(str, amps)))
    common = dict(tiles=tiles, steps=STEPS[model], seed=seed, model=model, splits=splits,
                  pressure=pressure)
    base = generate_report(preset, **common)
    compiled = generate_report(preset, levers=Levers(**gen_kw), **common)
    est = estimate(base, **est_kw)
    act = bounds(compiled)
    used = act > 0
    err = (est[used] - act[used]) / act[used]
    tm = base.target.tile_memory
    return err, est[used], act[used], tm


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="mk1")
    ap.add_argument("--tiles", type=int, default=64, help="tiles per IPU")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--ipus", default="1,2")
    ap.add_argument("--models", default="cnn,transformer")
    ap.add_argument("--levers", default=",".join(k for k in LEVERS))
    ap.add_argument("--pressure", type=float, default=1.0)
    ap.add_argument("--shape-tiles", type=int, default=None,
                    help="tiles per IPU of the micro-batch lever's named shapes "
                         "(default: the whole IPU)")
    ap.add_argument("--micro-batch", type=int, default=MICRO_BATCH,
                    help="the micro-batch lever's named shapes' micro-batch, halved compiled")
    ap.add_argument("--near", type=float, default=0.75,
                    help="tiles whose compiled maximum live bytes are at least this share of "
                         "tileMemory count in the under-estimate figures (default 0.75)")
    ap.add_argument("--seq-lens", default="128,1024",
                    help="the serialise lever's sequence lengths (GPT-2)")
    ap.add_argument("--margin", type=float, default=0.01,
                    help="tiles within this share of tileMemory are not judged (default 1 %%)")
    a = ap.parse_args(argv)
    seeds = [int(x) for x in a.seeds.split(",")]
    ipus_list = [int(x) for x in a.ipus.split(",")]
    for lever in a.levers.split(","):
        errs, wrong, judged, worst, under = [], 0, 0, 0.0, []
        models = a.models.split(",") if lever != "serialise" else \
            [f"{SERIALISE_ARCH}@{n}" for n in a.seq_lens.split(",")]
        for model in models:
            for ipus in ipus_list:
                if lever == "amp-per-stage" and ipus == 1:
                    continue
                for seed in seeds:
                    t = time.time()
                    err, est, act, tm = case(a.preset, a.tiles, model, ipus, seed, lever,
                                             a.pressure, a.shape_tiles, a.micro_batch)
                    far = np.abs(act - tm) > a.margin * tm
                    bad = ((est > tm) != (act > tm)) & far
                    w = int(bad.sum())
                    # how far from tileMemory the estimate was where its verdict was wrong
                    worst = max(worst, float(np.abs(est[bad] - tm).max() / tm) if w else 0.0)
                    wrong += w
                    judged += int(far.sum())
                    errs.append(err)
                    # the under-estimate of tiles near tileMemory, as a share of it: what a
                    # verdict's margin must cover (tilemem.figures.config.margins)
                    near = act >= a.near * tm
                    under.append(np.maximum(act[near] - est[near], 0) / tm)
                    print(f"{lever:14s} {model:11s} ipus={ipus} seed={seed}: error median "
                          f"{100 * np.median(err):+.2f} %, range {100 * err.min():+.2f} .. "
                          f"{100 * err.max():+.2f} %; over tileMemory {int((act > tm).sum())} "
                          f"(estimated {int((est > tm).sum())}); wrong verdicts {w}; "
                          f"{time.time() - t:.1f} s", flush=True)
        e = np.concatenate(errs) if errs else np.zeros(1)
        print(f"== {lever}: {len(e)} tiles, error median {100 * np.median(e):+.2f} %, "
              f"|error| median {100 * np.median(np.abs(e)):.2f} %, range "
              f"{100 * e.min():+.2f} .. {100 * e.max():+.2f} %, wrong verdicts {wrong} of "
              f"{judged} tiles judged, each estimated within {100 * worst:.2f} % of tileMemory",
              flush=True)
        u = np.concatenate(under) if under else np.zeros(0)
        if len(u):
            print(f"== {lever}: under-estimate on {len(u)} tiles near tileMemory (compiled >= "
                  f"{a.near:g} of it), share of tileMemory: median {100 * np.median(u):.2f} %, "
                  f"95th percentile {100 * np.percentile(u, 95):.2f} %, max "
                  f"{100 * u.max():.2f} %", flush=True)
        # of every tile, as a share of its compiled bytes: near tileMemory, the same share of
        # it (the named shapes of the micro-batch lever are not near it on few tiles)
        rel = np.maximum(-e, 0)
        print(f"== {lever}: under-estimate as a share of the compiled bytes, all {len(e)} "
              f"tiles: 95th percentile {100 * np.percentile(rel, 95):.2f} %, 99th "
              f"{100 * np.percentile(rel, 99):.2f} %, max {100 * rel.max():.2f} %", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
