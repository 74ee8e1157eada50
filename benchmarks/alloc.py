"""Packing speed and quality on a generated report: tiles per second and mean gap to the bound.

Runs ``tilemem.pack.driver.allocate`` with each method on the same report and prints, per
method, wall seconds, tiles per second, tiles that fit, overflowed bytes and the mean gap of
totalIncludingGaps to the tile's bound (maximum live bytes), with ratios against ``replay``
(first fit in the report's own order) measured in the same run.

    python benchmarks/alloc.py                      # full Mk2 report (1472 tiles; ~90 s to make)
    python benchmarks/alloc.py --preset mk1 --tiles 64 --methods replay,heuristic,auto
    python benchmarks/alloc.py --report some.capnp  # an existing report instead

``auto``/``exact`` on a full report take about time-limit x tiles / workers: pass
``--tiles``, ``--sample`` or a small ``--time-limit`` for those.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="mk2", choices=["mk1", "mk2"])
    ap.add_argument("--tiles", type=int, default=None, help="tiles of the generated report")
    ap.add_argument("--pressure", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--report", default=None, help="use this report instead of generating")
    ap.add_argument("--methods", default="replay,heuristic")
    ap.add_argument("--sample", type=int, default=None,
                    help="pack only this many tiles, spread over the report")
    ap.add_argument("--time-limit", type=float, default=1.0)
    ap.add_argument("--workers", type=int, default=None)
    a = ap.parse_args(argv)

    from tilemem.pack.driver import allocate

    t0 = time.perf_counter()
    if a.report:
        from tilemem.load import load_report

        r = load_report(a.report)
        what = a.report
    else:
        from tilemem.generate import generate_report

        r = generate_report(a.preset, tiles=a.tiles, pressure=a.pressure, seed=a.seed)
        what = f"generated {a.preset}, {r.num_tiles} tiles, pressure {a.pressure}"
    made = time.perf_counter() - t0
    tiles = r.tiles_in_use()
    if a.sample:
        tiles = tiles[np.linspace(0, len(tiles) - 1, min(a.sample, len(tiles))).astype(int)]
    per_tile = np.bincount(r.tile[r.allocated], minlength=r.num_tiles)[tiles]
    print(f"{what}: {r.num_vars:,} variables, {len(tiles)} tiles packed "
          f"(mean {per_tile.mean():.0f} variables per tile); report ready in {made:.1f} s")
    rows = []
    for method in a.methods.split(","):
        t0 = time.perf_counter()
        res = allocate(r, method=method, tiles=tiles, time_limit=a.time_limit,
                       workers=a.workers)
        wall = time.perf_counter() - t0
        s = res.summary()
        rows.append((method, wall, len(tiles) / wall, s["tilesThatFit"], s["overflowBytes"],
                     s["meanGap"], s["optimal"]))
        print(f"  {method:9s} {wall:8.1f} s  {len(tiles) / wall:8.1f} tiles/s  "
              f"fit {s['tilesThatFit']:5d}  overflowed {s['overflowBytes']:>10,}  "
              f"mean gap {100 * s['meanGap']:6.2f}%  optimal {s['optimal']}", flush=True)
    base = next((x for x in rows if x[0] == "replay"), rows[0])
    print(f"ratios against {base[0]} (same run):")
    for method, wall, tps, fit, over, gap, _ in rows:
        print(f"  {method:9s} speed x{tps / base[2]:.2f}  mean gap x{gap / base[5]:.2f}  "
              f"overflowed bytes x{over / base[4] if base[4] else float('nan'):.2f}  "
              f"tiles that fit {fit - base[3]:+d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
