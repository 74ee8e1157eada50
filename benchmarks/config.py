"""``tilemem config`` on named shapes, checked by compiling: for each shape, its one-IPU report
at micro-batch 1 (``tilemem generate`` with the shape's options) is answered (timed), and the
answer compiled with the generator (its splits, levers and micro-batch) must fit (every tile's
maximum live bytes under tileMemory, ``tilemem.liveness``); its neighbours in the ranking (one
IPU fewer at the same micro-batch with every lever, double the micro-batch, the dearest lever
dropped), compiled, must not.

    python benchmarks/config.py --preset mk2 [--tiles 0] --shapes bert-base,bert-large \\
        [--max-ipus 16] [--no-check] [--neighbours]

Prints one line a shape (the answer, its time, its compiled worst tile) and one a neighbour.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

#: Named shapes (``tilemem generate``'s transformer shape options).
SHAPES = {
    "bert-base": dict(layers=12, hidden=768, heads=12, seq_len=128, vocab=30522),
    "bert-large": dict(layers=24, hidden=1024, heads=16, seq_len=128, vocab=30522),
}


def worst_over(r) -> tuple[int, int]:
    """``(tiles over tileMemory, worst tile's maximum live bytes)`` of ``r``."""
    from tilemem.liveness import max_live_all

    live = np.array([m.max_live_bytes for m in max_live_all(r, r.tiles_in_use())], np.int64)
    return int((live > r.target.tile_memory).sum()), int(live.max())


def compiled(preset, tiles, shape, c, seed):
    """The program of ``shape`` compiled with configuration ``c`` by the generator."""
    from tilemem.figures.config.answer import generator_options
    from tilemem.generate import Levers, generate_report
    from tilemem.generate.transformershape import Shape

    o = generator_options(c)
    return generate_report(preset, tiles=tiles, seed=seed, model="transformer",
                           shape=Shape(micro_batch=o["micro_batch"], **SHAPES[shape]),
                           splits=o["splits"], levers=Levers(**o["levers"]),
                           stash_mapping="like")


def main(argv=None) -> int:
    import tilemem
    from tilemem.generate import generate_report
    from tilemem.generate.transformershape import Shape

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="mk2")
    ap.add_argument("--tiles", type=int, default=0, help="tiles per IPU; 0: the whole IPU")
    ap.add_argument("--shapes", default="bert-base,bert-large")
    ap.add_argument("--max-ipus", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-check", action="store_true", help="answer only, do not compile")
    ap.add_argument("--neighbours", action="store_true", help="compile the neighbours too")
    a = ap.parse_args(argv)
    tiles = a.tiles or None
    for name in a.shapes.split(","):
        t = time.time()
        r = generate_report(a.preset, tiles=tiles, seed=a.seed, model="transformer",
                            shape=Shape(micro_batch=1, **SHAPES[name]))
        made = time.time() - t
        t = time.time()
        c = tilemem.configure(r, tilemem.ConfigQuery(max_ipus=a.max_ipus))
        took = time.time() - t
        best = c.best
        print(f"{name}: report {made:.0f} s; config {took:.1f} s ({c.answer.evaluated} stage "
              f"estimates): {best.summary if best else 'nothing fits'}"
              + (f", margin {100 * best.margin:.2f} %" if best else ""), flush=True)
        if best is None or a.no_check:
            continue
        tm = r.target.tile_memory
        t = time.time()
        over, worst = worst_over(compiled(a.preset, tiles, name, best, a.seed))
        print(f"  compiled: {over} tile(s) over tileMemory, worst {worst:,} "
              f"({100 * worst / tm:.1f} % of it); {time.time() - t:.0f} s", flush=True)
        if not a.neighbours:
            continue
        for n in c.answer.near_misses:
            if n.configuration is None:
                continue
            t = time.time()
            over, worst = worst_over(compiled(a.preset, tiles, name, n.configuration, a.seed))
            print(f"  neighbour {n.summary}: compiled, {over} tile(s) over tileMemory, worst "
                  f"{worst:,} ({100 * worst / tm:.1f} %); {time.time() - t:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
