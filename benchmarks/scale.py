"""Scaling out: tiles per second with the local process pool and a localhost Dask cluster.

Solves the same sample of tiles of a multi-IPU generated report (the heuristic, one task per
tile, identical tiles not merged so every task does work) with

- ``inline``: one process, no executor (the per-tile cost),
- ``pool``: ``tilemem.pack.workers.cluster.LocalPool`` with 2 forked workers,
- ``dask-1`` / ``dask-2``: a Dask ``LocalCluster`` of 1 and 2 single-threaded workers on
  127.0.0.1 (``tilemem.pack.workers.daskexec.DaskExecutor``, the report scattered once),

all in the same run, and prints tiles per second with ratios against the pool. Then the
per-task overhead: the same executors running a task that does nothing, seconds per task.

    python benchmarks/scale.py                       # generated 2-IPU Mk1 (about 2 min), 300 tiles
    python benchmarks/scale.py --report r.capnp --sample 200

The machine's cores bound what a localhost cluster can show: on 2 cores, 2 workers is the
most that can run at once. It ends with a paper estimate of a 16-IPU report
(23,552 tiles) from the measured per-tile cost and Dask overhead.
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def solve_one(state, tile, deadline):
    """One tile with the heuristic (what ``tilemem alloc --method heuristic`` runs per tile)."""
    from tilemem.pack.run.tasks import _replay_order
    from tilemem.pack.portfolio import solve_tile
    from tilemem.pack.problem import TileProblem

    report, rules = state
    p = TileProblem.from_report(report, int(tile), rules)
    res, _ = solve_tile(p, "heuristic", replay_order=_replay_order(report, int(tile), p.rows))
    return res.overflow_bytes


def nothing(state, task, deadline):
    return task


def timed(executor, fn, tasks) -> tuple[float, float]:
    """(seconds to start the executor, seconds to run every task)."""
    t0 = time.perf_counter()
    with executor as ex:
        t1 = time.perf_counter()
        got = sorted(i for i, _ in ex.run(fn, tasks))
        t2 = time.perf_counter()
    assert got == list(range(len(tasks))), "a task was lost"
    return t1 - t0, t2 - t1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="mk1", choices=["mk1", "mk2"])
    ap.add_argument("--ipus", type=int, default=2)
    ap.add_argument("--tiles", type=int, default=None, help="tiles per IPU of the generated "
                    "report (default: the whole IPU)")
    ap.add_argument("--report", default=None, help="use this report instead of generating")
    ap.add_argument("--sample", type=int, default=300, help="tiles solved, spread over the report")
    ap.add_argument("--noop-tasks", type=int, default=2000)
    ap.add_argument("--skip-dask", action="store_true")
    a = ap.parse_args(argv)

    from functools import partial

    from tilemem.pack.compiled import GROUPS, ready
    from tilemem.pack.workers.cluster import LocalPool
    from tilemem.pack.workers.daskexec import DaskExecutor
    from tilemem.rules import DEFAULT_RULES

    t0 = time.perf_counter()
    if a.report:
        from tilemem.load import load_report

        r = load_report(a.report)
        what = a.report
    else:
        from tilemem.generate import generate_report

        r = generate_report(a.preset, tiles=a.tiles, ipus=a.ipus)
        what = f"generated {a.preset} x {a.ipus} IPUs"
    made = time.perf_counter() - t0
    used = r.tiles_in_use()
    tiles = used[np.linspace(0, len(used) - 1, min(a.sample, len(used))).astype(int)].tolist()
    print(f"{what}: {r.num_tiles:,} tiles, {r.num_vars:,} variables; {len(tiles)} tiles "
          f"solved (heuristic); report ready in {made:.0f} s")
    ready(*GROUPS)
    state = (r, DEFAULT_RULES)

    runs = [("inline", lambda: LocalPool(state, workers=1)),
            ("pool-2", lambda: LocalPool(state, workers=2))]
    if not a.skip_dask:
        runs += [(f"dask-{w}", lambda w=w: DaskExecutor("local", state, workers=w,
                                                       setup=partial(ready, *GROUPS)))
                 for w in (1, 2)]
    rows = []
    for name, make in runs:
        start, secs = timed(make(), solve_one, tiles)
        rows.append((name, start, secs, len(tiles) / secs))
    base = dict((n, tps) for n, _, _, tps in rows)["pool-2"]
    print(f"\n{'executor':<8} {'start s':>8} {'run s':>8} {'tiles/s':>8} {'vs pool-2':>9}")
    for name, start, secs, tps in rows:
        print(f"{name:<8} {start:8.1f} {secs:8.1f} {tps:8.1f} {tps / base:9.2f}")

    noop = list(range(a.noop_tasks))
    over = []
    for name, make in [("pool-2", lambda: LocalPool(None, workers=2))] + (
            [] if a.skip_dask else [("dask-2", lambda: DaskExecutor("local", None, workers=2))]):
        _, secs = timed(make(), nothing, noop)
        over.append((name, secs / len(noop)))
    print(f"\nper-task overhead ({len(noop)} tasks that do nothing):")
    for name, s in over:
        print(f"{name:<8} {s * 1e3:8.2f} ms per task")

    per_tile = dict((n, s) for n, _, s, _ in rows)["inline"] / len(tiles)
    dask_task = dict(over).get("dask-2", 0.0)
    print(f"\npaper estimate (not measured): 23,552 tiles (16 IPUs) of this sample's kind, "
          f"heuristic at {per_tile * 1e3:.0f} ms per tile on one core, Dask at "
          f"{dask_task * 1e3:.1f} ms per task (the no-op rate: a floor the scheduler sets "
          "however many workers), identical tiles not merged:")
    n = 23552
    for w in (1, 2, 8, 32, 128, 512):
        est = max(n * (per_tile + dask_task) / w, n * dask_task)
        print(f"  {w:4d} workers: {est / 60:8.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
