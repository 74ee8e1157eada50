"""What a visit run's way back (``tilemem.pack.run.tasks._carry_back``) buys, on the same forward
results: visit runs of neighbouring tiles as ``auto`` makes them (the heuristic, then the
quick search, each tile carried over to the next), then the way back; the gaps before and
after it, and its seconds against the runs'.

    python benchmarks/way_back.py REPORT [--seconds 0.3] [--stop 0.002] [--runs 8]

The runs start at tiles spread over the report (``--runs`` of ``--chain`` tiles each); the
search is timed, so the forward results differ between invocations, but each comparison is
on one of them.
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("--seconds", type=float, default=0.3, help="a tile's search")
    ap.add_argument("--stop", type=float, default=0.002, help="a tile's stop gap")
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--chain", type=int, default=16)
    a = ap.parse_args()

    from tilemem.liveness import class_intervals
    from tilemem.load import load_report
    from tilemem.pack.run import tasks as T
    from tilemem.pack.bounds import TileBound, tile_bounds
    from tilemem.pack.carry import tensor_keys
    from tilemem.pack.compiled import GROUPS, ready
    from tilemem.pack.kinds import Pass
    from tilemem.rules import Rules

    way_back = T._carry_back
    T._carry_back = lambda *args: None   # the forward results alone first
    r = load_report(a.report)
    ready(*GROUPS)
    class_intervals(r)
    tensor_keys(r)
    shared = T._Shared(r, Rules())
    tiles_in_use = r.tiles_in_use()
    starts = tiles_in_use[np.linspace(0, len(tiles_in_use) - a.chain, a.runs).astype(int)]
    before, after, forward_s, back_s = [], [], 0.0, 0.0
    for start in starts.tolist():
        tiles = [t for t in tiles_in_use.tolist() if start <= t < start + a.chain]
        bounds = tile_bounds(r, tiles, 10.0)
        run = T.RunTask([T.TileTask(t, Pass.QUICK, None, None, TileBound.of(bounds[t]),
                                    a.seconds, 0, stop_gap=a.stop) for t in tiles])
        t0 = time.time()
        out = T._solve_run(shared, run, None)
        t1 = time.time()
        gaps = [res.gap * 100 for _, res, _ in out]
        way_back(shared, run, out, None)
        t2 = time.time()
        forward_s, back_s = forward_s + t1 - t0, back_s + t2 - t1
        before += gaps
        after += [res.gap * 100 for _, res, _ in out]
        print(f"tiles {tiles[0]}-{tiles[-1]}: median {np.median(gaps):.3f} % -> "
              f"{np.median(after[-len(tiles):]):.3f} %, {t1 - t0:.2f} s + {t2 - t1:.2f} s")
    for name, g in (("without", before), ("with", after)):
        g = np.array(g)
        print(f"{name} the way back: mean gap {g.mean():.3f} %, median {np.median(g):.3f} %, "
              f"within 1 % {100 * np.mean(g <= 1):.1f} %")
    print(f"seconds: runs {forward_s:.1f}, way back {back_s:.1f}")


if __name__ == "__main__":
    main()
