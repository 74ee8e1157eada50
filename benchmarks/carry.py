"""Allocations carried over between neighbouring tiles (``tilemem.pack.carry``) against each
tile searched alone, the same seconds a tile, in the same run.

For each range of neighbouring tiles, packs every tile with the quick search
(``solve_tile(..., "quick")``, ``--seconds`` each, stopped at the first pass's 0.2 %) in runs
of each length of ``--lengths``: run length 1 is the baseline (each tile from its own
heuristic); in a longer run each tile starts from the better of its heuristic's allocation and
its predecessor's carried over, as ``alloc``'s first pass does (``Policy.chain``, ``tilemem.pack.run.plan``). Prints,
per range and run length, the gap to the bound (median, mean, 90th percentile), the tiles
above 1 %, the seconds taken and the ratio of the median to the baseline's. Every allocation
passes ``tilemem.check`` on its tile.

    python benchmarks/carry.py mk2.capnp --ranges 1000-1095,560-655 --lengths 1,8,16,32

(A report as Poplar writes it: ``tilemem generate --preset mk2 --seed K``, steps removed.)
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("--ranges", default="1000-1095", help="ranges of tiles, A-B (inclusive)")
    ap.add_argument("--lengths", default="1,8,16,32", help="run lengths (1: the baseline)")
    ap.add_argument("--seconds", type=float, default=0.13, help="quick search a tile")
    a = ap.parse_args(argv)

    from tilemem.check import check_allocation
    from tilemem.liveness import class_intervals
    from tilemem.load import load_report
    from tilemem.pack.bounds import tile_bounds
    from tilemem.pack.carry import carry_over
    from tilemem.pack.run.plan import DEFAULT_POLICY
    FIRST_STOP = DEFAULT_POLICY.first_stop
    from tilemem.pack.portfolio import solve_tile
    from tilemem.pack.problem import TileProblem

    from tilemem.pack.search import warm_up

    warm_up()   # compiled before the clock starts: not charged to the first run length
    r = load_report(a.report)
    intervals = class_intervals(r)
    lengths = [int(x) for x in a.lengths.split(",")]
    print(f"{a.report}: quick search {a.seconds} s a tile; gap to the bound in %")
    print(f"{'tiles':>11} {'run':>4} {'median':>7} {'mean':>6} {'p90':>6} {'>1%':>4} "
          f"{'seconds':>8} {'median/alone':>12}")
    for part in a.ranges.split(","):
        lo, hi = (int(x) for x in part.split("-"))
        tiles = list(range(lo, hi + 1))
        bounds = tile_bounds(r, tiles)
        problems = {t: TileProblem.from_report(r, t, class_intervals=intervals) for t in tiles}
        base = None
        for length in lengths:
            gaps = []
            column = r.offset.copy()
            t0 = time.perf_counter()
            for start in range(0, len(tiles), length):
                prev = None
                for t in tiles[start:start + length]:
                    p = problems[t]
                    carried = None
                    if prev is not None:
                        off = carry_over(r, prev[0], prev[1], p)
                        carried = None if off is None else (prev[0], off)
                    res, off = solve_tile(p, "quick", time_limit=a.seconds, bound=bounds[t],
                                          carried=carried, stop_gap=FIRST_STOP)
                    column[p.rows] = off
                    prev = (t, off)
                    gaps.append(res.gap * 100)
            took = time.perf_counter() - t0
            bad = [v for v in check_allocation(r, column).violations if v.tile in problems]
            if bad:
                raise SystemExit(f"tiles {part}, runs of {length}: the checker found {bad[0]}")
            g = np.array(gaps)
            med = float(np.median(g))
            base = med if base is None else base
            print(f"{part:>11} {length:>4} {med:7.3f} {g.mean():6.3f} "
                  f"{np.percentile(g, 90):6.3f} {int((g > 1).sum()):4d} {took:8.1f} "
                  f"{med / base if base else float('nan'):12.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
