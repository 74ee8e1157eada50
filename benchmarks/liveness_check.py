"""Liveness analyser and allocation checker on a full-size report, against baselines run here.

    python benchmarks/liveness_check.py                       # generated Mk1, 1216 tiles
    python benchmarks/liveness_check.py --report vars.json    # any report
    python benchmarks/liveness_check.py --cli                 # also time the two commands

Prints seconds for: ``max_live_all`` over every tile (with the report's class steps, and without
them, i.e. the chordal pass), ``check_allocation``; and ratios against baselines measured in the
same run on a subset of tiles:
- the checker's sort-by-offset sweep vs an all-pairs overlap check (numpy, per tile);
- the chordal maximum-weight clique vs networkx's exact ``max_weight_clique`` (on the two
  tiles of the subset with the fewest classes: networkx needs ~15 s for a full tile).
With ``--cli``: ``tilemem liveness`` and ``tilemem check`` end to end (load included) on the
report written as JSON; the target is under a minute each for a 1216-tile Mk1 report.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np


def seconds(f, *args, **kw):
    t = time.perf_counter()
    out = f(*args, **kw)
    return time.perf_counter() - t, out


def all_pairs_overlaps(r, tiles) -> int:
    """Baseline: conflicting overlapping pairs by testing every pair of each tile (numpy)."""
    inter = r.interference
    dense = np.zeros((r.num_classes, r.num_classes), bool)
    dense[inter.row_ids(), inter.indices] = True
    count = 0
    for t in tiles:
        rows = r.tile_rows(t)
        rows = rows[r.size[rows] > 0]
        s, e = r.offset[rows], r.offset[rows] + r.size[rows]
        c, al = r.eq_class[rows], r.always_live[rows]
        over = (s[:, None] < e[None, :]) & (s[None, :] < e[:, None])
        conf = al[:, None] | al[None, :] | (c[:, None] == c[None, :]) | dense[c[:, None], c[None, :]]
        count += int(np.triu(over & conf, 1).sum())
    return count


def networkx_max_live(r, tile) -> int:
    import networkx as nx

    from tilemem.liveness import always_live_bytes, class_graph

    g = class_graph(r, tile)
    g.remove_nodes_from([c for c, d in g.nodes(data=True) if d["bytes"] == 0])
    _, w = nx.max_weight_clique(g, weight="bytes")
    return int(always_live_bytes(r)[tile] + w)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", type=Path, help="a report to use instead of generating one")
    ap.add_argument("--preset", default="mk1")
    ap.add_argument("--tiles", type=int, help="tiles of the generated report (default: all)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--subset", type=int, default=32, help="tiles for the baselines")
    ap.add_argument("--cli", action="store_true", help="also time the commands end to end")
    args = ap.parse_args()

    from tilemem.check import check_allocation
    from tilemem.load import load_report, save_report
    from tilemem.liveness import max_live_all

    if args.report:
        dt, r = seconds(load_report, args.report)
        print(f"load {args.report}: {dt:.2f} s")
    else:
        from tilemem.generate import generate_report

        dt, r = seconds(generate_report, args.preset, tiles=args.tiles, seed=args.seed)
        print(f"generate {args.preset} ({r.num_tiles} tiles): {dt:.2f} s")
    print(f"report: {r.num_tiles:,} tiles, {r.num_vars:,} variables, {r.num_classes:,} classes, "
          f"{r.num_interference_edges:,} interference edges, "
          f"class steps: {'yes' if r.class_steps is not None else 'no'}")

    max_live_all(r, [0])                       # compile (numba cache) outside the timings
    check_allocation(r.with_offsets(r.offset), limit=1)

    t_live, found = seconds(max_live_all, r)
    methods = {}
    for m in found:
        methods[m.method] = methods.get(m.method, 0) + 1
    print(f"max_live_all, all tiles: {t_live:.2f} s  (methods {methods}, "
          f"{sum(not m.exact for m in found)} not exact)")
    if r.class_steps is not None:
        t_nosteps, found2 = seconds(max_live_all, replace(r, class_steps=None))
        same = [m.max_live_bytes for m in found] == [m.max_live_bytes for m in found2]
        print(f"max_live_all without class steps (graph path): {t_nosteps:.2f} s  "
              f"(same figures: {same})")
    t_check, res = seconds(check_allocation, r)
    print(f"check_allocation, all tiles: {t_check:.2f} s  (ok: {res.ok}, "
          f"{res.num_violations} violations, {len(res.overflowed_tiles())} tiles overflow)")

    # baselines on a subset of tiles
    rng = np.random.default_rng(0)
    tiles = np.sort(rng.choice(r.tiles_in_use(), min(args.subset, len(r.tiles_in_use())),
                               replace=False))
    sub_rows = np.isin(r.tile, tiles) & r.allocated
    t_pairs, n_pairs = seconds(all_pairs_overlaps, r, tiles)
    from dataclasses import replace as rep

    sub = rep(r, allocated=sub_rows)              # the same tiles through the checker
    t_sweep, res_sub = seconds(check_allocation, sub)
    assert res_sub.counts["overlap"] == n_pairs, (res_sub.counts["overlap"], n_pairs)
    print(f"overlap on {len(tiles)} tiles: all-pairs {t_pairs:.3f} s, whole checker (sweep + "
          f"every rule) {t_sweep:.3f} s: all-pairs / checker = {t_pairs / t_sweep:.1f}x")
    # networkx's exact search takes ~15 s per full tile here: use the 2 tiles of the subset
    # with the fewest classes
    k = np.array([len(np.unique(r.eq_class[r.tile_rows(t)])) for t in tiles])
    nx_tiles = np.sort(tiles[np.argsort(k, kind="stable")[:2]])
    t_nx, nx_vals = seconds(lambda: [networkx_max_live(r, int(t)) for t in nx_tiles])
    t_ours, ours = seconds(max_live_all, replace(r, class_steps=None), nx_tiles)
    assert nx_vals == [m.max_live_bytes for m in ours], (nx_vals, ours)
    print(f"max live on {len(nx_tiles)} tiles: networkx max_weight_clique {t_nx:.3f} s, "
          f"tilemem {t_ours:.4f} s: networkx / tilemem = {t_nx / t_ours:.0f}x")

    if args.cli:
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "report.json"
            save_report(r, p)
            for cmd in (["info"], ["liveness"], ["check"]):
                t = time.perf_counter()
                proc = subprocess.run([sys.executable, "-m", "tilemem", *cmd, str(p)],
                                      capture_output=True, text=True)
                dt = time.perf_counter() - t
                print(f"tilemem {cmd[0]} (load included): {dt:.2f} s, exit {proc.returncode}")
            print("(`tilemem info` is the loading baseline)")


if __name__ == "__main__":
    main()
