"""Packing speed and quality on a generated report: wall time, proven tiles, gap to the bound.

Runs ``tilemem.pack.run.driver.allocate`` with each method on the same report, as Poplar writes it
(``equivalenceClassSteps`` dropped unless ``--keep-steps``), and prints per method: wall
seconds, tiles per second, tiles proven optimal, the share of tiles ending within 1.01 x their
bound, the gap's median, 95th percentile and worst, overflowed bytes, tiles that fit, tiles
worse than replay (overflow, then end address) and the peak RSS so far; with ratios against
``replay`` (first fit in the report's own order) measured in the same run.

    python benchmarks/alloc.py --methods replay,auto         # full Mk2 report, default budget
    python benchmarks/alloc.py --preset mk1 --tiles 64 --methods replay,heuristic,auto
    python benchmarks/alloc.py --report some.capnp  # an existing report instead

``auto``/``exact`` spend at most ``--budget`` seconds on the whole run beyond the heuristic.
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
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--budget", type=float, default=240.0)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--keep-steps", action="store_true",
                    help="keep equivalenceClassSteps (Poplar's reports have none)")
    a = ap.parse_args(argv)
    import resource
    from dataclasses import replace

    from tilemem.pack.run.driver import RunOptions, allocate
    from tilemem.pack.run.plan import Policy

    t0 = time.perf_counter()
    if a.report:
        from tilemem.load import load_report

        r = load_report(a.report)
        what = a.report
    else:
        from tilemem.generate import generate_report

        r = generate_report(a.preset, tiles=a.tiles, pressure=a.pressure, seed=a.seed)
        what = f"generated {a.preset}, {r.num_tiles} tiles, pressure {a.pressure}"
    if not a.keep_steps and r.class_steps is not None:
        r = replace(r, class_steps=None)
        what += ", equivalenceClassSteps dropped"
    made = time.perf_counter() - t0
    tiles = r.tiles_in_use()
    if a.sample:
        tiles = tiles[np.linspace(0, len(tiles) - 1, min(a.sample, len(tiles))).astype(int)]
    per_tile = np.bincount(r.tile[r.allocated], minlength=r.num_tiles)[tiles]
    print(f"{what}: {r.num_vars:,} variables, {len(tiles)} tiles packed "
          f"(mean {per_tile.mean():.0f} variables per tile); report ready in {made:.1f} s")
    rows, first = [], None
    for method in a.methods.split(","):
        t0 = time.perf_counter()
        res = allocate(r, method=method, tiles=tiles, budget=a.budget,
                       policy=Policy(time_limit=a.time_limit),
                       run=RunOptions(workers=a.workers))
        wall = time.perf_counter() - t0
        s = res.summary()
        key = {t.tile: (t.overflow_bytes, t.total_including_gaps) for t in res.tiles}
        first = first or key
        worse = sum(key[t] > first[t] for t in key)
        rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 2**20
        rows.append((method, wall, len(tiles) / wall, s["tilesThatFit"], s["overflowBytes"],
                     s["medianGap"]))
        print(f"  {method:9s} {wall:7.1f} s  {len(tiles) / wall:7.1f} tiles/s  "
              f"optimal {s['optimal']:5d}  within 1% {100 * s['withinOnePercent']:5.1f}%  "
              f"gap median {100 * s['medianGap']:5.2f}% p95 {100 * s['p95Gap']:5.2f}% "
              f"worst {100 * s['maxGap']:5.2f}%  overflowed {s['overflowBytes']:>9,}  "
              f"fit {s['tilesThatFit']:5d}  worse than {a.methods.split(',')[0]} {worse}  "
              f"exact not reached {s['unreached']}  peak RSS {rss:.2f} GB", flush=True)
    base = next((x for x in rows if x[0] == "replay"), rows[0])
    print(f"ratios against {base[0]} (same run):")
    for method, wall, tps, fit, over, gap in rows:
        print(f"  {method:9s} speed x{tps / base[2]:.2f}  median gap x{gap / base[5]:.2f}  "
              f"overflowed bytes x{over / base[4] if base[4] else float('nan'):.2f}  "
              f"tiles that fit {fit - base[3]:+d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
