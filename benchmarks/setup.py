"""What a tile's set-up costs in ``alloc``'s first pass, part by part, against one first fit of
the same tile in the same run.

On a Mk2 tile the first pass gives each tile about 0.2 s of a worker, and everything besides
the search (the tile's problem, the bound's region clique, the heuristic's start, the
neighbour's allocation carried over, the search's model) comes out of it: set-up time is
search time. For sampled runs of neighbouring tiles, as the first pass takes them (each tile
from its predecessor's allocation after 0.05 s of quick search), prints the
milliseconds a tile of each part and their ratio to one first fit of the tile (the baseline,
a fixed amount of work measured in the same run, so ratios compare across machines).

    python benchmarks/setup.py mk2.capnp --runs 4

(A report as Poplar writes it: ``tilemem generate --preset mk2 --seed K``, steps removed.)
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("--runs", type=int, default=4, help="runs of 16 neighbouring tiles")
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args(argv)

    from tilemem.liveness import class_intervals
    from tilemem.load import load_report
    from tilemem.model.names import tensor_keys
    from tilemem.pack import heuristic
    from tilemem.pack.bounds import region_clique, tile_bounds
    from tilemem.pack.carry import carry_over
    from tilemem.pack.run.plan import DEFAULT_POLICY
    from tilemem.pack.compiled import GROUPS, ready
    from tilemem.pack.run.tasks import _replay_order
    CHAIN = DEFAULT_POLICY.chain
    from tilemem.pack.firstfit import first_fit
    from tilemem.pack.params import DEFAULT_PARAMS
    from tilemem.pack.portfolio import _meets, solve_tile
    from tilemem.pack.quick import NEAR
    from tilemem.pack.problem import TileProblem
    from tilemem.pack.search.sweep import build_model

    r = load_report(args.report)
    intervals = class_intervals(r)
    tensor_keys(r)
    ready(*GROUPS)
    tiles_in_use = r.tiles_in_use()
    rng = np.random.default_rng(args.seed)
    starts = rng.choice(max(len(tiles_in_use) - CHAIN, 1), args.runs, replace=False)
    parts = ("problem", "region clique", "carry over", "heuristic", "search model")
    spent = dict.fromkeys(parts + ("first fit",), 0.0)
    count = 0
    for s in starts:
        run = tiles_in_use[s:s + CHAIN]
        bounds = tile_bounds(r, run)
        prev = None
        for t in run.tolist():
            t0 = time.perf_counter()
            p = TileProblem.from_report(r, t, class_intervals=intervals)
            t1 = time.perf_counter()
            region_clique(p)
            t2 = time.perf_counter()
            carried = carry_over(r, prev[0], prev[1], p) if prev is not None else None
            t3 = time.perf_counter()
            # the heuristic's start as solve_tile makes it: the report's order, and the
            # heuristic's first order unless a carried allocation is near the bound
            near = carried is not None and _meets(
                p, carried, bounds[t][0] + int(bounds[t][0] * (2 * NEAR)))
            orders = DEFAULT_PARAMS.hint_orders
            heuristic.heuristic_runs(p, bound=bounds[t][0],
                                     extra_orders=[_replay_order(r, t, p.rows)],
                                     orders=orders - 1 if near else orders)
            t4 = time.perf_counter()
            build_model(p)
            t5 = time.perf_counter()
            first_fit(p)
            t6 = time.perf_counter()
            for k, (a, b) in zip(parts + ("first fit",),
                                 ((t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t5), (t5, t6))):
                spent[k] += b - a
            count += 1
            # the next tile's donor: this one after a short quick search, as in a run
            _, off = solve_tile(p, "quick", time_limit=0.05, bound=bounds[t],
                                carried=(prev[0], carried) if carried is not None else None)
            prev = (t, off)
    base = spent["first fit"] / count
    print(f"{count} tiles in {len(starts)} runs of {CHAIN}; one first fit {base * 1e3:.1f} ms")
    total = 0.0
    for k in parts:
        ms = spent[k] / count
        total += ms
        print(f"  {k:14s} {ms * 1e3:7.1f} ms  {ms / base:5.2f} first fits")
    print(f"  {'set-up':14s} {total * 1e3:7.1f} ms  {total / base:5.2f} first fits")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
