"""``split``'s per-stage levers with split's default reading of the stash, compiled: each
stage whose levers *fit* is compiled with the split and those levers (``tilemem generate``,
the family's default stash: the transformer keeps its activations, the cnn its stage input)
and its IPU's tiles bounded (``tilemem.liveness``); a tile over tileMemory is a false *fits*.
``benchmarks/false_fits.py`` asks split with the family's stash; this asks it as a user who
does not say.

    python benchmarks/split_stage_levers.py [--tiles 12,16] [--pressures 1.6,2.2] \\
        [--seeds 1,2,3,4,5] [--models transformer,cnn]

Prints each false *fits* and one summary line: *fits* compiled, false, *close*, not compiled
(a lever the generator has no option for: half the micro-batch).
"""
from __future__ import annotations

import argparse

import numpy as np

#: the plan's levers as the generator's compile options (tests/test_split_levers.py's)
COMPILED = {"half-momentum": dict(half_momentum=True), "half-partials": dict(half_partials=True),
            "amp": dict(amp=(0.3,)), "recompute": dict(recompute="all"),
            "offload": dict(offload_state=True), "rts": dict(replicas=4, rts=True),
            "rts-weights": dict(replicas=4, rts=True, rts_weights=True)}


def main(argv=None) -> int:
    import tilemem
    from tilemem.figures.plan import PLAN_LEVERS
    from tilemem.generate import Levers, generate_report
    from tilemem.liveness import max_live_all

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", default="12,16")
    ap.add_argument("--pressures", default="1.6,2.2")
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--models", default="transformer,cnn")
    a = ap.parse_args(argv)
    labels = {x[1]: x[0] for x in PLAN_LEVERS}
    fits = false = close = skipped = 0
    worst = 0.0
    for model in a.models.split(","):
        for tiles in map(int, a.tiles.split(",")):
            for pressure in map(float, a.pressures.split(",")):
                for seed in map(int, a.seeds.split(",")):
                    kw = dict(tiles=tiles, steps=500, seed=seed, model=model,
                              pressure=pressure)
                    r = generate_report("mk1", **kw)
                    tm, T = r.target.tile_memory, r.target.ipu_tiles
                    ans = tilemem.split(r, ipus=2).answer
                    for s in ans.stages:
                        p = s.levers
                        if p is None:
                            continue
                        if not p.fits:
                            close += p.verdict == "close"
                            continue
                        if any(labels[x] not in COMPILED for x in p.levers):
                            skipped += 1
                            continue
                        opts = {}
                        for x in p.levers:
                            opts.update(COMPILED[labels[x]])
                        c = generate_report("mk1", splits=tuple(ans.split_indices),
                                            levers=Levers(**opts), **kw)
                        w = max(m.max_live_bytes for m in
                                max_live_all(c, np.arange(s.ipu * T, (s.ipu + 1) * T)))
                        fits += 1
                        if w > tm:
                            false += 1
                            worst = max(worst, (w - tm) / tm)
                            print(f"false fits: {model} tiles {tiles} pressure {pressure} "
                                  f"seed {seed} IPU {s.ipu} {p.levers}: {w:,} B", flush=True)
    print(f"fits compiled {fits}, false {false} (worst {100 * worst:.2f} % over), "
          f"close {close}, not compiled {skipped}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
