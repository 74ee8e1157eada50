"""How ``auto``'s quality at a fixed budget grows with the number of Dask workers.

The same report and budget, allocated by ``tilemem.pack.allocate`` on a Dask
``LocalCluster`` of 1, 2, ... single-threaded workers (``scheduler="local"``), and, as the
baseline measured in the same run, on this machine's process pool with as many workers as
the largest cluster. For each: tiles within 1 % of their bound, the median gap, the slices
the plan handed out (visits and revisits) and the wall time of the passes (load and bounds
aside).

    python benchmarks/plan_workers.py REPORT --budget 60 --workers 1,2,4

A worker is a process: past the machine's cores more workers share the same cores, so on
a laptop the curve flattens at its core count; on a cluster it is the shape of the run.
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def one(report, budget: float, scheduler: str | None, workers: int) -> dict:
    from tilemem.pack.run.driver import RunOptions, allocate

    t0 = time.time()
    a = allocate(report, budget=budget, run=RunOptions(scheduler=scheduler, workers=workers))
    wall = time.time() - t0
    s = a.summary()
    passes = [p for p in s["passes"] if not p["pass"].startswith("maximum live")]
    return {"within": s["withinOnePercent"], "median": s["medianGap"],
            "visits": sum(p["tiles"] for p in passes if p["pass"].startswith("visits")),
            "revisits": sum(p["tiles"] for p in passes if p["pass"].startswith("revisits")),
            "passes_s": sum(p["seconds"] for p in passes), "wall": wall}


def main(argv=None) -> int:
    from tilemem.load import load_report

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--workers", default="1,2,4", help="Dask workers, comma-separated")
    args = ap.parse_args(argv)
    counts = [int(x) for x in args.workers.split(",")]
    report = load_report(args.report)
    rows = [(f"pool-{max(counts)}", one(report, args.budget, None, max(counts)))]
    for k in counts:
        rows.append((f"dask-{k}", one(report, args.budget, "local", k)))
    print(f"budget {args.budget:g} s, {len(report.tiles_in_use())} tiles")
    print(f"{'run':10s} {'within 1%':>9s} {'median':>8s} {'visit runs':>10s} {'revisits':>8s}"
          f" {'passes':>8s} {'wall':>7s}")
    for name, r in rows:
        print(f"{name:10s} {r['within'] * 100:8.1f}% {r['median'] * 100:7.3f}% {r['visits']:10d}"
              f" {r['revisits']:8d} {r['passes_s']:7.1f}s {r['wall']:6.1f}s")
    base = np.array([r["within"] for _, r in rows[1:]])
    if len(base) > 1 and base[0] > 0:
        print("within 1 % against 1 worker: "
              + ", ".join(f"{n}: {r['within'] / base[0]:.2f}x" for n, r in rows[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
